"""Transpositions: a tree ``with_transpositions`` evaluates each position once
(``Expansion``, ``Searcher.begin(transpositions=True)``, the engine).

On a toy game whose moves commute (a position is how often each action was
played, so every order of the same moves is one position): the trees are the
ones searched without, field for field, and a position's nodes share one
evaluation. Then the searcher's ``position_code`` against a plain-Python
reading of what it packs, and the engine's search with and without.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiny_models import random_model

from agz_jax.game.gomoku import Rules, State
from agz_jax.play import engine
from agz_jax.search import mctx_loop
from agz_jax.search import searcher as search
from agz_jax.search.transpositions import (
    PROBES,
    Expansion,
    Transpositions,
    with_transpositions,
)
from tests.trees import assert_same_tree as same_tree

A = 4  # actions
N = 48  # the searches' capacity
ROOTS = jnp.array([0, 1, 17, 256], jnp.int32)


def toy_eval(child):
    """Exact functions of the position (integers made floats): the same on
    every call, in every program."""
    h = (child.astype(jnp.uint32) * jnp.uint32(2654435761)) >> 12
    odd = jnp.arange(A, dtype=jnp.uint32) * 2 + 1
    logits = ((h[:, None] * odd) % 101).astype(jnp.float32) / 17.0
    value = ((h % 1009).astype(jnp.float32) - 504.0) / 1013.0  # few exact ties
    return logits, value


def toy_move(params, key, action, embedding):
    del params, key
    return embedding + (1 << (4 * action))  # one more play of ``action``


def toy_output(embedding, child, logits, value):
    del embedding, child
    return mctx.RecurrentFnOutput(reward=jnp.zeros_like(value), discount=-jnp.ones_like(value),
                                  prior_logits=logits, value=value)


def toy_code(embedding):
    return jnp.stack([embedding.astype(jnp.uint32), jnp.ones_like(embedding, jnp.uint32)], -1)


TOY = Expansion(move=toy_move, evaluate=lambda p, k, c: toy_eval(c),
                          output=toy_output, code=toy_code)


def noisy_evaluate(params, key, child):
    """A different evaluation on every call (drawn from the simulation's key)."""
    del params
    logits, _ = toy_eval(child)
    return logits, jax.random.uniform(key, child.shape, minval=-1.0, maxval=1.0)


NOISY = Expansion(move=toy_move, evaluate=noisy_evaluate, output=toy_output,
                            code=toy_code)


def root(embedding):
    logits, value = toy_eval(embedding)
    return mctx.RootFnOutput(prior_logits=logits, value=value, embedding=embedding)


def puct(key, tree, node_index, depth=0):
    del key, depth
    visits = tree.children_visits[node_index]
    prior = jax.nn.softmax(tree.children_prior_logits[node_index])
    q = jnp.where(visits > 0, tree.qvalues(node_index), 0.0)
    score = q + 1.5 * prior * jnp.sqrt(tree.node_visits[node_index]) / (visits + 1)
    return jnp.argmax(score).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("expansion", "transpositions"))
def searched(roots, until, key, expansion, transpositions):
    tree = mctx_loop.start_tree(root(roots), N)
    if transpositions:
        tree = with_transpositions(tree, 2)
    return mctx_loop.continue_tree(None, key, tree, recurrent_fn=expansion,
                                   root_action_selection_fn=puct,
                                   interior_action_selection_fn=puct, until=until)


def assert_same_tree(got, want):
    """``tests.trees.assert_same_tree`` on every Tree field but the extra data
    (the table of codes, which only one of the two trees carries)."""
    same_tree(got.replace(extra_data=None), want.replace(extra_data=None))


def codes_by_node(tree, b):
    nodes = np.flatnonzero(np.asarray(tree.node_visits[b]) > 0)
    return nodes, np.asarray(tree.embeddings[b])[nodes]


def assert_recorded_once(tree, b, carried=False):
    """The table records a position at the node that was evaluated for it: its
    code there, zeros at the position's other nodes and at the root. In a
    fresh search that is the position's first node; in a carried tree a
    position may have lost its recorded node (at most one remains)."""
    nodes, positions = codes_by_node(tree, b)
    codes = np.asarray(tree.extra_data.codes[b])
    assert np.all(codes[0] == 0)  # the root: never a source
    recorded = np.any(codes[nodes[1:]] != 0, axis=-1)
    np.testing.assert_array_equal(codes[nodes[1:], 0][recorded], positions[1:][recorded])
    for p in set(positions[1:].tolist()):
        held = recorded[positions[1:] == p]
        if carried:
            assert held.sum() <= 1
        else:
            assert held.tolist() == [True] + [False] * (len(held) - 1)


def assert_findable(tree):
    """Every recorded node is where its code's lookup leads (the hash table
    holds it), in every row."""
    table = jax.tree.map(np.asarray, tree.extra_data)
    for b in range(table.keys.shape[0]):
        row = jax.tree.map(lambda x, b=b: jnp.asarray(x[b:b + 1]), tree.extra_data)
        for n in np.flatnonzero(np.any(table.codes[b] != 0, axis=-1)):
            _, known, source = row.find(jnp.asarray(table.codes[b, n])[None])
            assert bool(known[0]) and int(source[0]) == n, (b, n)


def test_the_hash_table_drops_a_record_only_when_its_window_is_full():
    """A table of 8 slots takes 8 positions (one window: every key's 8 slots
    are all of them); a ninth is not recorded and is not found, and the eight
    still are. A code nobody recorded is unknown."""
    n = 12
    table = Transpositions(keys=jnp.zeros((1, n), jnp.uint32),
                           codes=jnp.zeros((1, n, 2), jnp.uint32),
                           slots=jnp.full((1, 8), -1, jnp.int32))
    assert PROBES == 8
    codes = [jnp.array([[7 * i + 1, 1]], jnp.uint32) for i in range(10)]
    for node in range(1, 10):
        key, known, _ = table.find(codes[node])
        assert not bool(known[0])
        table = table.recorded(jnp.array([0]), jnp.array([node]), key, codes[node])
    for node in range(1, 10):
        _, known, source = table.find(codes[node])
        assert (bool(known[0]), int(source[0])) == ((True, node) if node < 9 else (False, 0))
    assert not bool(table.find(codes[0])[1][0])
    assert sorted(np.asarray(table.slots[0]).tolist()) == list(range(1, 9))


def test_the_tree_is_the_one_searched_without():
    key = jax.random.key(0)
    with_t = searched(ROOTS, N, key, TOY, True)
    without = searched(ROOTS, N, key, TOY, False)
    assert_same_tree(with_t, without)
    # The toy's moves commute, so the trees hold positions twice: the cache had work.
    for b in range(len(ROOTS)):
        nodes, positions = codes_by_node(with_t, b)
        assert len(set(positions.tolist())) < len(nodes)
        assert_recorded_once(with_t, b)
    assert_findable(with_t)


def test_gumbels_search_finds_its_noise_and_is_the_same():
    """A Gumbel tree keeps its root noise under the transpositions' extra data
    (mctx's selection reads ``extra_data.root_gumbel``): the same tree and
    the same move as without."""
    root_selection, interior_selection = mctx_loop.gumbel_selection(N, 4)

    @functools.partial(jax.jit, static_argnames="transpositions")
    def gumbel(key, transpositions):
        invalid = jnp.zeros((len(ROOTS), A), bool)
        tree = mctx_loop.gumbel_tree(root(ROOTS), N, invalid, jax.random.key(7))
        if transpositions:
            tree = with_transpositions(tree, 2)
        tree = mctx_loop.continue_tree(None, key, tree, recurrent_fn=TOY,
                                       root_action_selection_fn=root_selection,
                                       interior_action_selection_fn=interior_selection,
                                       until=N)
        return tree, mctx_loop.gumbel_result(tree)

    (with_t, out_t), (without, out) = gumbel(jax.random.key(3), True), gumbel(
        jax.random.key(3), False)
    assert_same_tree(with_t, without)
    np.testing.assert_array_equal(np.asarray(out_t[0]), np.asarray(out[0]))
    np.testing.assert_array_equal(np.asarray(with_t.extra_data.root_gumbel),
                                  np.asarray(without.extra_data.root_gumbel))


def test_a_position_is_evaluated_once():
    """With an evaluation that differs on every call, the nodes of one position
    (below the root) share the first one's prior and value only with
    transpositions."""
    key = jax.random.key(1)
    for on, shared in ((True, True), (False, False)):
        tree = searched(ROOTS, N, key, NOISY, on)
        agree = []
        for b in range(len(ROOTS)):
            nodes, positions = codes_by_node(tree, b)
            values = np.asarray(tree.raw_values[b])
            for p in set(positions[1:].tolist()):
                same = nodes[1:][positions[1:] == p]
                if len(same) > 1:
                    agree.append(bool(np.all(values[same] == values[same[0]])))
        assert agree and all(agree) == shared and (any(agree) or not shared)


def test_a_carried_tree_keeps_its_codes_and_searches_on_the_same():
    key = jax.random.key(2)
    trees = {t: searched(ROOTS, N // 2, key, TOY, t) for t in (True, False)}
    action = jnp.argmax(trees[True].children_visits[:, 0], axis=-1).astype(jnp.int32)
    carried = {t: jax.jit(mctx_loop.reuse)(tree, action) for t, tree in trees.items()}
    for b in range(len(ROOTS)):
        assert_recorded_once(carried[True], b, carried=True)
    assert_findable(carried[True])  # the hash table renumbered with the nodes
    grow = jax.jit(functools.partial(
        mctx_loop.continue_tree, None, root_action_selection_fn=puct,
        interior_action_selection_fn=puct, until=N, recurrent_fn=TOY))
    on = {t: grow(key, tree) for t, tree in carried.items()}
    assert_same_tree(on[True], on[False])
    for b in range(len(ROOTS)):
        assert_recorded_once(on[True], b, carried=True)
    assert_findable(on[True])


def test_what_cannot_use_them_is_refused():
    tree = with_transpositions(mctx_loop.start_tree(root(ROOTS), N), 2)
    kwargs = dict(root_action_selection_fn=puct, interior_action_selection_fn=puct, until=4)
    plain = lambda p, k, a, e: TOY(p, k, a, e)  # noqa: E731  (not an Expansion)
    with pytest.raises(ValueError, match="Expansion"):
        mctx_loop.continue_tree(None, jax.random.key(0), tree, recurrent_fn=plain, **kwargs)
    with pytest.raises(ValueError, match="one leaf a step"):
        mctx_loop.continue_tree(None, jax.random.key(0), tree, recurrent_fn=TOY, leaves=2,
                                **kwargs)


def reference_code(rules: Rules, board, to_play, last, done, winner, rank) -> list[int]:
    """``position_code`` read plainly: two bits a point (1 black, 2 white), 16
    points a word, then the last move + 1, side to move, outcome; the rank."""
    words = []
    for start in range(0, -(-rules.num_actions // 16) * 16, 16):
        w = 0
        for i, p in enumerate(board[start:start + 16]):
            w |= {0: 0, 1: 1, -1: 2}[int(p)] << (2 * i)
        words.append(w)
    words.append((last + 1) | (to_play << 16) | (int(done) << 17) | ((winner + 1) << 18))
    words.append(rank % 2**32)
    return words


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 1), st.integers(-1, 80), st.booleans(),
       st.integers(-1, 1), st.integers(-1, 5))
def test_position_code_packs_the_position_exactly(seed, to_play, last, done, winner, rank):
    rules = Rules(9, "freestyle")
    board = np.random.default_rng(seed).integers(-1, 2, rules.num_actions).astype(np.int8)
    state = State(board=jnp.asarray(board), to_play=jnp.int32(to_play),
                  last_action=jnp.int32(last), num_moves=jnp.int32(0),
                  winner=jnp.int32(winner), done=jnp.bool_(done), illegal=jnp.bool_(False),
                  played_at=jnp.full(rules.num_actions, -1, jnp.int16), rank=jnp.int32(rank))
    code = np.asarray(jax.jit(search.position_code, static_argnums=0)(rules, state))
    assert code.shape == (search.code_words(rules),) == (8,)
    assert code.tolist() == reference_code(rules, board, to_play, last, done, winner, rank)


def test_nets_that_read_the_order_of_the_moves_are_refused():
    """Refused before anything is evaluated (so no variables are needed here)."""
    from agz_jax.config.presets import get_preset
    from agz_jax.nets.networks import make_networks

    config = get_preset("smoke").replace(**{"game.size": 9, "features.history": 2})
    nets = make_networks(config.net, board_size=9, features=config.features)
    rules = Rules(9, "freestyle")
    s = search.Searcher.of(rules, nets, search=config.search, decay=config.decay)
    states = jax.tree.map(lambda x: x[None], engine.make_state(rules, np.zeros(81), 0))
    with pytest.raises(ValueError, match="order of the moves"):
        s.begin(None, jax.random.key(0), states, capacity=8, transpositions=True)


def test_the_study_command_refuses_bad_counts(capsys):
    from experiments.play import transpositions as study
    with pytest.raises(SystemExit) as e:
        study.main(["--sims", "0"])
    assert e.value.code == 2
    assert "--sims must be a positive integer, got 0" in capsys.readouterr().err


@pytest.mark.long
def test_the_study_command_compares_both_searches(tmp_path, capsys):
    from experiments.play import transpositions as study
    path = random_model(tmp_path / "m", 15, seed=5, double=False)
    assert study.main(["--model", str(path), "--positions", "2", "--plies", "1", "--sims", "64",
                       "--repeats", "1", "--json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert len(out["rows"]) == 2 and out["ratio"] > 0
    for row in out["rows"]:
        assert 0.0 <= row["transposed"] < 1.0 and row["stones"] == 4
        assert row["with_sims_per_s"] > 0 and row["without_sims_per_s"] > 0
