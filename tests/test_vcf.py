"""agz_jax.game.vcf: wins by continuous fours and their defences, checked against a
plain reader of the stones (runs counted on the 2-D board, not the window
counts the solver keeps) and against exhaustive searches on small boards."""

import time

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from tiny_models import renju_fouls

from agz_jax.game import vcf

SIZE = 9


def at(row, col, size=SIZE):
    return row * size + col


def board_of(black, white, size=SIZE):
    board = np.zeros(size * size, np.int8)
    for p in black:
        board[p] = 1
    for p in white:
        board[p] = -1
    return board


# -- the plain reader -------------------------------------------------------------------------

def makes_five(board, p, colour, rule, size=SIZE):
    """A stone ``colour`` on empty ``p``: a winning five? Runs counted on the grid."""
    r, c = divmod(p, size)
    exact = rule == "standard" or (rule == "renju" and colour == 1)
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        n = 1
        for sign in (1, -1):
            rr, cc = r + sign * dr, c + sign * dc
            while 0 <= rr < size and 0 <= cc < size and board[rr * size + cc] == colour:
                n += 1
                rr, cc = rr + sign * dr, cc + sign * dc
        if (n == 5) if exact else (n >= 5):
            return True
    return False


def fives(board, colour, rule="freestyle", size=SIZE):
    return {p for p in range(size * size)
            if board[p] == 0 and makes_five(board, p, colour, rule, size)}


def line_wins(board, me, line, rule="freestyle", size=SIZE):
    """Does ``line`` (four, block, ..., winning move) win by the rules of fours?"""
    board = board.copy()
    for i in range(0, len(line), 2):
        if fives(board, me, rule, size):
            return True
        theirs = fives(board, -me, rule, size)
        m = line[i]
        if board[m] != 0 or len(theirs) >= 2 or (theirs and m not in theirs):
            return False
        board[m] = me
        mine = fives(board, me, rule, size)
        if len(mine) >= 2:
            return True
        if len(mine) != 1 or i + 1 >= len(line) or line[i + 1] not in mine:
            return False
        board[line[i + 1]] = -me
    return bool(fives(board, me, rule, size))


def brute_vcf(board, me, depth, rule="freestyle", size=SIZE):
    """Exhaustive: is there a VCF of at most ``depth`` fours? Every empty point is tried."""
    if fives(board, me, rule, size):
        return True
    theirs = fives(board, -me, rule, size)
    if len(theirs) >= 2 or depth == 0:
        return False
    for m in range(size * size):
        if board[m] != 0 or (theirs and m not in theirs):
            continue
        board[m] = me
        mine = fives(board, me, rule, size)
        ok = len(mine) >= 2
        if len(mine) == 1:
            (b,) = mine
            board[b] = -me
            ok = brute_vcf(board, me, depth - 1, rule, size)
            board[b] = 0
        board[m] = 0
        if ok:
            return True
    return False


def random_position(seed, size=SIZE, stones=(4, 12)):
    """Random stones near the centre, no five on the board, black to move."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(*stones))
    for _ in range(100):
        board = np.zeros(size * size, np.int8)
        centre = [p for p in range(size * size)
                  if max(abs(p // size - size // 2), abs(p % size - size // 2)) <= 3]
        picks = rng.choice(centre, 2 * n, replace=False)
        board[picks[:n]] = 1
        board[picks[n:]] = -1
        placed = board.copy()
        if not any(makes_five(np.where(np.arange(size * size) == p, 0, placed), p, placed[p],
                              "freestyle", size) for p in picks):
            return board
    pytest.skip("no position without a five")


# -- known positions --------------------------------------------------------------------------

def test_open_three_is_a_vcf_and_its_line_wins():
    board = board_of([at(4, 2), at(4, 3), at(4, 4), at(0, 8)], [at(8, 0), at(8, 1), at(0, 0)])
    line = vcf.solve(board, 1, SIZE)
    assert line == [at(4, 1)] or line == [at(4, 5)]  # the open four at once
    assert line_wins(board, 1, line)
    assert vcf.solve(board, -1, SIZE) is None  # white's two stones make no four


def test_a_three_four_line():
    # Black: a closed three on row 4 and a broken three on column 5 crossing it.
    black = [at(4, 1), at(4, 2), at(4, 3), at(1, 5), at(2, 5), at(3, 5)]
    white = [at(4, 0), at(0, 5), at(8, 8), at(8, 7), at(7, 8), at(8, 6)]
    board = board_of(black, white)
    line = vcf.solve(board, 1, SIZE)
    assert line is not None and line_wins(board, 1, line)
    assert brute_vcf(board.copy(), 1, 3)


def test_a_five_point_of_the_opponent_must_be_blocked_with_a_four():
    # White has a five point at (0,4); black's open three would win, but black
    # must block first, and the block is no four: no VCF.
    black = [at(4, 2), at(4, 3), at(4, 4), at(8, 8)]
    white = [at(0, 0), at(0, 1), at(0, 2), at(0, 3)]
    assert vcf.solve(board_of(black, white), 1, SIZE) is None


def test_standard_rule_overline_is_no_five():
    # ○●●●●_● : under freestyle the gap makes six and wins; under standard not.
    black = [at(4, 1), at(4, 2), at(4, 3), at(4, 4), at(4, 6)]
    white = [at(4, 0), at(8, 0), at(8, 1), at(8, 2)]
    board = board_of(black, white)
    assert vcf.solve(board, 1, SIZE) == [at(4, 5)]
    assert vcf.solve(board, 1, SIZE, "standard") is None


def test_renju_forbidden_points():
    forbidden = {at(4, 1), at(4, 5)}

    def is_forbidden(cells, p):
        return p in forbidden

    # Black's open three wins under freestyle; under renju both ends of its
    # open four are forbidden (and so no five point): no VCF.
    board = board_of([at(4, 2), at(4, 3), at(4, 4), at(0, 8)], [at(8, 8), at(8, 7), at(0, 0)])
    assert vcf.solve(board, 1, SIZE, "freestyle") in ([at(4, 1)], [at(4, 5)])
    assert vcf.solve(board, 1, SIZE, "renju", is_forbidden=is_forbidden) is None
    # White's four whose only block is forbidden to black (read by the real
    # renju rule): a win at once. Black's (4,5) would make two open threes,
    # (2,5)-(4,5) and (4,5)-(6,7).
    from agz_jax.game import renju

    def foul(cells, p):
        return renju.foul_code(np.asarray(cells, np.int8), p) != 0

    board = board_of([at(4, 0), at(2, 5), at(3, 5), at(5, 6), at(6, 7)],
                     [at(4, 1), at(4, 2), at(4, 3), at(8, 8), at(0, 0)])
    after = board.copy()
    after[at(4, 4)] = -1
    assert renju.foul_code(after, at(4, 5)) != 0  # the block is a double three
    assert vcf.solve(board, -1, SIZE, "freestyle") is None  # (4,4), blocked at (4,5)
    assert vcf.solve(board, -1, SIZE, "renju", is_forbidden=foul) == [at(4, 4)]


def test_defences_of_an_open_three_are_its_ends_and_the_far_points():
    black = [at(4, 3), at(4, 4), at(4, 5), at(0, 0)]
    white = [at(8, 8), at(8, 0), at(0, 8)]
    moves, line = vcf.defences(board_of(black, white), -1, SIZE)
    assert line_wins(board_of(black, white), 1, line)
    # Blocking either end stops it; the far points (4,1) and (4,7) leave a
    # closed four and a four on the other side; none other does.
    assert set(moves) >= {at(4, 2), at(4, 6)}
    for m in moves:
        b = board_of(black, white + [m])
        assert not brute_vcf(b, 1, 3)


def test_no_threat_no_defences():
    assert vcf.defences(board_of([at(4, 4)], [at(3, 3)]), -1, SIZE) is None


def test_a_passed_deadline_stops_the_reading():
    board = board_of([at(4, 2), at(4, 3), at(4, 4), at(0, 8)], [at(8, 0), at(8, 1), at(0, 0)])
    with pytest.raises(vcf.OutOfTime):
        vcf.solve(board, 1, SIZE, deadline=time.perf_counter() - 1)
    with pytest.raises(vcf.OutOfTime):
        vcf.defences(board, -1, SIZE, deadline=time.perf_counter() - 1)
    assert vcf.solve(board, 1, SIZE, deadline=time.perf_counter() + 60) is not None


def test_a_cut_off_search_leaves_the_position_as_it_was():
    """Out of nodes or out of time deep in a line, every stone comes off again
    (``defences`` goes on reading the same position)."""
    # Black's VCF here: four, block, four, block, win ([4, 13, 38, 41, 14]).
    black = [11, 22, 30, 31, 39, 40, 42, 47, 64]
    white = [15, 16, 19, 23, 33, 51, 52, 67, 68]
    pos = vcf.Position(board_of(black, white), SIZE)

    def state():
        return list(pos.cells), pos.key, {c: list(n) for c, n in pos.count.items()}

    before = state()
    assert vcf.solve_position(pos, 1, nodes=2) is None
    assert state() == before
    search = vcf._Search(pos, 1, 66, time.perf_counter() - 1)  # the clock: at the 2nd node
    with pytest.raises(vcf.OutOfTime):
        search.run(vcf.DEPTH)
    assert state() == before
    assert vcf.solve_position(pos, 1) is not None and state() == before


def test_bad_boards_are_refused():
    with pytest.raises(ValueError, match="81 points"):
        vcf.solve(np.zeros(80, np.int8), 1, SIZE)
    with pytest.raises(ValueError, match="rule"):
        vcf.solve(np.zeros(81, np.int8), 1, SIZE, "gomoku")


# -- properties on random positions ---------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10 ** 6), st.sampled_from(["freestyle", "standard"]))
def test_found_lines_win_and_depth_2_agrees_with_exhaustive_search(seed, rule):
    board = random_position(seed)
    line = vcf.solve(board, 1, SIZE, rule, depth=2)
    assert (line is not None) == brute_vcf(board.copy(), 1, 2, rule)
    if line is not None:
        assert line_wins(board, 1, line, rule)
    deep = vcf.solve(board, 1, SIZE, rule)
    if deep is not None:
        assert line_wins(board, 1, deep, rule)
    assert deep is not None or line is None  # deeper never finds less


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10 ** 6))
def test_defences_are_exactly_the_moves_that_stop_every_vcf(seed):
    """Every empty point is tried: the candidates ``defences`` reads leave none out."""
    board = random_position(seed, stones=(6, 14))
    assume(not fives(board, -1))  # with a five to make, white just wins (the engine plays it)
    found = vcf.defences(board, -1, SIZE)  # white to move, black's threats
    if found is None:
        assert vcf.solve(board, 1, SIZE) is None
        return
    moves, line = found
    assert line_wins(board, 1, line)
    stopped = set()
    for m in np.flatnonzero(board == 0):
        b = board.copy()
        b[m] = -1
        mine = fives(b, -1)
        if len(mine) >= 2:
            stopped.add(int(m))
            continue
        if len(mine) == 1:  # a four: with its block, black then to move
            b[mine.pop()] = 1
        if vcf.solve(b, 1, SIZE) is None:
            stopped.add(int(m))
    assert set(moves) == stopped


def test_the_ledger_report_marks_a_missed_and_a_lost_defence(tmp_path, capsys):
    import json

    from experiments.play import vcf_report

    def p(r, c):
        return r * 15 + c

    # Black makes an open three; the candidate (white) plays elsewhere (X), then
    # faces the open four (U) and loses.
    moves = [p(7, 5), p(0, 0), p(7, 6), p(0, 2), p(7, 7), p(14, 14), p(7, 8), p(7, 9), p(7, 4)]
    line = {"a": "cand", "b": "rapfi:1", "wins": 0, "draws": 0, "losses": 1, "games": 1,
            "size": 15, "rule": "freestyle",
            "outside": {"a_black": False, "moves": moves}}
    ledger = tmp_path / "games.jsonl"
    ledger.write_text(json.dumps(line) + "\n")
    assert vcf_report.main(["--ledger", str(ledger), "--candidate", "cand", "--lost"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "rapfi:1 white loss 9 stones: X5 U7"
    assert out[1].startswith("1 games; with D 0, X 1, U 1, W 0; an X before the first U 1")
    # The threats reader sees the same: the open three is a threat of threes too.
    assert vcf_report.main(["--ledger", str(ledger), "--candidate", "cand", "--lost",
                            "--reader", "vct"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("rapfi:1 white loss 9 stones: X5")
    assert vcf_report.main(["--ledger", str(ledger), "--candidate", "other"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "its players: cand" in err


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10 ** 6))
def test_the_renju_prefilter_hides_no_foul(seed):
    """``Position.forbidden`` asks the rule only where a foul can be: on random
    crowded boards it agrees with the rule at every empty point."""
    rng = np.random.default_rng(seed)  # black-heavy, crowded: fouls are common
    picks = rng.permutation(SIZE * SIZE)[:int(rng.integers(18, 26))]
    board = np.zeros(SIZE * SIZE, np.int8)
    board[picks] = 1
    board[picks[:len(picks) // 4]] = -1
    fouls = renju_fouls(board) != 0  # renju.foul_code at every point, in one call

    def foul(cells, p):
        assert np.array_equal(cells, board), "the prefilter asked about another board"
        return bool(fouls[p])

    pos = vcf.Position(board, SIZE, "renju", foul)
    for p in np.flatnonzero(board == 0):
        assert pos.forbidden(int(p), 1) == foul(board, int(p)), int(p)
