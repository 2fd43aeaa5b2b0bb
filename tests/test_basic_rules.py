"""Stage 1's generated positions: legality and labels, checked by plain Python.

The oracle here knows nothing of the generator's windows and cut-outs. It finds
winning points by counting the run through a point (cross-checked against the
referee, ``reference.py``, which scans the whole board), and uses two plain
facts of the game:

* a stone can only change runs along the four lines through it, and a run
  through p that reaches n more than 5 points away would hold a five already;
  so after playing n only the winning status of points within 5 of n on its
  lines can change;
* a stone of A on an empty point m changes no run of B: B's winning points
  after it are B's winning points before it, less m.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
import reference
from hypothesis import given, settings
from hypothesis import strategies as st

from agz_jax.config.schema import ConfigError
from agz_jax.curriculum import basic_rules as br
from agz_jax.game.gomoku import Rules

DIRS = ((0, 1), (1, 0), (1, 1), (1, -1))


# --------------------------------------------------------------- the oracle


def five_at(board, r, c, s, rule):
    """Does s, playing the empty point (r, c), make a winning run (per the rule)?"""
    size = len(board)
    for dr, dc in DIRS:
        run = 1
        for sign in (1, -1):
            rr, cc = r + sign * dr, c + sign * dc
            while 0 <= rr < size and 0 <= cc < size and board[rr][cc] == s:
                run += 1
                rr, cc = rr + sign * dr, cc + sign * dc
        if run == 5 or (run > 5 and rule == "freestyle"):
            return True
    return False


def empties(board):
    n = len(board)
    return [(r, c) for r in range(n) for c in range(n) if board[r][c] == 0]


def winning(board, s, rule):
    """W(s): the set of points where s wins at once."""
    return {p for p in empties(board) if five_at(board, *p, s, rule)}


def star(p, size, reach=5):
    r, c = p
    out = set()
    for dr, dc in DIRS:
        for k in range(-reach, reach + 1):
            rr, cc = r + k * dr, c + k * dc
            if k and 0 <= rr < size and 0 <= cc < size:
                out.add((rr, cc))
    return out


def double_threats(board, s, rule):
    """{n: W(s) after s plays n} for the points n leaving s 2+ winning points."""
    size = len(board)
    before = winning(board, s, rule)
    out = {}
    for n in empties(board):
        near = star(n, size)
        board[n[0]][n[1]] = s
        after = {p for p in before if p not in near and p != n}
        after |= {p for p in near if board[p[0]][p[1]] == 0 and five_at(board, *p, s, rule)}
        board[n[0]][n[1]] = 0
        if len(after) >= 2:
            out[n] = after
    return out


def blocks(board, s_opp, rule, dbl_opp):
    """The empty points m after which the opponent has no double threat."""
    return {m for m in empties(board)
            if all(m == n or len(w - {m}) < 2 for n, w in dbl_opp.items())}


def game_of(rules, state):
    """A reference.Game holding a generated state."""
    g = reference.Game(rules.size, rules.rule)
    b = np.asarray(state.board).reshape(rules.size, rules.size)
    g.board = [[int(v) for v in row] for row in b]
    g.to_play = int(state.to_play)
    g.last_action = int(state.last_action)
    g.num_moves = int(state.num_moves)
    return g


def row(positions, i):
    return jax.tree.map(lambda x: np.asarray(x[i]), positions)


def check_position(rules, p, reference_check=False):
    """Asserts legality and the label of one generated position ``p`` (numpy leaves)."""
    size, rule = rules.size, rules.rule
    state, ex = p.states, p.examples
    g = game_of(rules, state)
    board = g.board
    colour = int(state.to_play)
    me, opp = reference.stone_of(colour), -reference.stone_of(colour)
    n_black = sum(v == 1 for r in board for v in r)
    n_white = sum(v == -1 for r in board for v in r)

    # legality
    assert n_black - n_white == colour
    assert int(state.num_moves) == n_black + n_white
    assert reference.longest_run(board, 1) < 5 and reference.longest_run(board, -1) < 5
    assert int(state.winner) == -1 and not bool(state.done) and not bool(state.illegal)
    lr, lc = divmod(int(state.last_action), size)
    assert board[lr][lc] == opp  # the last move was the opponent's
    assert int(ex.to_play) == colour
    np.testing.assert_array_equal(ex.obs, np.asarray(g.observe(), np.int8))

    # the label
    kind = int(p.kind)
    policy = np.asarray(ex.policy).reshape(size, size)
    marked = {(r, c) for r in range(size) for c in range(size) if policy[r, c] > 0}
    assert abs(policy.sum() - 1) < 1e-5
    assert float(ex.z) == (1.0 if kind in (br.FOUR_ATTACK, br.THREE_ATTACK) else 0.0)
    win_me, win_opp = winning(board, me, rule), winning(board, opp, rule)
    if reference_check:  # the oracle's winning points are the referee's
        for s, wins in ((me, win_me), (opp, win_opp)):
            for a in range(size * size):
                if g.is_empty(a):
                    h = g.copy()
                    h.to_play = reference.BLACK if s == 1 else reference.WHITE
                    h.play(a)
                    assert (h.winner >= 0) == (divmod(a, size) in wins)

    if kind == br.FOUR_ATTACK:
        expected = win_me
        assert expected
    elif kind == br.FOUR_DEFENCE:
        assert not win_me and len(win_opp) == 1
        assert not double_threats(board, me, rule)
        (m,) = win_opp
        dbl_opp = double_threats(board, opp, rule)
        assert m in blocks(board, opp, rule, dbl_opp)  # the block holds for 3 plies
        expected = win_opp
    elif kind == br.THREE_ATTACK:
        assert not win_me and not win_opp
        expected = set(double_threats(board, me, rule))
        assert expected
    else:
        assert not win_me and not win_opp
        assert not double_threats(board, me, rule)
        dbl_opp = double_threats(board, opp, rule)
        assert dbl_opp
        expected = blocks(board, opp, rule, dbl_opp)
        assert expected

    if len(marked) == 1 and len(expected) > 1:  # one_hot: one of the label points
        assert marked <= expected
    else:
        assert marked == expected
        np.testing.assert_allclose(policy[policy > 0], 1 / len(expected), rtol=1e-5)
    return kind


# --------------------------------------------------------------- fixtures

N_MAIN = 2048
RULES_MAIN = Rules(15, "freestyle")
RULES_SMALL = Rules(9, "standard")
CFG_SMALL = br.BasicRulesConfig(colours="paper", policy="one_hot", noise_radius=3,
                                max_noise=5, oversample=1.5)


@pytest.fixture(scope="module")
def main():
    return br.generate_positions(RULES_MAIN, jax.random.key(0), N_MAIN)


@pytest.fixture(scope="module")
def small():
    return br.generate_positions(RULES_SMALL, jax.random.key(1), 200, CFG_SMALL)


# --------------------------------------------------------------- tests


def test_shapes_and_mix(main):
    ex = main.examples
    a = RULES_MAIN.num_actions
    assert ex.obs.shape == (N_MAIN, 15, 15, 3) and ex.obs.dtype == np.int8
    assert ex.policy.shape == (N_MAIN, a) and ex.policy.dtype == np.float32
    assert ex.z.shape == ex.to_play.shape == ex.valid.shape == (N_MAIN,)
    assert ex.to_play.dtype == np.int32 and ex.valid.dtype == bool
    assert np.asarray(ex.valid).all()
    counts = np.bincount(np.asarray(main.kind), minlength=4)
    assert tuple(counts) == br.BasicRulesConfig().counts(N_MAIN)
    for kind in range(4):  # both colours to move in every kind
        colours = np.asarray(ex.to_play)[np.asarray(main.kind) == kind]
        assert 0.35 < colours.mean() < 0.65


def test_labels_main(main):
    """Every kind, checked in full by the oracle; the first few against the referee too."""
    seen = set()
    for i in range(48):
        seen.add(check_position(RULES_MAIN, row(main, i), reference_check=i < 4))
    assert seen == {0, 1, 2, 3}


def test_all_legal_main(main):
    """Stone counts, no five, the state's fields, for every position (vectorised)."""
    s = main.states
    board = np.asarray(s.board)
    black, white = (board == 1).sum(1), (board == -1).sum(1)
    np.testing.assert_array_equal(black - white, np.asarray(s.to_play))
    np.testing.assert_array_equal(black + white, np.asarray(s.num_moves))
    assert (np.asarray(s.winner) == -1).all() and not np.asarray(s.done).any()
    last = np.take_along_axis(board, np.asarray(s.last_action)[:, None], 1)[:, 0]
    np.testing.assert_array_equal(last, np.where(np.asarray(s.to_play) == 0, -1, 1))
    for b in board[:512]:
        b2 = b.reshape(15, 15).tolist()
        assert reference.longest_run(b2, 1) < 5 and reference.longest_run(b2, -1) < 5


def test_labels_standard_small(small):
    """9x9 'standard' (overlines do not win), paper colours, one-hot pi, nearby noise."""
    ex = small.examples
    valid = np.asarray(ex.valid)
    assert valid.mean() > 0.95
    kind = np.asarray(small.kind)
    colour = np.asarray(ex.to_play)
    attack = (kind == br.FOUR_ATTACK) | (kind == br.THREE_ATTACK)
    np.testing.assert_array_equal(colour, np.where(attack, 0, 1))  # black attacks
    assert (np.asarray(ex.policy)[valid].max(1) == 1).all()  # one-hot
    for i in np.flatnonzero(valid):
        check_position(RULES_SMALL, row(small, i), reference_check=i < 4)


def test_symmetries_and_directions(main):
    sym, direction = np.asarray(main.symmetry), np.asarray(main.direction)
    assert set(sym) == set(range(8))
    assert set(direction) == set(range(4))
    kind = np.asarray(main.kind)
    for k in range(4):
        assert set(sym[kind == k]) == set(range(8))
        assert set(direction[kind == k]) == set(range(4))


def test_direction_is_the_patterns_line(main):
    """For the fours: a winning point of the threat has four stones along the direction."""
    for i in range(200):
        p = row(main, i)
        kind = int(p.kind)
        if kind not in (br.FOUR_ATTACK, br.FOUR_DEFENCE):
            continue
        board = np.asarray(p.states.board).reshape(15, 15)
        me = 1 if int(p.states.to_play) == 0 else -1
        s = me if kind == br.FOUR_ATTACK else -me
        dr, dc = DIRS[int(p.direction)]
        found = False
        for a in np.flatnonzero(np.asarray(p.examples.policy) > 0):
            r, c = divmod(int(a), 15)
            for start in range(-4, 1):
                cells = [(r + (start + k) * dr, c + (start + k) * dc) for k in range(5)]
                if all(0 <= rr < 15 and 0 <= cc < 15 for rr, cc in cells):
                    found |= sum(board[rr, cc] == s for rr, cc in cells) == 4
        assert found, i


def test_deterministic_and_no_retrace(main):
    again = br.generate_positions(RULES_MAIN, jax.random.key(0), N_MAIN)
    for x, y in zip(jax.tree.leaves(main), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    size = br._generate._cache_size()
    other = br.generate(RULES_MAIN, jax.random.key(7), N_MAIN, br.BasicRulesConfig())
    assert br._generate._cache_size() == size  # a new key, cfg spelt out: no new compile
    assert not np.array_equal(np.asarray(other.obs), np.asarray(main.examples.obs))
    np.testing.assert_array_equal(np.asarray(other.valid), True)


def test_oracle_sees_an_open_three():
    """The oracle itself, on a hand-made open three: D = the two ends, blocks = the ends."""
    board = [[0] * 9 for _ in range(9)]
    for c in (3, 4, 5):
        board[4][c] = 1
    dbl = double_threats(board, 1, "freestyle")
    assert set(dbl) == {(4, 2), (4, 6)}
    assert blocks(board, 1, "freestyle", dbl) == {(4, 2), (4, 6)}
    board[4][1] = -1  # now open on one side only: three ways to stop it
    dbl = double_threats(board, 1, "freestyle")
    assert set(dbl) == {(4, 6)}
    assert blocks(board, 1, "freestyle", dbl) == {(4, 2), (4, 6), (4, 7)}


# --------------------------------------------------------------- the config


def test_counts_round_to_total():
    cfg = br.BasicRulesConfig()
    # How many positions is the run config's (basic.num_positions), not the generator's.
    assert not hasattr(cfg, "num_positions")
    assert sum(cfg.counts(80_000)) == 80_000
    assert cfg.counts(10) == (3, 3, 2, 2)


@settings(max_examples=50, deadline=None)
@given(fracs=st.lists(st.integers(0, 10), min_size=4, max_size=4).filter(lambda x: sum(x) > 0),
       n=st.integers(1, 5000))
def test_counts_property(fracs, n):
    total = sum(fracs)
    names = dict(zip(br.KINDS, (f / total for f in fracs), strict=True))
    names["three_defence"] = 1 - sum(names[k] for k in br.KINDS[:3])
    cfg = br.BasicRulesConfig(**names)
    counts = cfg.counts(n)
    assert sum(counts) == n
    for k, c in zip(br.KINDS, counts, strict=True):
        assert abs(c - getattr(cfg, k) * n) < 1 + 1e-9


@pytest.mark.parametrize("field, value", [
    ("min_noise", -1), ("max_noise", 1.5), ("noise_radius", -2),
    ("four_attack", 1.5), ("three_defence", 0.5), ("colours", "green"), ("policy", "soft"),
    ("oversample", 0.5),
])
def test_bad_config_names_the_field(field, value):
    with pytest.raises(ConfigError, match=f"basic_rules.{field}"):
        br.BasicRulesConfig(**{field: value})


def test_min_max_noise_order():
    with pytest.raises(ConfigError, match="basic_rules.max_noise"):
        br.BasicRulesConfig(min_noise=5, max_noise=2)
    assert dataclasses.replace(br.BasicRulesConfig(), min_noise=2, max_noise=2).max_noise == 2
