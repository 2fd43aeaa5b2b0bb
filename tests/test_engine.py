"""The analysis engine shared by pbrain-agz and the web board: chunked search on
one tree, the tactical guard under both rules, the winning line."""

import time

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from tiny_models import random_model

from agz_jax.game import symmetry
from agz_jax.nets import models
from agz_jax.play import engine, readings, trees

SIZE = 9
CAPACITY = 64
CHUNK = 8


@pytest.fixture(scope="session")
def eng(tmp_path_factory):
    # One net (the front ends' tests use Double Networks): half the compilation.
    # The shipped model searches forced moves only (SearchConfig.forced_moves,
    # answer_threats).
    model = models.load(random_model(tmp_path_factory.mktemp("engine") / "m", SIZE, seed=3,
                                     double=False))
    model = model._replace(config=model.config.replace(
        **{"search.forced_moves": True, "search.answer_threats": True}))
    e = engine.Engine(model, max_simulations=CAPACITY, chunk=CHUNK)
    e.warmup()
    return e


def position(rules, black, white, to_play=None):
    """A State from (x, y) lists; black moves when the counts are equal."""
    board = np.zeros(rules.num_actions, np.int8)
    for x, y in black:
        board[y * rules.size + x] = 1
    for x, y in white:
        board[y * rules.size + x] = -1
    if to_play is None:
        to_play = 0 if len(black) == len(white) else 1
    return engine.make_state(rules, board, to_play)


def at(x, y):
    return y * SIZE + x


@pytest.mark.parametrize("sims", [pytest.param(40, marks=pytest.mark.long), 13, 1])
def test_analysis_counts_exactly_the_simulations_asked(eng, sims):
    rules = eng.rules()
    state = position(rules, [(4, 4), (5, 5), (2, 6)], [(4, 5), (3, 3)])
    a = eng.analyse(rules, state, simulations=sims)
    board = np.asarray(state.board)
    assert a.reason == "search" and a.simulations == sims
    assert board[a.action] == 0
    counts = a.policy * sims  # the root visit distribution over the chunks
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-6)
    assert np.isclose(a.policy.sum(), 1.0) and np.all(a.policy[board != 0] == 0)
    assert np.isclose(a.prior.sum(), 1.0, atol=1e-5) and np.all(a.prior[board != 0] < 1e-6)
    assert -1.0 <= a.value <= 1.0 and a.win_prob == pytest.approx((a.value + 1) / 2)
    # Each move's value is known exactly where a simulation went through it.
    assert np.array_equal(np.isfinite(a.q), a.policy > 0)
    assert np.all(np.abs(a.q[a.policy > 0]) <= 1.0)


def test_move_values_average_to_the_root_value(eng):
    """The root's value is the mean over its visits: its own evaluation once,
    then each child's backed-up value once per visit. So (N + 1) * value - sum(N_a * q_a)
    is the same first evaluation whatever the number of simulations."""
    rules = eng.rules()
    state = position(rules, [(4, 4), (5, 5)], [(4, 5), (3, 3)])
    firsts = []
    for sims in (8, 24, 40):
        a = eng.analyse(rules, state, simulations=sims)
        visits = np.round(a.policy * sims)
        firsts.append((sims + 1) * a.value - np.nansum(visits * a.q))
    np.testing.assert_allclose(firsts, firsts[0], atol=1e-4)


def fresh_tree(fns, variables, key, states, allowed):
    """The engine's start program on a fresh root, written into blank buffers."""
    base = fns.blank(variables, key, states, allowed)
    return fns.start(variables, key, states, allowed, base, np.bool_(True))


def test_chunks_grow_one_tree(eng):
    """Simulations 0..5 then 5..12 expand nodes 1..12 once each: a chunk that
    restarted its node numbering would overwrite nodes and break the counts."""
    rules = eng.rules()
    fns = eng._fns(rules)
    state = position(rules, [(4, 4)], [])
    states = jax.tree.map(lambda x: jnp.asarray(x)[None], state)
    allowed = jnp.asarray(np.asarray(state.board) == 0)[None]
    key = jax.random.PRNGKey(0)
    tree = fresh_tree(fns, eng.variables, key, states, allowed)
    tree = fns.chunk(eng.variables, key, tree, jnp.int32(5))
    tree = fns.chunk(eng.variables, key, tree, jnp.int32(12))
    t = jax.tree.map(lambda x: np.asarray(x)[0], tree)
    assert t.node_visits[0] == 13  # the root's own visit + 12 simulations
    assert np.all(t.node_visits[1:13] >= 1) and np.all(t.node_visits[13:] == 0)
    # Every expanded node's count is 1 + its children's; every child is listed once.
    for node in range(13):
        children = t.children_index[node]
        assert t.node_visits[node] == 1 + t.children_visits[node].sum()
        listed = children[children != mctx.Tree.UNVISITED]
        assert np.all(t.parents[listed] == node)
    listed = t.children_index[:13][t.children_index[:13] != mctx.Tree.UNVISITED]
    assert sorted(listed) == list(range(1, 13))


def test_the_chunks_keys_are_the_eager_fold_ins():
    """Between chunks the engine folds the chunk's number into the tree's key
    with one compiled call: the keys ``jax.random.fold_in`` gives eagerly (a
    Gumbel search draws from them)."""
    key = jax.random.fold_in(jax.random.PRNGKey(3), 7)
    for done in (0, 16, 8191):
        np.testing.assert_array_equal(np.asarray(trees._fold_in(key, np.uint32(done + 1))),
                                      np.asarray(jax.random.fold_in(key, done + 1)))


@pytest.mark.parametrize("rule", ["freestyle", "standard"])
def test_guard_completes_five_then_blocks(eng, rule):
    rules = eng.rules(rule)
    # Black to move has an open four on row 2 (x = 2..5) and white a four on
    # column 8: black wins at 1,2 or 6,2.
    black = [(2, 2), (3, 2), (4, 2), (5, 2), (0, 7)]
    white = [(8, 0), (8, 1), (8, 2), (8, 3), (0, 5)]
    a = eng.analyse(rules, position(rules, black, white, to_play=0), simulations=16)
    assert a.reason == "win" and a.action in (at(1, 2), at(6, 2)) and a.simulations == 0
    assert a.win_prob == 1.0
    # Threes on both sides: no guard of fives, an ordinary search; with the VCF
    # reading, black's open three is a win by fours (the open four next).
    threes = position(rules, [(2, 2), (3, 2), (4, 2), (1, 7), (6, 6)],
                      [(8, 0), (8, 1), (8, 2), (0, 5), (7, 7)])
    a = eng.analyse(rules, threes, simulations=16)
    assert a.reason == "vcf" and a.action in (at(1, 2), at(5, 2)) and a.simulations == 0
    eng.vcf = False
    try:
        a = eng.analyse(rules, threes, simulations=16)
    finally:
        eng.vcf = True
    assert a.reason == "search"
    # White to move, no four of its own: it must block at 0,4 (0,-1 is off the board).
    black = [(0, 0), (0, 1), (0, 2), (0, 3), (5, 5)]
    white = [(8, 8), (7, 8), (6, 8), (4, 4)]
    a = eng.analyse(rules, position(rules, black, white), simulations=16)
    assert (a.reason, a.action) == ("block", at(0, 4))
    assert a.simulations == 16 and a.policy[at(0, 4)] == 1.0


def test_the_vct_reading_plays_its_own_win_and_leaves_a_losing_move(eng):
    """With ``vct``: a double three to make (no VCF) is played at once as the
    first threat of a win by threats; and after a search, a most visited move
    after which the opponent has a VCT gives way to the next one that leaves
    none."""
    from agz_jax.game import vct

    rules = eng.rules()
    # Black's twos cross at (4, 4): a stone there makes two open threes.
    black = [(4, 2), (4, 3), (2, 4), (3, 4)]
    white = [(0, 0), (8, 8), (0, 8), (8, 0)]
    state = position(rules, black, white, to_play=0)
    board = np.asarray(state.board)
    a = eng.analyse(rules, state, simulations=16)
    assert a.reason == "search"  # the reading is off by default
    eng.vct = True
    try:
        a = eng.analyse(rules, state, simulations=16)
        assert a.reason == "vct" and a.simulations == 0
        assert a.action == vct.solve(board, 1, SIZE)[0]
        # White to move, the crossing walled off on one side each: black still
        # has a VCT, which (5, 1) stops and a far corner does not.
        white2 = [(0, 0), (8, 8), (1, 4), (4, 1)]
        state = position(rules, black, white2, to_play=1)
        board = np.asarray(state.board)
        far, stop = at(8, 4), at(5, 1)
        after = board.copy()
        after[far] = -1
        assert vct.solve(after, 1, SIZE) is not None
        after[far], after[stop] = 0, -1
        assert vct.solve(after, 1, SIZE) is None
        visits = np.zeros(SIZE * SIZE)
        visits[far], visits[stop] = 10.0, 5.0
        assert readings.avoid_threats(board, 1, SIZE, rules.rule, visits, far, 1.0) == stop
        visits[stop] = 0.0  # nothing else searched: the search's own move stays
        assert readings.avoid_threats(board, 1, SIZE, rules.rule, visits, far, 1.0) == far
        a = eng.analyse(rules, state, simulations=16)
        after = board.copy()
        after[a.action] = -1
        assert a.reason in ("avoid", "search", "defend")
        if a.reason == "avoid":
            assert vct.solve(after, 1, SIZE) is None
    finally:
        eng.vct = False


def test_the_guard_is_search_moves_with_forced_moves_whatever_the_model(eng):
    """A model that searches without forced moves still gets them at the root:
    with an open four to make (tier 3 of ``tactics.search_moves``), only the two
    points that make it are searched."""
    model = eng.model._replace(config=eng.model.config.replace(
        **{"search.forced_moves": False, "search.answer_threats": False}))
    plain = engine.Engine(model, max_simulations=CAPACITY, chunk=CHUNK, vcf=False)
    rules = plain.rules()
    # Black: an open three on row 4 (x = 3..5); white scattered, no threats.
    state = position(rules, [(3, 4), (4, 4), (5, 4), (0, 8)], [(0, 0), (8, 0), (8, 8)],
                     to_play=0)
    a = plain.analyse(rules, state, simulations=24)
    assert a.reason == "search" and a.action in (at(2, 4), at(6, 4))
    assert set(np.flatnonzero(a.visits)) <= {at(2, 4), at(6, 4)}


def test_exactly_five_and_five_or_more_each_have_their_programs(eng):
    """X X _ X X X: the gap makes six, a win only in freestyle. Each rule is a
    constant of its own programs (faster than a run-time flag), compiled once."""
    black = [(0, 3), (1, 3), (3, 3), (4, 3), (5, 3)]
    white = [(8, 8), (8, 7), (8, 6), (7, 0), (6, 0)]
    free, std = eng.rules("freestyle"), eng.rules("standard")
    gap = at(2, 3)
    assert eng.immediate_fives(free, position(free, black, white), 0)[gap]
    assert not eng.immediate_fives(std, position(std, black, white), 0)[gap]
    a = eng.analyse(std, position(std, black, white), simulations=8)
    assert a.reason == "search"  # the gap is legal there, but not a win
    assert eng.analyse(free, position(free, black, white), simulations=8).action == gap
    board = np.zeros(SIZE * SIZE, np.int8)
    board[[at(x, 3) for x in range(6)]] = 1  # six in a row
    assert eng.check_board(free, board) and not eng.check_board(std, board)
    assert engine.winning_line(free, board, at(2, 3)) == [at(x, 3) for x in range(6)]
    assert engine.winning_line(std, board, at(2, 3)) == []
    board[at(0, 3)] = 0
    assert engine.winning_line(std, board, at(5, 3)) == [at(x, 3) for x in range(1, 6)]
    assert eng._fns(std) is not eng._fns(free)
    assert eng._fns(std) is eng._fns(eng.rules("standard"))  # compiled once a rule


def test_no_time_left_plays_the_prior(eng):
    rules = eng.rules()
    state = position(rules, [(4, 4)], [(3, 3)])
    a = eng.analyse(rules, state, deadline=time.perf_counter() - 1.0)
    assert a.reason == "prior" and a.simulations == 0
    assert a.action == int(np.argmax(np.where(np.asarray(state.board) == 0, a.prior, -1)))


def test_bad_calls_are_refused(eng):
    rules = eng.rules()
    with pytest.raises(ValueError, match="game is over"):
        eng.analyse(rules, rules.init()._replace(done=jnp.bool_(True)))
    with pytest.raises(ValueError, match="9x9, not 15x15"):
        eng.analyse(engine.Rules(15), engine.Rules(15).init())
    with pytest.raises(ValueError, match="max_simulations"):
        engine.Engine(eng.model, max_simulations=0)


def test_the_tree_grows_only_forced_moves(eng):
    """With ``search.forced_moves`` every node with a five to make or to block
    has only those moves expanded, below the root as well as at it (where the
    engine's own guard would restrict the moves anyway)."""
    rules = eng.rules()
    # Black must block white's four at (4, 0), which makes a black four on
    # column 4; white must block at (4, 4), which makes an open white four on
    # row 4; black blocks one end, white wins at the other: a chain of nodes
    # with forced moves only.
    state = position(rules, [(4, 1), (4, 2), (4, 3), (0, 8), (2, 8), (8, 8), (6, 7)],
                     [(0, 0), (1, 0), (2, 0), (3, 0), (5, 4), (6, 4), (7, 4)], to_play=0)
    fns = eng._fns(rules)
    states = jax.tree.map(lambda x: jnp.asarray(x)[None], state)
    # The root's moves are the guard's, as the engine passes them (the start
    # program reads no tactics of its own).
    tree = fresh_tree(fns, eng.variables, jax.random.PRNGKey(0), states,
                      fns.guard(states)[None])
    tree = fns.chunk(eng.variables, jax.random.PRNGKey(0), tree, jnp.int32(CAPACITY - 1))
    t = jax.tree.map(np.asarray, tree)
    emb = t.embeddings
    restricted = 0
    for n in np.flatnonzero((t.children_index[0] >= 0).any(-1)):
        if emb.done[0, n]:
            continue
        board = emb.board[0, n]
        me = 1 if emb.to_play[0, n] == 0 else -1
        fives = lambda s, board=board: {
            a for a in np.flatnonzero(board == 0)
            if rules.is_win(jnp.asarray(board).at[a].set(s), a)}
        allowed = fives(me) or fives(-me) or set(np.flatnonzero(board == 0).tolist())
        expanded = set(np.flatnonzero(t.children_index[0, n] >= 0).tolist())
        assert expanded <= allowed, (n, expanded - allowed)
        restricted += len(allowed) < int((board == 0).sum())
    assert restricted >= 4, restricted


@pytest.mark.parametrize("exact", [False, True])
def test_an_open_three_is_answered_in_the_tree(eng, exact):
    """With ``search.answer_threats`` the root of a position where white has
    an open three (and black no four to make) expands only the two points
    that stop it, under either rule; the far points (1, 2) and (7, 2) do not
    stop it (white's four would still be open)."""
    rules = eng.rules("standard" if exact else "freestyle")
    state = position(rules, [(0, 8), (8, 8), (4, 6)], [(3, 2), (4, 2), (5, 2)], to_play=0)
    fns = eng._fns(rules)
    states = jax.tree.map(lambda x: jnp.asarray(x)[None], state)
    tree = fresh_tree(fns, eng.variables, jax.random.PRNGKey(0), states,
                      fns.guard(states)[None])  # the root's moves, as the engine's
    tree = fns.chunk(eng.variables, jax.random.PRNGKey(0), tree, jnp.int32(CAPACITY - 1))
    expanded = set(np.flatnonzero(np.asarray(tree.children_index[0, 0]) >= 0).tolist())
    assert expanded == {at(2, 2), at(6, 2)}


@pytest.fixture(scope="module")
def reusing(eng):
    """The same model, searching with subtree reuse (room for 256 simulations)."""
    e = engine.Engine(eng.model, max_simulations=256, chunk=64, reuse=True)
    assert e.reuse and not eng.reuse and "reuse" in e.describe()
    return e


def crowded_board(empty: int, seed: int = 0) -> np.ndarray:
    """A 9x9 board full but for ``empty`` points, in a pattern with no line of
    three (so no five, and few forced moves), black to move: with few moves
    left, a search's visits pile up deep enough to carry a subtree."""
    x, y = np.meshgrid(np.arange(SIZE), np.arange(SIZE))
    board = np.where((x + 2 * y) % 4 < 2, 1, -1).astype(np.int8).reshape(-1)
    rng = np.random.default_rng(seed)
    holes = rng.choice(SIZE * SIZE, empty, replace=False)
    board[holes] = 0
    # Black moves when the counts are equal: clear surplus stones of one colour.
    surplus = int((board == 1).sum() - (board == -1).sum())
    colour = 1 if surplus > 0 else -1
    extra = rng.choice(np.flatnonzero(board == colour), abs(surplus), replace=False)
    board[extra] = 0
    return board


def test_reuse_carries_the_subtree_across_the_reply(reusing):
    """After the engine's move and the opponent's reply, the next search starts
    from the subtree under both: exactly the visits the tree had there, counted
    towards the budget. A position that does not follow starts fresh."""
    rules = reusing.rules()
    reusing.forget()
    board = crowded_board(8)
    assert reusing.check_board(rules, board) == []
    first = reusing.analyse(rules, engine.make_state(rules, board, 0), simulations=256)
    assert first.reason == "search" and first.carried == 0 and first.simulations == 256
    t = jax.tree.map(np.asarray, reusing.trees.lasts[0].tree)
    child = t.children_index[0, 0, first.action]
    reply = int(np.argmax(t.children_visits[0, child]))
    expected = int(t.children_visits[0, t.children_index[0, child, reply]].sum())
    assert expected >= 2, "the reply should have a subtree"
    board[first.action], board[reply] = 1, -1
    after = engine.make_state(rules, board, 0, last_action=reply)
    budget = expected + 10
    second = reusing.analyse(rules, after, simulations=budget)
    assert second.carried == expected and second.simulations == 10
    assert int(second.visits.sum()) == budget
    # A position that does not follow from the last one: nothing is carried.
    board[reply], board[first.action] = 0, 0
    board[np.flatnonzero(board == 0)[:2]] = [-1, 1]
    assert reusing.analyse(rules, engine.make_state(rules, board, 0),
                           simulations=16).carried == 0


def test_a_move_without_time_for_the_carry_starts_afresh(reusing):
    """A timed move carries its subtree only when the time left is at least
    twice what a carry takes (the median of the last few); else it starts from
    a fresh root (a full tree's carry can cost more than a squeezed move's
    whole budget)."""
    rules = reusing.rules()

    def first_and_reply():
        reusing.forget()
        board = crowded_board(8)
        first = reusing.analyse(rules, engine.make_state(rules, board, 0), simulations=256)
        t = jax.tree.map(np.asarray, reusing.trees.lasts[0].tree)
        child = t.children_index[0, 0, first.action]
        reply = int(np.argmax(t.children_visits[0, child]))
        board[first.action], board[reply] = 1, -1
        return engine.make_state(rules, board, 0, last_action=reply)

    after = first_and_reply()
    reusing.trees.carries.extend([1.0] * trees.CARRIES)  # as if carries took a second
    now = reusing.clock()
    squeezed = reusing.analyse(rules, after, simulations=16, deadline=now + 1.5)
    assert squeezed.carried == 0 and squeezed.simulations >= 1
    after = first_and_reply()
    reusing.trees.carries.clear()
    reusing.trees.carries.append(1.0)
    ample = reusing.analyse(rules, after, simulations=256, deadline=reusing.clock() + 60.0)
    assert ample.carried > 0
    # The carry just made is measured: with the one before, the median is below 1 s.
    assert len(reusing.trees.carries) == 2 and reusing.trees.carry_s < 1.0


def test_one_slow_carry_does_not_stop_the_carries(reusing):
    """The estimate is the median of the last carries: one that took a second
    among quick ones still lets a move of 1.5 s carry its subtree."""
    rules = reusing.rules()
    reusing.forget()
    board = crowded_board(8)
    first = reusing.analyse(rules, engine.make_state(rules, board, 0), simulations=256)
    t = jax.tree.map(np.asarray, reusing.trees.lasts[0].tree)
    reply = int(np.argmax(t.children_visits[0, t.children_index[0, 0, first.action]]))
    board[first.action], board[reply] = 1, -1
    reusing.trees.carries.clear()
    reusing.trees.carries.extend([0.01, 1.0, 0.01])
    assert reusing.trees.carry_s == pytest.approx(0.01)
    after = engine.make_state(rules, board, 0, last_action=reply)
    assert reusing.analyse(rules, after, simulations=16,
                           deadline=reusing.clock() + 1.5).carried > 0


def test_a_lane_writes_its_trees_into_two_sets_of_buffers(two_trees):
    """After its first moves, each lane's carries and fresh starts write into
    the buffers of a tree it is done with (donated): a game's moves allocate no
    new trees, and the trees' visits are still right."""
    rules = two_trees.rules()
    two_trees.forget()
    board = crowded_board(12, seed=1)
    seen: list[set[int]] = [set(), set()]  # each lane's buffers, every leaf's
    for move in range(4):
        a = two_trees.analyse(rules, engine.make_state(rules, board, 0), simulations=128)
        assert a.visits.sum() == a.simulations + a.carried == 128
        for lane, last in enumerate(two_trees.trees.lasts):
            seen[lane] |= {x.unsafe_buffer_pointer() for x in jax.tree.leaves(last.tree)}
        if move == 1:
            two_trees.forget()  # a new game: fresh roots, into the same buffers
            continue
        t = jax.tree.map(np.asarray, two_trees.trees.lasts[0].tree)
        child = t.children_index[0, 0, a.action]
        reply = int(np.argmax(t.children_visits[0, child])) if child >= 0 else None
        if reply is None or board[reply] != 0 or reply == a.action:
            reply = int(np.flatnonzero((board == 0) & (np.arange(board.size) != a.action))[0])
        board[a.action], board[reply] = 1, -1
    leaves = len(jax.tree.leaves(two_trees.trees.lasts[0].tree))
    assert [len(s) for s in seen] == [2 * leaves] * 2


def test_the_engine_plays_the_models_search(eng, tmp_path):
    """Default budget and algorithm are the model's; a flag overrides them."""
    model = eng.model._replace(config=eng.model.config.replace(
        **{"search.algorithm": "gumbel", "search.num_simulations": 12,
           "search.max_considered_actions": 4}))
    g = engine.Engine(model)
    assert g.max_simulations == 12 and g.search_cfg.algorithm == "gumbel"
    assert "gumbel" in g.describe()
    rules = g.rules()
    a = g.analyse(rules, position(rules, [(4, 4), (5, 5)], [(4, 5), (3, 3)]))
    assert a.simulations == 12 and a.reason == "search" and a.visits.sum() == 12
    assert engine.Engine(model, algorithm="puct").search_cfg.algorithm == "puct"
    with pytest.raises(ValueError, match="search.reuse"):
        engine.Engine(model, reuse=True)  # Gumbel cannot reuse


def test_keep_deepens_the_tree_of_an_unchanged_position(eng):
    """``keep``: calls on one position grow one tree (the last search's, with
    keep or not), each reporting the visits so far (``carried`` +
    ``simulations``); the visits of each move only grow. Another position, or
    the same stones reached by another last move, starts afresh; a full tree
    answers at once."""
    rules = eng.rules()
    eng.forget()
    state = position(rules, [(4, 4), (5, 5)], [(4, 5), (3, 3)])
    first = eng.analyse(rules, state, simulations=16, keep=True)
    assert (first.carried, first.simulations) == (0, 16)
    second = eng.analyse(rules, state, simulations=40, keep=True)
    assert (second.carried, second.simulations) == (16, 24)
    assert int(second.visits.sum()) == 40 and np.all(second.visits >= first.visits)
    # The deadline has passed: no chunk, the tree as it was.
    same = eng.analyse(rules, state, keep=True, deadline=eng.clock() - 1.0)
    assert (same.carried, same.simulations, same.reason) == (40, 0, "search")
    np.testing.assert_array_equal(same.visits, second.visits)
    full = eng.analyse(rules, state, keep=True)
    assert full.carried + full.simulations == CAPACITY == int(full.visits.sum())
    assert eng.analyse(rules, state, keep=True).simulations == 0  # full
    # Without keep, a fresh search, which the next keep goes on with.
    assert eng.analyse(rules, state, simulations=8).carried == 0
    deeper = eng.analyse(rules, state, simulations=20, keep=True)
    assert (deeper.carried, deeper.simulations) == (8, 12)
    other = position(rules, [(4, 4), (5, 5)], [(4, 5), (3, 4)])
    assert eng.analyse(rules, other, simulations=8, keep=True).carried == 0
    board = np.asarray(other.board)
    reordered = engine.make_state(rules, board, 0, last_action=at(4, 5))
    assert eng.analyse(rules, reordered, simulations=8, keep=True).carried == 0
    eng.forget()


def test_first_play_urgency_values_unvisited_children_below_their_node(tmp_path):
    """qtransform 'parent': visited children keep their Q; unvisited ones get the
    node's own value less the reduction; the engine searches with it and says so."""
    from agz_jax.search import searcher as search

    model = models.load(random_model(tmp_path / "m", SIZE, seed=3, double=False))
    e = engine.Engine(model, max_simulations=CAPACITY, chunk=CHUNK, algorithm="puct", fpu=0.3)
    assert e.search_cfg.qtransform == "parent" and "parent's value - 0.3" in e.describe()
    rules = e.rules()
    a = e.analyse(rules, position(rules, [(4, 4), (5, 4)], [(4, 5)]), simulations=40)
    assert a.simulations == 40 and a.visits.sum() == 40 and a.reason == "search"
    last = e.trees.lasts[0].tree
    root = mctx.Tree.ROOT_INDEX
    tree = jax.tree.map(lambda x: x[0], last)
    q = search.parent_qvalues(tree, root, reduction=0.3)
    visited = np.asarray(tree.children_visits[root]) > 0
    np.testing.assert_allclose(np.asarray(q)[visited], np.asarray(tree.qvalues(root))[visited])
    np.testing.assert_allclose(np.asarray(q)[~visited], float(tree.node_values[root]) - 0.3,
                               rtol=1e-6)


@pytest.fixture(scope="module")
def two_trees(reusing):
    """``reusing``'s search in two trees at once (root parallelism)."""
    e = engine.Engine(reusing.model, max_simulations=256, chunk=64, reuse=True,
                      algorithm="puct", threads=2)
    assert "in each of 2 trees" in e.describe()
    return e


def in_frame(rules, board, g, to_play=0, last=-1):
    """The position ``board`` under board symmetry ``g`` (a State)."""
    perm = symmetry.permutations(rules.size)[g]
    return engine.make_state(rules, board[perm], to_play,
                             symmetry.transform_point(last, g, rules.size))


def test_two_trees_are_the_position_and_its_quarter_turn(reusing, two_trees):
    """Tree 0 searches the position, tree 1 the position turned a quarter (board
    symmetry 1); the answer's visits are their sum point by point, in the
    position's frame, and the budget is split between them."""
    rules = reusing.rules()
    board = crowded_board(12, seed=1)
    one = []
    for g in (0, 1):
        reusing.forget()
        a = reusing.analyse(rules, in_frame(rules, board, g), simulations=40)
        one.append(symmetry.untransform_policy(a.visits, g, rules.size))
    two_trees.forget()
    both = two_trees.analyse(rules, engine.make_state(rules, board, 0), simulations=80)
    assert both.simulations == 80 and both.carried == 0 and both.reason == "search"
    np.testing.assert_array_equal(both.visits, one[0] + one[1])
    assert both.visits[both.action] == both.visits.max() and board[both.action] == 0
    assert np.isclose(both.policy.sum(), 1.0)
    assert np.array_equal(np.isfinite(both.q), both.visits > 0)
    # Without a deadline the split is even and the search is reproducible.
    two_trees.forget()
    again = two_trees.analyse(rules, engine.make_state(rules, board, 0), simulations=80)
    np.testing.assert_array_equal(again.visits, both.visits)
    for sims in (81, 1):  # an odd count: the first tree takes the remainder
        two_trees.forget()
        odd = two_trees.analyse(rules, engine.make_state(rules, board, 0), simulations=sims)
        assert odd.simulations == sims == int(odd.visits.sum())


def test_each_tree_carries_its_own_subtree(reusing, two_trees):
    """Reuse and deepening with two trees: each keeps its subtree in its own
    frame, so the carried visits are what each tree alone would carry."""
    rules = reusing.rules()
    board = crowded_board(8)
    two_trees.forget()
    first = two_trees.analyse(rules, engine.make_state(rules, board, 0), simulations=256)
    # The reply most visited in both trees under the move played.
    counts = []
    for g, last in enumerate(two_trees.trees.lasts):
        t = jax.tree.map(np.asarray, last.tree)
        child = t.children_index[0, 0, symmetry.transform_point(first.action, g, rules.size)]
        counts.append(symmetry.untransform_policy(t.children_visits[0, child].astype(float), g,
                                                  rules.size))
    reply = int(np.argmax(np.minimum(*counts)))
    assert min(c[reply] for c in counts) >= 2, "the reply should have a subtree in both"
    after = board.copy()
    after[first.action], after[reply] = 1, -1
    carried = 0
    for g in (0, 1):
        reusing.forget()
        reusing.analyse(rules, in_frame(rules, board, g), simulations=128)
        a = reusing.analyse(rules, in_frame(rules, after, g, last=reply), simulations=128)
        carried += a.carried
    second = two_trees.analyse(rules, engine.make_state(rules, after, 0, last_action=reply),
                               simulations=256)
    assert second.carried == carried > 0
    assert second.simulations + second.carried == 256
    # Deepening the same position: both trees are kept whole.
    third = two_trees.analyse(rules, engine.make_state(rules, after, 0, last_action=reply),
                              simulations=320, keep=True)
    assert third.carried == 256 and third.simulations == 64


def test_threads_are_refused_where_they_cannot_work(reusing):
    for threads in (0, 9, 1.5):
        with pytest.raises(ValueError, match="threads must be an integer from 1 to 8"):
            engine.Engine(reusing.model, threads=threads)
    with pytest.raises(ValueError, match="threads .root parallelism. is for PUCT"):
        engine.Engine(reusing.model, threads=2, algorithm="gumbel")


def test_two_trees_values_average_over_their_visits(reusing, two_trees):
    """The merged root value is each tree's, weighted by its evaluations (its
    visits and its own): (N + T) * value - sum(N_a * q_a) is the trees' first
    evaluations, however long they searched."""
    rules = reusing.rules()
    state = engine.make_state(rules, crowded_board(12, seed=2), 0)
    firsts = []
    for sims in (16, 48, 96):
        two_trees.forget()
        a = two_trees.analyse(rules, state, simulations=sims)
        firsts.append((sims + 2) * a.value - np.nansum(a.visits * a.q))
    np.testing.assert_allclose(firsts, firsts[0], atol=1e-4)


def test_transpositions_search_the_same_as_without(eng):
    """The engine's default, each position of a tree evaluated once
    (tests/test_transpositions.py), against the same search without: the
    same visits (the net's rounding between two programs could at most move
    a near-tie), a legal move."""
    plain = engine.Engine(eng.model, max_simulations=CAPACITY, chunk=CHUNK, transpositions=False)
    assert eng.transpositions and not plain.transpositions
    assert not engine.Engine(eng.model, max_simulations=CAPACITY, leaves=2).transpositions
    rules = eng.rules()
    state = position(rules, [(4, 4), (5, 5), (3, 4)], [(4, 5), (3, 3)])
    eng.forget()
    a = {t: e.analyse(rules, state, simulations=CAPACITY) for t, e in ((True, eng), (False, plain))}
    assert a[True].simulations == a[False].simulations == CAPACITY
    assert np.asarray(state.board)[a[True].action] == 0
    np.testing.assert_allclose(a[True].visits, a[False].visits, atol=3)
    assert 0.0 <= eng.transposed() < 1.0 and plain.transposed() == 0.0
