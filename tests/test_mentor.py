"""The mentor: its tables and search against the plain-Python reference, and the
tactics it must never miss, at every level, for both colours."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_mentor as ref

from agz_jax.game import mentor
from agz_jax.game.gomoku import Rules


def random_position(rules: Rules, rng: np.random.Generator, max_stones: int):
    """A random legal, unfinished position (host-side), as (board list, to_play)."""
    while True:
        n = int(rng.integers(0, max_stones + 1))
        moves = rng.permutation(rules.num_actions)[:n]
        state = rules.from_moves([int(m) for m in moves])
        if not bool(state.done):
            return [int(v) for v in np.asarray(state.board)], int(state.to_play)


def test_pattern_table_matches_the_reference_on_every_neighbourhood():
    table = mentor.pattern_table()
    symbols = (".", "o", "x")
    for index in range(3**8):
        neigh = [symbols[(index // 3**i) % 3] for i in range(8)]
        line = tuple(neigh[:4] + ["o"] + neigh[4:])
        assert table[index] == ref.line_class(line), line


# Lines of 9 points, the centre (index 4) being the stone just played.
@pytest.mark.parametrize("line,expected", [
    (".oooooo..", 6),   # six in a row: five or more wins (freestyle)
    ("ooooo....", 6),   # five
    (".oooo....", 5),   # .oooo. -> open four: two points complete five
    ("xoooo....", 4),   # xoooo. blocked on one side -> four
    ("oo.oo....", 4),   # the gap completes five
    ("...ooo...", 3),   # open three: can become .oooo.
    ("..o.oo...", 3),   # split open three
    ("...xooo..", 2),   # can become a four only
    ("....oo...", 1),   # two: can become an open three
    ("....o....", 0),   # a lone stone
    ("...xox...", 0),   # no five can pass through the centre
    ("x..oo..x.", 1),   # a two with just enough room
    ("x.oo.x...", 0),   # no room for five
])
def test_named_patterns(line, expected):
    assert ref.line_class(tuple(line)) == expected
    neigh = line[:4] + line[5:]
    index = sum(".ox".index(ch) * 3**i for i, ch in enumerate(neigh))
    assert mentor.pattern_table()[index] == expected


@pytest.mark.parametrize("size", [9, 15])
def test_features_match_the_reference_on_random_positions(size):
    rules = Rules(size)
    rng = np.random.default_rng(size)
    feats = jax.jit(lambda b, t: mentor.features(rules, b, t))
    for _ in range(12):
        board, to_play = random_position(rules, rng, max_stones=size * 3)
        got = jax.device_get(feats(jnp.asarray(board, jnp.int8), jnp.int32(to_play)))
        want = ref.features(board, size, to_play)
        for name, values in want.items():
            np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(values),
                                          err_msg=f"{name} on\n{board}")


@pytest.mark.parametrize("level,beam", [(1, 5), (2, 3), (3, 2)])
def test_search_values_match_the_reference(level, beam):
    rules = Rules(9)
    rng = np.random.default_rng(100 + level)
    m = mentor.Mentor(rules, level, beam)
    root = jax.jit(m.root)
    for _ in range(6):
        board, to_play = random_position(rules, rng, max_stones=24)
        moves, values, valid = jax.device_get(root(jnp.asarray(board, jnp.int8),
                                                   jnp.int32(to_play)))
        got = [(int(a), int(v)) for a, v, ok in zip(moves, values, valid, strict=True) if ok]
        assert got == ref.root_values(board, 9, to_play, level, beam)


@pytest.mark.parametrize("level", [0, 1, 2])
def test_chosen_move_is_one_of_the_reference_best(level):
    rules = Rules(9)
    rng = np.random.default_rng(7 + level)
    m = mentor.Mentor(rules, level, beam=4)
    choose = jax.jit(m.choose)
    for i in range(6):
        board, to_play = random_position(rules, rng, max_stones=20)
        state = rules.init()._replace(board=jnp.asarray(board, jnp.int8),
                                      to_play=jnp.int32(to_play),
                                      num_moves=jnp.int32(sum(v != 0 for v in board)))
        move = int(choose(jax.random.PRNGKey(i), state))
        assert move in ref.best_moves(board, 9, to_play, level, 4)


def test_ties_are_broken_at_random_by_key():
    rules = Rules(15)
    state = rules.from_moves([7 * 15 + 7])  # one black stone in the centre: symmetric
    choose = jax.jit(mentor.Mentor(rules, 0).choose)
    moves = {int(choose(jax.random.PRNGKey(k), state)) for k in range(40)}
    assert len(moves) >= 2
    assert moves <= ref.best_moves([int(v) for v in np.asarray(state.board)], 15, 1, 0, 0)


# --------------------------------------------------------------------------- tactics

SIZE = 15
FILLERS = [(0, 0), (0, 14), (14, 0), (14, 14), (0, 7), (14, 7), (7, 0), (7, 14)]


def build(mine, theirs, me_black: bool, transpose: bool):
    """A position where the side to move owns ``mine`` and the opponent ``theirs``
    (lists of (row, col)), with lone corner stones added so the stone counts fit
    the side to move. Returns (board list, to_play)."""
    if transpose:
        mine = [(c, r) for r, c in mine]
        theirs = [(c, r) for r, c in theirs]
    black, white = (list(mine), list(theirs)) if me_black else (list(theirs), list(mine))
    fillers = iter(FILLERS)
    # black to move: #black == #white; white to move: #black == #white + 1
    want_diff = 0 if me_black else 1
    while len(black) - len(white) < want_diff:
        black.append(next(fillers))
    while len(black) - len(white) > want_diff:
        white.append(next(fillers))
    board = [0] * (SIZE * SIZE)
    for r, c in black:
        board[r * SIZE + c] = 1
    for r, c in white:
        board[r * SIZE + c] = -1
    return board, (0 if me_black else 1)


def row(r, cols):
    return [(r, c) for c in cols]


# (name, own stones, opponent stones)
SCENARIOS = {
    # both have a four; the side to move must complete its own five
    "complete_five": (row(7, [3, 4, 5, 6]), row(9, [3, 4, 5, 6]) + [(8, 2)]),
    # the opponent has a four blocked on one side (at column 2); block at column 7
    "block_four": ([(7, 2), (5, 5), (3, 10)], row(7, [3, 4, 5, 6])),
    # own open three with room on both sides, opponent has nothing urgent
    "open_four": (row(7, [5, 6, 7]), [(3, 3), (11, 11), (3, 11)]),
    # the opponent has an open three; nothing urgent of our own
    "answer_three": ([(3, 3), (11, 11), (3, 11)], row(7, [5, 6, 7])),
}


def _five_points(board, me):
    """Points where ``me`` completes a five (reference classes)."""
    f = ref.features(board, SIZE, 0 if me == 1 else 1)
    return [p for p in range(SIZE * SIZE) if f["five_me"][p]]


def check(name, board, to_play, move):
    me = 1 if to_play == 0 else -1
    assert board[move] == 0
    after = list(board)
    after[move] = me
    if name == "complete_five":
        assert move in _five_points(board, me)
    elif name == "block_four":
        assert _five_points(board, me) == []
        assert _five_points(board, -me) == [move]
    elif name == "open_four":
        assert len(_five_points(after, me)) >= 2  # two ways to five: unstoppable
    elif name == "answer_three":
        f = ref.features(after, SIZE, 1 - to_play)  # the opponent to move
        assert not any(f["open_four_me"]), "the opponent can still make an open four"


def _scenario_positions():
    cases, boards, to_plays = [], [], []
    for name, me_black, transpose in itertools.product(SCENARIOS, (True, False),
                                                       (False, True)):
        mine, theirs = SCENARIOS[name]
        board, to_play = build(mine, theirs, me_black, transpose)
        cases.append((name, me_black, transpose))
        boards.append(board)
        to_plays.append(to_play)
    return cases, boards, to_plays


@pytest.mark.parametrize("level", list(range(mentor.MAX_LEVEL + 1)))
def test_never_misses_the_tactics(level):
    rules = Rules(SIZE)
    cases, boards, to_plays = _scenario_positions()
    n = len(boards)
    states = jax.vmap(lambda b, t: rules.init()._replace(board=b, to_play=t))(
        jnp.asarray(boards, jnp.int8), jnp.asarray(to_plays, jnp.int32))
    act = jax.jit(mentor.Mentor(rules, level).act)
    for seed in range(2):
        moves = np.asarray(act(jax.random.PRNGKey(seed), states))
        assert moves.shape == (n,)
        for case, board, to_play, move in zip(cases, boards, to_plays, moves, strict=True):
            try:
                check(case[0], board, to_play, int(move))
            except AssertionError as e:
                raise AssertionError(f"level {level}, {case}: move {divmod(int(move), SIZE)}"
                                     f": {e}") from e


def test_scenarios_are_what_they_claim():
    """The hand-made positions hold the threats the tactic checks rely on."""
    cases, boards, to_plays = _scenario_positions()
    for (name, _, _), board, to_play in zip(cases, boards, to_plays, strict=True):
        me = 1 if to_play == 0 else -1
        assert sum(v == 1 for v in board) - sum(v == -1 for v in board) == to_play
        if name == "complete_five":
            assert _five_points(board, me) and _five_points(board, -me)
        if name == "block_four":
            assert len(_five_points(board, -me)) == 1
        if name == "answer_three":
            f = ref.features(board, SIZE, 1 - to_play)
            assert any(f["open_four_me"])  # the opponent threatens an open four


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="level"):
        mentor.Mentor(Rules(15), 4)
    with pytest.raises(ValueError, match="level"):
        mentor.Mentor(Rules(15), -1)
    with pytest.raises(ValueError, match="freestyle"):
        mentor.Mentor(Rules(15, "standard"), 1)
    with pytest.raises(ValueError, match="beam"):
        mentor.Mentor(Rules(15), 1, beam=0)
