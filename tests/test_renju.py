"""Renju: black's forbidden moves (``agz_jax.game.renju``) and the renju rule of
``gomoku.Rules``, against textbook cases and an independent referee (the PyPI
package ``renju``, a port of the Piskvork judge)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny_models import heavy_jit, renju_fouls

from agz_jax.game import renju, renju_check
from agz_jax.game.gomoku import BLACK, WHITE, Rules

SIZE = 15
FORBIDDEN = heavy_jit(renju.forbidden, static_argnums=(1, 2, 3))
FOUL = heavy_jit(renju.foul, static_argnums=2)
FORBIDDEN_AT = heavy_jit(renju.forbidden_at, static_argnums=2)

# Each diagram is laid from (3, 3); ``*`` is the point black would play.
TEXTBOOK = {
    "two open threes crossing: double three": ("""
        . . . . . . .
        . . . . . . .
        . . X X * . .
        . . . . X . .
        . . . . X . .""", "double three"),
    "a four and a three: allowed": ("""
        . . . . . . .
        . X X X * . .
        . . . . X . .
        . . . . X . .""", "none"),
    "two fours crossing: double four": ("""
        . . . . . . .
        X X X * . . .
        . . . X . . .
        . . . X . . .
        . . . X . . .""", "double four"),
    "two fours on one line (X.XXX.X): double four": ("""
        . . . . . . . . .
        . X . X * X . X .""", "double four"),
    "six in a row: overline": ("""
        . . . . . . . . .
        . X X * X X X . .""", "overline"),
    "exactly five wins over a double four": ("""
        . . . . . . . .
        X X X X * . . .
        . . . . X . . .
        . . . . X . . .
        . . . . X . . .""", "none"),
    "exactly five wins over an overline": ("""
        . . . . . . . . . .
        X X X X * . . . . .
        . . . . X . . . . .
        . . . . X . . . . .
        . . . . X . . . . .
        . . . . X . . . . .
        . . . . X . . . . .""", "none"),
    "a three closed by white is no three: allowed": ("""
        . . . . . . .
        O X X * . . .
        . . . X . . .
        . . . X . . .""", "none"),
    "split threes count: double three": ("""
        . . . . . . . .
        . X . X * . . .
        . . . . X . . .
        . . . . X . . .""", "double three"),
    "a false three (its straight-four point is an overline): allowed": ("""
        . . . . . . . . .
        . . . . . . . . .
        . X X * . . . . .
        . . . X . . . . .
        . . . X . . . . .
        . . . . . . . . .
        . . . X . . . . .
        . . . X . . . . .""", "none"),
    "a three with white two points away still counts: double three": ("""
        . . . . . . . .
        . X X * . O . .
        . . . X . . . .
        . . . X . . . .""", "double three"),
}

# Found by ``renju_check.line_boards`` (seed 7) and confirmed by the referee:
# (black stones, white stones, point, verdict, the depth that first reads it right).
RECURSIVE = {
    "a three whose straight-four point is a false double three counts": (
        [52, 67, 79, 97, 111, 112, 122, 124, 125, 128, 131, 141, 143, 155, 175, 207],
        [152, 171, 222], 110, True, 2),
    "three levels of false threes": (
        [56, 78, 81, 84, 94, 111, 112, 124, 125, 128, 129, 142, 174, 196, 201],
        [42, 64, 199], 83, False, 3),
}


def diagram(text: str) -> tuple[np.ndarray, int]:
    board = np.zeros((SIZE, SIZE), np.int8)
    point = None
    for i, row in enumerate(text.strip("\n").split("\n")):
        for j, ch in enumerate(row.split()):
            if ch == "X":
                board[3 + i, 3 + j] = 1
            elif ch == "O":
                board[3 + i, 3 + j] = -1
            elif ch == "*":
                point = (3 + i) * SIZE + 3 + j
    return board.reshape(-1), point


def stones(black, white) -> np.ndarray:
    board = np.zeros(SIZE * SIZE, np.int8)
    board[black], board[white] = 1, -1
    return board


def referee_says(board: np.ndarray, p: int) -> str:
    get_foul_type = renju_check.referee()
    grid = np.where(board == 1, 1, np.where(board == -1, 2, 0)).reshape(SIZE, SIZE).tolist()
    return renju.FOULS[get_foul_type(grid, *divmod(p, SIZE))]


@pytest.mark.parametrize("name", TEXTBOOK)
def test_textbook_cases(name):
    board, p = diagram(TEXTBOOK[name][0])
    expected = TEXTBOOK[name][1]
    assert renju.FOULS[int(FOUL(jnp.asarray(board), p))] == expected
    assert bool(FORBIDDEN(jnp.asarray(board))[p]) == (expected != "none")
    assert referee_says(board, p) == expected


@pytest.mark.parametrize("name", RECURSIVE)
def test_recursive_double_threes(name):
    black, white, p, verdict, depth = RECURSIVE[name]
    board = jnp.asarray(stones(black, white))
    assert bool(FORBIDDEN(board, depth, 32)[p]) == verdict
    assert bool(FORBIDDEN_AT(board, p, 4)) == verdict
    assert bool(FORBIDDEN(board, depth - 1, 32)[p]) != verdict
    assert (referee_says(np.asarray(board), p) != "none") == verdict


def test_line_table_against_a_plain_reading():
    """Spot-check the table against a run-by-run reading of a few windows."""
    table = renju.line_table()
    rng = np.random.default_rng(0)
    for index in rng.integers(0, 3 ** 10, 300):
        line = np.ones(11, np.int8)
        line[renju.OTHERS] = (index // 3 ** np.arange(10)) % 3

        def run(cells):
            n, k = 1, 6
            while k < 11 and cells[k] == 1:
                n, k = n + 1, k + 1
            k = 4
            while k >= 0 and cells[k] == 1:
                n, k = n + 1, k - 1
            return n

        assert table["five"][index] == (run(line) == 5)
        assert table["over"][index] == (run(line) >= 6)
        fives = [k for k in range(1, 10) if k != 5 and line[k] == 0
                 and run(np.where(np.arange(11) == k, 1, line)) == 5
                 and run(np.where(np.arange(11) == k, 1, line)) > run(line)]
        straight = any(b - a == 5 for a in fives for b in fives)
        assert table["fours"][index] == len(fives) - straight


@pytest.mark.parametrize("generator", [
    pytest.param(g, marks=pytest.mark.long) if g == "random_games" else g
    for g in renju_check.GENERATORS])  # make test: the boards built to hold every foul
def test_agrees_with_the_referee_on_a_fixed_sample(generator):
    """Read as the referee reads (``judge``) and deep enough, every point agrees;
    with the rule text, the only differences are the referee's known one."""
    boards = list(renju_check.boards(generator, seed=3, count=40))
    verdicts = renju_check.referee_verdicts(boards, SIZE)  # the referee reads once
    judged = renju_check.compare(boards, depth=3, candidates=32, judge=True, verdicts=verdicts,
                                  jit=heavy_jit)
    assert judged.points > 1000 and judged.disagreements == [], judged.as_dict()
    ours = renju_check.compare(boards, depth=3, candidates=32, verdicts=verdicts, jit=heavy_jit)
    assert ours.as_dict()["unexplained"] == 0, ours.as_dict()
    assert all(not d["ours"] or d["referee"] == "none"  # the rule text forbids more
               for d in ours.disagreements)


def test_the_search_depth_errs_only_towards_forbidding():
    """At the default (even) depth a point the mask allows is always allowed:
    black never plays a forbidden move, it may pass over a rare legal one."""
    boards = jnp.asarray(np.stack(list(renju_check.boards("dense_boards", seed=4, count=60))))
    default = heavy_jit(jax.vmap(renju.forbidden))(boards)
    deep = heavy_jit(jax.vmap(lambda b: renju.forbidden(b, 3, 64)))(boards)
    assert not bool(jnp.any(deep & ~default))


@pytest.mark.parametrize("generator", renju_check.GENERATORS)
def test_the_host_reading_of_a_point_is_the_jitted_one(generator):
    """``foul_code`` reads one point on the host with early exits; on boards
    that hold every foul and on random games' boards it gives the jitted
    ``foul``'s code (overline, double four, double three, none) at every
    point."""
    boards = list(renju_check.boards(generator, seed=7, count=12))
    codes = set()
    for board in boards:
        host = np.array([renju.foul_code(board, p) for p in range(board.size)])
        assert (host == renju_fouls(board)).all()
        codes |= set(host.tolist())
    assert codes - {0} or generator == "random_games", codes  # the fouls were read
    assert codes == {0, 1, 2, 3} or generator != "dense_boards", codes


@pytest.mark.parametrize("rows", [1, 5, 60])
def test_forbidden_rows_is_forbidden_of_each_board(rows):
    """The batch reading, which follows the recursion only on boards that have
    a candidate double three (a branch for one board, chunks for more), gives
    each board's ``forbidden``: on boards that hold every foul, and on boards
    with none to follow."""
    built = list(renju_check.boards("dense_boards", seed=5, count=rows))
    quiet = np.zeros_like(built[0])
    quiet[[112, 113, 127]] = [1, -1, 1]
    boards = jnp.asarray(np.stack(built[:rows - 1] + [quiet] if rows > 1 else [quiet]))
    each = np.asarray(heavy_jit(jax.vmap(renju.forbidden))(boards))
    batch = np.asarray(heavy_jit(renju.forbidden_rows)(boards))
    assert (batch == each).all()
    candidates = np.asarray(jax.vmap(lambda b: renju._candidates(b, 2, 8)[2].any())(boards))
    assert not candidates[-1] and (rows == 1 or candidates[:-1].any())  # work for the recursion
    if rows == 1:
        dense = jnp.asarray(built[0])[None]
        assert bool(renju._candidates(dense[0], 2, 8)[2].any())
        assert (np.asarray(heavy_jit(renju.forbidden_rows)(dense))
                == np.asarray(heavy_jit(jax.vmap(renju.forbidden))(dense))).all()


RULES = Rules(SIZE, "renju")
LEGAL = heavy_jit(RULES.legal_mask)
STEP = heavy_jit(RULES.step)


def test_the_legal_mask_leaves_out_black_forbidden_points_only():
    board, p = diagram(TEXTBOOK["two open threes crossing: double three"][0])
    state = RULES.init()._replace(board=jnp.asarray(board), num_moves=jnp.int32(5))
    assert not bool(LEGAL(state)[p])
    assert bool(LEGAL(state._replace(to_play=jnp.int32(WHITE)))[p])
    assert bool(Rules(SIZE, "freestyle").legal_mask(state)[p])


def test_black_wins_only_with_exactly_five_and_white_with_more():
    row = [7 * SIZE + c for c in range(2, 8)]
    black = stones(row[:2] + row[3:], [])  # XX.XXX: black's six would be an overline
    state = RULES.init()._replace(board=jnp.asarray(black))
    assert not bool(RULES.five_points(jnp.asarray(black), jnp.int8(1))[row[2]])
    assert bool(FORBIDDEN(jnp.asarray(black))[row[2]])
    white = -black
    assert bool(RULES.five_points(jnp.asarray(white), jnp.int8(-1))[row[2]])
    won = STEP(state._replace(board=jnp.asarray(white), to_play=jnp.int32(WHITE)), row[2])
    assert int(won.winner) == WHITE
    five = stones(row[1:5], [])
    won = STEP(RULES.init()._replace(board=jnp.asarray(five)), row[5])
    assert int(won.winner) == BLACK
    counts = RULES.new_five_points(jnp.asarray(five), jnp.int8(1))
    assert int(counts[row[0]]) == 0  # black's XXXXX from row[0] would need row[5]: 6 with it


def test_random_games_never_play_a_forbidden_point():
    """Random play under the jitted, vmapped rules: black's moves are never
    forbidden at the time, by the referee's own reading."""
    def play(key):
        def body(state, key):
            legal = RULES.legal_mask(state)
            logits = jnp.where(legal, 0.0, -jnp.inf)
            a = jax.random.categorical(key, logits)
            a = jnp.where(jnp.any(legal), a, 0)
            return RULES.step(state, a), (state.board, a, state.to_play, jnp.any(legal))
        _, out = jax.lax.scan(body, RULES.init(), jax.random.split(key, 60))
        return out
    boards, actions, to_play, any_legal = heavy_jit(jax.vmap(play))(
        jax.random.split(jax.random.PRNGKey(0), 4))
    checked = 0
    for g in range(4):
        for t in range(60):
            if int(to_play[g, t]) == BLACK and bool(any_legal[g, t]):
                board = np.asarray(boards[g, t])
                if board[int(actions[g, t])] == 0 and (board != 0).any():
                    assert referee_says(board, int(actions[g, t])) == "none"
                    checked += 1
    assert checked > 50


def test_a_threat_on_a_forbidden_point_is_no_threat():
    """Black's only open-four point is a double four: under renju white need
    not answer it, under freestyle it must."""
    from agz_jax.game import tactics
    at = lambda r, c: r * SIZE + c  # noqa: E731
    black = [at(7, 4), at(7, 5), at(7, 6), at(4, 7), at(5, 7), at(6, 7)]
    white = [at(7, 2), at(3, 7), at(0, 0)]
    board = jnp.asarray(stones(black, white))
    p = at(7, 7)
    assert int(Rules(SIZE, "freestyle").new_five_points(board, jnp.int8(1))[p]) >= 2
    assert bool(FORBIDDEN(board)[p])
    state = RULES.init()._replace(board=board, to_play=jnp.int32(WHITE), num_moves=jnp.int32(9))
    states = jax.tree.map(lambda x: x[None], state)
    moves = {rule: np.asarray(jax.jit(lambda s, r=rule: tactics.search_moves(
        Rules(SIZE, r), s, forced=True, answer_threats=True, answer_four_threes=True))(states))[0]
        for rule in ("renju", "freestyle")}
    empty = np.asarray(board) == 0
    assert np.array_equal(moves["renju"], empty)
    assert moves["freestyle"].sum() < empty.sum() and moves["freestyle"][p]
    value = jax.jit(lambda b: tactics.threat_value(RULES, b, jnp.int8(1), 0.95))(board)
    free = jax.jit(lambda b: tactics.threat_value(Rules(SIZE, "freestyle"), b, jnp.int8(1),
                                                  0.95))(board)
    assert not bool(value[0]) and bool(free[0])


def test_the_renju_opening_set_is_the_26_canonical_openings():
    from agz_jax.game import openings
    shipped = openings.load("renju15", SIZE)
    assert np.array_equal(shipped, openings.renju_canonical(SIZE)) and shipped.shape == (26, 3)
    centre = 7 * SIZE + 7
    assert (shipped[:, 0] == centre).all()
    assert (shipped[:13, 1] == 6 * SIZE + 7).all() and (shipped[13:, 1] == 6 * SIZE + 8).all()
    rows, cols = shipped[:, 2] // SIZE, shipped[:, 2] % SIZE
    assert ((abs(rows - 7) <= 2) & (abs(cols - 7) <= 2)).all()
    assert len({tuple(o) for o in shipped.tolist()}) == 26


def test_a_referee_under_renju_gives_black_the_loss_for_a_forbidden_move():
    from agz_jax.play.piskvork_games import Referee, rule_bits, rule_name
    board, p = diagram(TEXTBOOK["two open threes crossing: double three"][0])
    referee = Referee(SIZE, "renju")
    assert referee.foul(board, p) == "double three"
    assert Referee(SIZE, "freestyle").foul(board, p) is None
    assert [rule_name(rule_bits(r)) for r in ("freestyle", "standard", "renju")] == [
        "freestyle", "standard", "renju"]


def test_the_mentor_under_renju_never_plays_a_forbidden_point():
    from agz_jax.game.mentor import Mentor
    boards = np.stack([b for b in renju_check.boards("line_boards", seed=9, count=40)])
    forbidden = np.asarray(heavy_jit(jax.vmap(renju.forbidden))(jnp.asarray(boards)))
    keep = forbidden.any(axis=1)
    boards = jnp.asarray(boards[keep][:16])
    states = jax.vmap(lambda b: RULES.init()._replace(board=b, num_moves=jnp.sum(b != 0)))(boards)
    for level in (0, 1):
        moves = np.asarray(jax.jit(Mentor(RULES, level).act)(jax.random.PRNGKey(level), states))
        assert not forbidden[keep][:16][np.arange(len(moves)), moves].any(), level
    # Freestyle would: it takes some of these points (their overlines and double fours).
    free = np.asarray(jax.jit(Mentor(Rules(SIZE, "freestyle"), 1).act)(jax.random.PRNGKey(1),
                                                                       states))
    assert forbidden[keep][:16][np.arange(len(free)), free].any()
