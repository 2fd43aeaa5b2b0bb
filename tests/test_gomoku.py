"""The JAX rules against the plain-Python reference referee (tests/reference.py).

Games are built by seeded generators (uniform, line-biased, and overline
builders that fill a gapped segment of 6..9 points on one line, gap last), with
occasional occupied / off-board actions and junk after the end. Every ply of
every game is compared: board, to_play, last_action, num_moves, winner, done,
illegal, legal mask and observation. One compile per (size, rule, path).
"""

from __future__ import annotations

import collections
import functools
import itertools
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agz_jax.game.gomoku import BLACK, WHITE, Rules, State, to_text

SIZES = (5, 6, 7, 9, 15, 19)
RULES = ("freestyle", "standard")
STYLES = ("uniform", "lines", "overline", "overline")
FIELDS = ("to_play", "last_action", "num_moves", "winner", "done", "illegal")
# After a game ends, this many plies are still compared one by one; the rest of
# the trajectory is checked to be frozen with one vectorised comparison.
TAIL = 3

SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def horizon(size: int) -> int:
    """Actions per generated game: enough to fill the board despite illegal ones."""
    return size * size + 8


# --------------------------------------------------------------------------
# Game generators (pure Python, seeded). They track occupancy and turn on their
# own, without knowing when the game ends: moves after the end must be no-ops.


def random_line(size: int, rng: random.Random, min_len: int) -> list[int]:
    """The points (actions) of a random full line with at least ``min_len`` points."""
    min_len = min(min_len, size)
    while True:
        dr, dc = rng.choice(ref.DIRECTIONS)
        r, c = rng.randrange(size), rng.randrange(size)
        while 0 <= r - dr < size and 0 <= c - dc < size:
            r, c = r - dr, c - dc
        cells = []
        while 0 <= r < size and 0 <= c < size:
            cells.append(r * size + c)
            r, c = r + dr, c + dc
        if len(cells) >= min_len:
            return cells


def make_game(size: int, style: str, seed: int) -> list[int]:
    """``horizon(size)`` actions of one generated game."""
    rng = random.Random(seed)
    a = size * size
    occupied: set[int] = set()
    turn = BLACK
    noise = rng.choice((0.0, 0.0, 0.05, 0.15))
    # Per colour: a list of planned points, played in order while still empty.
    plans: dict[int, list[int]] = {BLACK: [], WHITE: []}
    keep_on_plan = 1.0
    avoid: set[int] = set()
    if style == "lines":
        keep_on_plan = rng.choice((0.6, 0.8, 0.95))
        for colour in (BLACK, WHITE):
            line = random_line(size, rng, 5)
            if rng.random() < 0.5:  # a run-friendly order: a random walk outward
                i = rng.randrange(len(line))
                lo, hi, order = i, i, [line[i]]
                while lo > 0 or hi < len(line) - 1:
                    if hi == len(line) - 1 or (lo > 0 and rng.random() < 0.5):
                        lo -= 1
                        order.append(line[lo])
                    else:
                        hi += 1
                        order.append(line[hi])
                plans[colour] = order
            else:
                plans[colour] = rng.sample(line, len(line))
    elif style == "overline":
        builder = rng.choice((BLACK, WHITE))
        line = random_line(size, rng, 6)
        n = rng.randint(min(6, len(line)), min(9, len(line)))
        start = rng.randrange(len(line) - n + 1)
        segment = line[start:start + n]
        gap = rng.randrange(n)
        rest = segment[:gap] + segment[gap + 1:]
        rng.shuffle(rest)
        plans[builder] = rest + [segment[gap]]
        if rng.random() < 0.5:  # then lengthen the line outward from both ends
            before = line[max(0, start - 2):start][::-1]
            after = line[start + n:start + n + 2]
            plans[builder] += [p for pair in itertools.zip_longest(after, before)
                               for p in pair if p is not None]
        avoid = set(segment) if rng.random() < 0.9 else set()
        if rng.random() < 0.3:  # the other side builds one too, elsewhere
            other = random_line(size, rng, 5)
            plans[1 - builder] = rng.sample(other, len(other))

    actions = []
    while len(actions) < horizon(size):
        if len(occupied) == a:  # board full: junk only
            actions.append(rng.randrange(-1, a + 1))
            continue
        if rng.random() < noise:
            kind = rng.random()
            if occupied and kind < 0.6:
                actions.append(rng.choice(sorted(occupied)))
            else:
                actions.append(rng.choice((-1, a, 2 * a + 3, -7)))
            continue
        plan = plans[turn]
        while plan and plan[0] in occupied:
            plan.pop(0)
        if plan and rng.random() < keep_on_plan:
            move = plan.pop(0)
        else:
            empty = [p for p in range(a) if p not in occupied]
            free = [p for p in empty if p not in avoid] or empty
            move = rng.choice(free)
        occupied.add(move)
        actions.append(move)
        turn = 1 - turn
    return actions


# --------------------------------------------------------------------------
# JAX side: one compile per (size, rule) for the single path, per size (both
# rules at once) for the batched path.


@functools.cache
def jitted(size: int, rule: str):
    rules = Rules(size, rule)
    return rules, jax.jit(rules.step), jax.jit(rules.observe), jax.jit(rules.legal_mask)


@functools.cache
def batched_ply(size: int):
    """jit(vmap(one ply under each rule)): (states, int32[B]) -> (states, packed).

    ``states`` is a tuple (freestyle State[B], standard State[B]). ``packed`` is
    float32[B, 2, 5A+6]: per rule, everything the test compares, packed into
    one array so each ply costs one device-to-host copy (see ``unpack``).
    """
    both = tuple(Rules(size, rule) for rule in RULES)

    def ply(states, action):
        nxt = tuple(r.step(s, action) for r, s in zip(both, states, strict=True))
        packed = jnp.stack([
            jnp.concatenate([
                s.board.astype(jnp.float32),
                jnp.stack([getattr(s, k) for k in FIELDS]).astype(jnp.float32),
                r.legal_mask(s).astype(jnp.float32),
                r.observe(s).reshape(-1),
            ])
            for r, s in zip(both, nxt, strict=True)
        ])
        return nxt, packed

    return jax.jit(jax.vmap(ply))


def unpack(size: int, packed: np.ndarray):
    """float32[..., 5A+6] -> (board int[..., A], scalars int[..., 6] in ``FIELDS``
    order, legal bool[..., A], obs float32[..., H, W, 3]). Exact: every packed
    value is a small integer."""
    a = size * size
    board = packed[..., :a].astype(np.int64)
    scalars = packed[..., a:a + 6].astype(np.int64)
    legal = packed[..., a + 6:2 * a + 6].astype(bool)
    obs = packed[..., 2 * a + 6:].reshape(*packed.shape[:-1], size, size, 3)
    return board, scalars, legal, obs


@functools.cache
def initial_state(size: int) -> State:
    """Rules(size).init() built in numpy (no eager JAX ops, so no extra compiles);
    ``test_init`` checks it equals the real thing."""
    return State(
        board=np.zeros(size * size, np.int8),
        to_play=np.int32(BLACK),
        last_action=np.int32(-1),
        num_moves=np.int32(0),
        winner=np.int32(-1),
        done=np.bool_(False),
        illegal=np.bool_(False),
        played_at=np.full(size * size, -1, np.int16),
        rank=np.int32(0),
    )


def run_batched(size: int, games: list[list[int]]):
    """Step B games in lockstep from Python with the jitted, vmapped step.

    Returns float32[B, 2 rules, P, 5A+6] packed views of plies 1..P, stopping
    once every game has been over for ``TAIL`` plies.
    """
    actions = np.asarray(games, np.int32)
    b, t = actions.shape
    init = initial_state(size)
    states = tuple(jax.tree.map(lambda x: np.broadcast_to(x, (b, *x.shape)), init)
                   for _ in RULES)
    step = batched_ply(size)
    plies = []
    all_done_at = None
    for i in range(t):
        states, packed = step(states, actions[:, i])
        plies.append(packed)
        if all_done_at is None and i % 8 == 7 and all(np.asarray(s.done).all() for s in states):
            all_done_at = i
        if all_done_at is not None and i >= all_done_at + TAIL:
            break
    return np.stack(jax.device_get(plies), axis=2)


def describe(size, rule, actions, ply, board):
    return (
        f"size={size} rule={rule} ply={ply} actions={actions[:ply]}\n"
        + to_text(Rules(size, rule), State(board, *([0] * 8)))
    )


def assert_ply(game: ref.Game, board, scalars, legal, obs, msg, nested=False):
    """One ply: numpy rows from JAX against the reference game.

    ``nested`` compares the observation as [H][W][3] lists (``Game.observe``);
    otherwise plane by plane (``Game.observe_planes``, the same numbers, faster).
    """
    assert board.tolist() == game.flat_board(), msg()
    got = {k: v.item() for k, v in zip(FIELDS, scalars, strict=True)}
    assert got == game.fields(), msg()
    assert legal.tolist() == game.legal_mask(), msg()
    if nested:
        assert obs.tolist() == game.observe(), msg()
    else:
        assert obs.reshape(-1, 3).T.tolist() == list(game.observe_planes()), msg()


def check_trajectory(size, rule, actions, packed) -> ref.Game:
    """Compare a JAX trajectory (float32[P, 5A+6] packed, plies 1..P) with the reference."""
    game = ref.Game(size, rule)
    board, scalars, legal, obs = unpack(size, packed)
    ended_at = None
    for i in range(len(packed)):
        game.play(actions[i])
        assert_ply(game, board[i], scalars[i], legal[i], obs[i],
                   lambda i=i: describe(size, rule, actions, i + 1, board[i]))
        if game.done and ended_at is None:
            ended_at = i
        if ended_at is not None and i >= ended_at + TAIL:
            # Frozen from here on: every later ply equals this one.
            assert (packed[i:] == packed[i]).all(), describe(size, rule, actions, i + 1,
                                                             board[i])
            break
    return game


def tally(counts: collections.Counter, game: ref.Game) -> None:
    """Count the interesting cases a game hit. Runs never shrink, so the final
    board shows every run that ever existed."""
    counts["games", game.rule] += 1
    longest = max((length for _, length in ref.runs(game.board)), default=0)
    if game.illegal:
        counts["illegal"] += 1
    if game.done and game.winner < 0:
        counts["draw"] += 1
    if game.winner >= 0 and game.num_moves == game.num_actions:
        counts["win on the last point"] += 1
    if game.rule == "standard":
        if game.winner >= 0:
            counts["standard exact five"] += 1
        if longest >= 6:
            counts["standard overline"] += 1
            # Still there without the last stone: the overline was made before
            # the last move, and play went on after it.
            board = [row[:] for row in game.board]
            r, c = divmod(game.last_action, game.size)
            board[r][c] = 0
            if max((n for _, n in ref.runs(board)), default=0) >= 6:
                counts["standard overline, play went on"] += 1
    elif game.winner >= 0 and longest >= 6:
        counts["freestyle overline win"] += 1


# --------------------------------------------------------------------------
# Property tests against the reference.

seed_st = st.integers(0, 2**32 - 1)
SINGLE_SIZES = (5, 6)  # the sizes of the known-answer tests: no extra compiles
# Games per batch: fewer on big boards, where the reference is slow.
BATCH = {5: 48, 6: 48, 7: 24, 9: 16, 15: 4, 19: 2}
BATCH_SIZES = (5, 5, 6, 6, 7, 7, 9, 9, 15, 19)  # weighted toward the cheap boards


def test_single_games_match_reference():
    """Jitted ``step``/``observe``/``legal_mask``, one game at a time, every ply."""
    counts = collections.Counter()

    @settings(max_examples=40, **SETTINGS)
    @given(size=st.sampled_from(SINGLE_SIZES), rule=st.sampled_from(RULES),
           style=st.sampled_from(STYLES), seed=seed_st)
    def run(size, rule, style, seed):
        rules, step, observe, legal_mask = jitted(size, rule)
        actions = make_game(size, style, seed)
        game = ref.Game(size, rule)
        state = initial_state(size)
        dtypes = [x.dtype for x in state]
        ended_at = None
        for ply in range(len(actions) + 1):
            if ply:
                game.play(actions[ply - 1])
                state = step(state, jnp.int32(actions[ply - 1]))
            s, lm, ob = jax.device_get((state, legal_mask(state), observe(state)))
            assert [x.dtype for x in s] == dtypes and lm.dtype == bool
            assert ob.dtype == np.float32 and ob.shape == (size, size, 3)
            assert_ply(game, s.board, [getattr(s, k) for k in FIELDS], lm, ob,
                       lambda ply=ply, s=s: describe(size, rule, actions, ply, s.board),
                       nested=True)
            if game.done and ended_at is None:
                ended_at = ply
            if ended_at is not None and ply >= ended_at + TAIL:
                break
        tally(counts, game)

    run()
    assert counts["games", "standard"] >= 10 and counts["games", "freestyle"] >= 10, counts


def test_batched_games_match_reference():
    """jit(vmap(step)) on batches of mixed games, both rules on the same actions,
    every ply; and the adversarial cases really occur."""
    counts = collections.Counter()

    @settings(max_examples=36, **SETTINGS)
    @given(size=st.sampled_from(BATCH_SIZES), seed=seed_st)
    def run(size, seed):
        rng = random.Random(seed)
        games = [make_game(size, STYLES[i % len(STYLES)], rng.getrandbits(64))
                 for i in range(BATCH[size])]
        packed = run_batched(size, games)
        for k, rule in enumerate(RULES):
            for b, actions in enumerate(games):
                tally(counts, check_trajectory(size, rule, actions, packed[b, k]))

    run()
    total = counts["games", "standard"] + counts["games", "freestyle"]
    assert total >= 1200, counts  # ~2000 expected
    # The generators must keep producing the cases that tell the rules apart
    # (typical counts are 3-5 times these bounds).
    for case, at_least in [
        ("standard exact five", 200),
        ("standard overline", 50),
        ("standard overline, play went on", 50),
        ("freestyle overline win", 50),
        ("draw", 50),
        ("illegal", 200),
        ("win on the last point", 5),
    ]:
        assert counts[case] >= at_least, (case, counts)


# --------------------------------------------------------------------------
# Known answers.


def play_jax(size: int, rule: str, moves):
    """Jitted steps from the empty board; also checks the reference agrees."""
    rules, step, _, _ = jitted(size, rule)
    state = rules.init()
    for m in moves:
        state = step(state, jnp.int32(m))
    state = jax.device_get(state)
    game = ref.play_all(size, rule, moves)
    assert state.board.tolist() == game.flat_board()
    assert {k: getattr(state, k).item() for k in FIELDS} == game.fields()
    return rules, state


def interleave(black, white):
    """Alternate black and white moves (black first); ``(r, c)`` pairs in, actions out."""
    out = []
    for i, b in enumerate(black):
        out.append(b)
        if i < len(white):
            out.append(white[i])
    return out


def points(size, cells):
    return [r * size + c for r, c in cells]


def test_init():
    rules, _, observe, legal_mask = jitted(5, "freestyle")
    s = jax.device_get(rules.init())
    assert s.board.shape == (25,) and s.board.dtype == np.int8
    assert (s.to_play, s.last_action, s.num_moves, s.winner) == (BLACK, -1, 0, -1)
    assert not s.done and not s.illegal
    assert np.asarray(legal_mask(s)).all()
    assert not np.asarray(observe(s)).any()
    for size in SIZES:
        jax.tree.map(np.testing.assert_array_equal, Rules(size).init(), initial_state(size))
        for name, x in zip(State._fields, initial_state(size), strict=True):
            assert x.dtype == getattr(Rules(size).init(), name).dtype, name
    assert np.asarray(observe(s)).shape == (5, 5, 3)


# Black fills row 3 of a 6x6 board as X X . X X X, white plays scattered points,
# then black fills the gap: a line of six.
OVERLINE_BLACK = [(3, 0), (3, 1), (3, 3), (3, 4), (3, 5), (3, 2)]
OVERLINE_WHITE = [(5, 0), (5, 2), (5, 4), (1, 1), (1, 3)]


def test_standard_overline_does_not_win():
    moves = interleave(points(6, OVERLINE_BLACK), points(6, OVERLINE_WHITE))
    _, s = play_jax(6, "standard", moves)
    assert ref.longest_run(ref.play_all(6, "standard", moves).board, 1) == 6
    assert not s.done and s.winner == -1 and s.to_play == WHITE and s.num_moves == 11


def test_standard_overline_stays_a_non_win_as_it_grows():
    # Row 3 of 7x7: X X . X X X, then the gap makes six, then (3, 6) makes seven.
    # A win check that saw at most 4 neighbours each way would count the seven
    # from its end as 1 + 4 = 5 and call it a win.
    black = points(7, [(3, 0), (3, 1), (3, 3), (3, 4), (3, 5), (3, 2), (3, 6)])
    white = points(7, [(6, 0), (6, 2), (6, 4), (0, 1), (0, 3), (0, 5)])
    moves = interleave(black, white)
    _, six = play_jax(7, "standard", moves[:-1])
    assert not six.done and ref.longest_run(ref.play_all(7, "standard", moves[:-1]).board, 1) == 6
    _, seven = play_jax(7, "standard", moves)
    assert not seven.done and seven.winner == -1
    assert ref.longest_run(ref.play_all(7, "standard", moves).board, 1) == 7


def test_freestyle_overline_wins():
    moves = interleave(points(6, OVERLINE_BLACK), points(6, OVERLINE_WHITE))
    rules, s = play_jax(6, "freestyle", moves)
    assert s.done and s.winner == BLACK
    assert float(rules.reward(s, BLACK)) == 1.0 and float(rules.reward(s, WHITE)) == -1.0


def test_standard_exact_five_across_an_overline_wins():
    # The last black stone (3, 2) makes six in row 3 and exactly five in column 2.
    black = OVERLINE_BLACK[:-1] + [(0, 2), (1, 2), (2, 2), (4, 2)] + [(3, 2)]
    white = [(5, 0), (5, 2), (5, 4), (1, 1), (1, 3), (0, 0), (0, 4), (2, 5), (5, 5)]
    moves = interleave(points(6, black), points(6, white))
    _, s = play_jax(6, "standard", moves)
    assert s.done and s.winner == BLACK and s.num_moves == 19


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize(
    "line",
    [
        [(0, c) for c in range(5)],  # top edge
        [(r, 4) for r in range(5)],  # right edge
        [(i, i) for i in range(5)],  # main diagonal, corner to corner
        [(i, 4 - i) for i in range(5)],  # anti-diagonal
    ],
    ids=["row", "column", "diagonal", "anti-diagonal"],
)
def test_five_on_the_edges_wins_on_the_fifth_stone(rule, line):
    white = [(r, c) for r in range(5) for c in range(5) if (r, c) not in line]
    white = [white[i] for i in (0, 5, 10, 15)]  # scattered, never five
    moves = interleave(points(5, line), points(5, white))
    rules, step, _, _ = jitted(5, rule)
    _, before = play_jax(5, rule, moves[:-1])
    assert not before.done
    _, s = play_jax(5, rule, moves)
    assert s.done and s.winner == BLACK and s.last_action == moves[-1]


# A full 5x5 board without five in a row for either colour; 13 black, 12 white.
DRAW_5X5 = [
    "XXOOX",
    "OOXXO",
    "XXOOX",
    "OOXXO",
    "XXOOX",
]


def test_draw_on_a_full_board():
    cells = [(r, c) for r in range(5) for c in range(5)]
    black = [(r, c) for r, c in cells if DRAW_5X5[r][c] == "X"]
    white = [(r, c) for r, c in cells if DRAW_5X5[r][c] == "O"]
    moves = interleave(points(5, black), points(5, white))
    for rule in RULES:
        rules, s = play_jax(5, rule, moves)
        assert s.done and s.winner == -1 and s.num_moves == 25
        assert not np.asarray(rules.legal_mask(s)).any()
        assert float(rules.reward(s, BLACK)) == 0.0 == float(rules.reward(s, WHITE))
        _, before = play_jax(5, rule, moves[:-1])
        assert not before.done


def test_win_on_the_last_empty_point_is_a_win_not_a_draw():
    rng = random.Random(0)
    for _ in range(10_000):
        moves = rng.sample(range(25), 25)
        game = ref.play_all(5, "freestyle", moves)
        if game.winner >= 0 and game.num_moves == 25:
            break
    else:
        pytest.fail("no game won on the last point")
    _, s = play_jax(5, "freestyle", moves)
    assert s.done and s.winner == game.winner and s.num_moves == 25


def finished_games():
    black = [(0, c) for c in range(5)]
    white = [(4, c) for c in range(4)]
    won = interleave(points(5, black), points(5, white))
    cells = [(r, c) for r in range(5) for c in range(5)]
    drawn = interleave(points(5, [p for p in cells if DRAW_5X5[p[0]][p[1]] == "X"]),
                       points(5, [p for p in cells if DRAW_5X5[p[0]][p[1]] == "O"]))
    return {"won": won, "drawn": drawn}


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("which", ["won", "drawn"])
def test_stepping_a_finished_game_is_a_no_op(rule, which):
    rules, step, _, _ = jitted(5, rule)
    _, done = play_jax(5, rule, finished_games()[which])
    assert done.done
    for a in range(-2, 27):
        after = jax.device_get(step(done, jnp.int32(a)))
        for name, x, y in zip(State._fields, done, after, strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y), (a, name)


@pytest.mark.parametrize("rule", RULES)
def test_illegal_actions_set_the_flag_and_change_nothing_else(rule):
    moves = [12, 6, 7, 18, 0]  # five stones, white to move
    rules, s = play_jax(5, rule, moves)
    rules, step, _, _ = jitted(5, rule)
    for a in [*moves, -1, 25, 26, 1000, -1000]:
        t = jax.device_get(step(s, jnp.int32(a)))
        assert t.illegal, a
        for name in ("board", "to_play", "last_action", "num_moves", "winner", "done"):
            assert np.array_equal(getattr(t, name), getattr(s, name)), (a, name)
    # The flag is sticky and play goes on normally.
    t = jax.device_get(step(step(s, jnp.int32(12)), jnp.int32(1)))
    assert t.illegal and t.board[1] == -1 and t.num_moves == 6 and t.to_play == BLACK


def test_to_text():
    rules, s = play_jax(5, "freestyle", [0, 24, 6])
    assert to_text(rules, s).splitlines()[:2] == ["X . . . .", ". X . . ."]
    assert to_text(rules, s).splitlines()[-1] == ". . . . O"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(size=3), "size"),
        (dict(size=4), "size"),
        (dict(size=20), "size"),
        (dict(size=15.0), "size"),
        (dict(rule="caro"), "rule"),
        (dict(rule="Freestyle"), "rule"),
    ],
)
def test_rules_validation_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=rf"rules\.{field}\b"):
        Rules(**kwargs)


def test_rules_are_hashable_values():
    assert Rules(9, "standard") == Rules(9, "standard")
    assert hash(Rules(9, "standard")) == hash(Rules(9, "standard"))
    assert Rules(9, "standard") != Rules(9, "freestyle")
    assert Rules(7).num_actions == 49


# --------------------------------------------------------------------------
# The reference itself.


@pytest.mark.parametrize("size", [5, 6])
def test_reference_lines_cover_every_point_once_per_direction(size):
    lines = ref.lines(size)
    assert len(lines) == 2 * size + 2 * (2 * size - 1)
    cells = [p for line in lines for p in line]
    assert len(cells) == 4 * size * size
    assert collections.Counter(cells) == {(r, c): 4 for r in range(size) for c in range(size)}


def test_reference_runs_and_rules():
    board = [[0] * 7 for _ in range(7)]
    for c in range(6):
        board[2][c] = 1  # a black six in row 2
    for r in range(5):
        board[r][6] = -1  # a white five in column 6
    found = ref.runs(board)
    assert (1, 6) in found and (-1, 5) in found
    assert max(n for s, n in found if s == 1) == 6
    assert ref.winning_stones(board, "freestyle") == {1, -1}
    assert ref.winning_stones(board, "standard") == {-1}
    assert ref.longest_run(board, 1) == 6 and ref.longest_run(board, -1) == 5


@functools.cache
def jitted_five_points(size: int, rule: str):
    return jax.jit(Rules(size, rule).five_points)


@functools.cache
def jitted_five_points_from_windows(size: int, rule: str):
    """``five_points`` read from ``line_windows`` (as the tactics read it)."""
    rules = Rules(size, rule)
    return jax.jit(lambda board, me: rules.five_points(board, me, rules.line_windows(board)))


@pytest.mark.parametrize("rule", RULES)
def test_five_points_match_the_reference(rule):
    """Rules.five_points: the empty points where a stone would win, for both
    colours, on random boards where neither colour has won yet (so a win after
    the move is a win through the point), against the plain-Python rules."""
    rng = np.random.default_rng(5)
    found = collections.Counter()
    for size in (5, 6, 9, 15):
        five_points = jitted_five_points(size, rule)
        from_windows = jitted_five_points_from_windows(size, rule)
        tried = 0
        while tried < 40:
            density = rng.uniform(0.3, 0.9)
            board = rng.choice([0, 1, -1], size=(size, size),
                               p=[1 - density, density / 2, density / 2]).astype(np.int8)
            if ref.winning_stones(board.tolist(), "freestyle"):
                continue
            tried += 1
            for me in (1, -1):
                got = np.asarray(five_points(jnp.asarray(board.ravel()), jnp.int8(me)))
                want = np.zeros(size * size, bool)
                for a in np.flatnonzero(board.ravel() == 0):
                    after = board.copy().ravel()
                    after[a] = me
                    want[a] = me in ref.winning_stones(after.reshape(size, size).tolist(), rule)
                np.testing.assert_array_equal(
                    got, want, err_msg=f"{size}x{size} {rule} me={me}\n{board}")
                np.testing.assert_array_equal(
                    np.asarray(from_windows(jnp.asarray(board.ravel()), jnp.int8(me))), want,
                    err_msg=f"from line_windows: {size}x{size} {rule} me={me}\n{board}")
                found["hit" if want.any() else "none"] += 1
    assert found["hit"] >= 20 and found["none"] >= 20, found


@pytest.mark.parametrize("rule", RULES)
def test_new_five_points_match_the_reference(rule):
    """Rules.new_five_points: the five points a stone would have on the lines
    through it, counted by replaying every empty point with the plain-Python
    rules, on random boards where the colour has no five point yet (so every
    five point after the move is on a line through it)."""
    rng = np.random.default_rng(6)
    found = collections.Counter()
    for size in (6, 9, 11):
        rules = Rules(size, rule)
        count = jax.jit(rules.new_five_points)
        from_windows = jax.jit(lambda b, m, r=rules: r.new_five_points(b, m, r.line_windows(b)))
        tried = 0
        while tried < 12:
            density = rng.uniform(0.3, 0.8)
            board = rng.choice([0, 1, -1], size=size * size,
                               p=[1 - density, density / 2, density / 2]).astype(np.int8)
            if ref.winning_stones(board.reshape(size, size).tolist(), "freestyle"):
                continue
            tried += 1
            for me in (1, -1):
                if np.asarray(rules.five_points(jnp.asarray(board), jnp.int8(me))).any():
                    continue
                got = np.asarray(count(jnp.asarray(board), jnp.int8(me)))
                want = np.zeros(size * size, np.int32)
                for p in np.flatnonzero(board == 0):
                    after = board.copy()
                    after[p] = me
                    for q in np.flatnonzero(after == 0):
                        again = after.copy()
                        again[q] = me
                        grid = again.reshape(size, size).tolist()
                        want[p] += me in ref.winning_stones(grid, rule)
                np.testing.assert_array_equal(got, want, err_msg=f"{size}x{size} {rule}\n{board}")
                np.testing.assert_array_equal(
                    np.asarray(from_windows(jnp.asarray(board), jnp.int8(me))), want,
                    err_msg=f"from line_windows: {size}x{size} {rule}\n{board}")
                found.update(np.minimum(want[board == 0], 2).tolist())
    assert found[1] >= 20 and found[2] >= 5, found


def _plain_window_count(vals, me, rule):
    """Five points a stone ``me`` at the centre of an 11-point window makes on
    it: for each empty point within 4, place both stones and measure the run
    through the centre inside the window (plain Python)."""
    count = 0
    for q in range(1, 10):
        if q == 5 or vals[q] != 0:
            continue
        line = [v == me for v in vals]
        line[5] = line[q] = True
        lo = hi = 5
        while lo > 0 and line[lo - 1]:
            lo -= 1
        while hi < 10 and line[hi + 1]:
            hi += 1
        length = hi - lo + 1
        if lo <= q <= hi and (length >= 5 if rule == "freestyle" else length == 5):
            count += 1
    return count


@pytest.mark.parametrize("rule", RULES)
def test_window_five_count_table_matches_a_plain_count(rule):
    """The 2**18-entry lookup behind Rules.window_five_count (and so
    new_five_points and the search's forced moves) against a plain count, on
    random windows of stones, empty points and off-board points."""
    rng = np.random.default_rng(11)
    rules = Rules(9, rule)
    count = jax.jit(rules.window_five_count)
    for density in (0.3, 0.6, 0.85):
        vals = rng.choice([0, 1, -1, 2], size=(400, 4, 11),
                          p=[1 - density, 0.45 * density, 0.45 * density, 0.1 * density])
        vals = vals.astype(np.int8)
        for me in (1, -1):
            got = np.asarray(count(jnp.asarray(vals), jnp.int8(me)))
            want = [sum(_plain_window_count(list(w), me, rule) for w in lines) for lines in vals]
            np.testing.assert_array_equal(got, want)
    assert np.max(got) >= 2


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=5, max_size=5), min_size=1, max_size=8))
def test_leading_run_is_the_cumprod_count(rows):
    """The run length a five is read from counts the leading Trues, as
    ``cumprod(...).sum(-1)`` does."""
    from agz_jax.game.gomoku import _leading_run

    same = jnp.asarray(rows)
    want = [next((i for i, b in enumerate(r) if not b), len(r)) for r in rows]
    assert np.asarray(_leading_run(same)).tolist() == want
