"""agz_jax.game.vct: wins by continuous threats. Every line the reader finds is
checked against every reply of the defender's (all empty points, fives read
on the grid by test_vcf's plain reader), and textbook shapes."""

import time

import numpy as np
import pytest
from test_vcf import SIZE, at, board_of, fives, random_position

from agz_jax.game import vcf, vct


def wins(board, me, moves, rule="freestyle"):
    """Does ``me`` to move win within ``moves`` moves of its own (blocks of the
    defender's fours not counted), playing the first move of the reader's line
    (or a five), against every reply of the defender's? Exhaustive over the
    defender's replies; fives and five points read on the grid."""
    if fives(board, me, rule):
        return True
    forced = bool(fives(board, -me, rule))
    if moves == 0 and not forced:
        return False
    line = vct.solve(board, me, SIZE, rule)
    if line is None:
        return False
    m = line[0]
    assert board[m] == 0
    board[m] = me
    try:
        if fives(board, -me, rule):
            return False  # the defender makes its five
        if len(fives(board, me, rule)) >= 2:
            return True  # two five points: one is left after any block
        for q in np.flatnonzero(board == 0):
            board[q] = -me
            try:
                if not wins(board, me, moves - (not forced), rule):
                    return False
            finally:
                board[q] = 0
        return True
    finally:
        board[m] = 0


def positions_with_a_vct(rule, count, tries=400):
    """Random positions where black to move has a VCT of at most two threats
    and no VCF: wins that need a three."""
    found = []
    for seed in range(tries):
        board = random_position(seed, stones=(5, 10))
        if fives(board, 1, rule) or fives(board, -1, rule):
            continue
        if vcf.solve(board, 1, SIZE, rule) is None and \
                vct.solve(board, 1, SIZE, rule, depth=2) is not None:
            found.append(board)
            if len(found) == count:
                break
    return found


@pytest.mark.parametrize("rule", ["freestyle", "standard"])
def test_every_line_found_wins_against_every_reply(rule):
    boards = positions_with_a_vct(rule, 6)
    assert len(boards) >= 3  # the generator still finds such positions
    for board in boards:
        assert wins(board.copy(), 1, 5, rule), board.reshape(SIZE, SIZE)


def test_a_double_three_wins_and_one_two_does_not():
    # Black's twos cross at (4, 4): a stone there makes two open threes.
    black = [at(4, 2), at(4, 3), at(2, 4), at(3, 4)]
    white = [at(0, 0), at(8, 8), at(0, 8), at(8, 0)]
    board = board_of(black, white)
    assert vcf.solve(board, 1, SIZE) is None
    line = vct.solve(board, 1, SIZE)
    assert line is not None and wins(board.copy(), 1, 4)
    assert vct.solve(board_of([at(4, 4), at(4, 5)], [at(0, 0)]), 1, SIZE) is None
    assert vct.solve(np.zeros(SIZE * SIZE, np.int8), 1, SIZE) is None
    # Walled in (white four points apart on both lines), the crossing point
    # makes no five possible: no threat.
    closed = board_of(black, white + [at(4, 1), at(1, 4), at(4, 6), at(6, 4)])
    fours, threes = vct.threats(vcf.Position(closed, SIZE), 1)
    assert at(4, 4) not in fours + threes
    assert at(4, 4) in vct.threats(vcf.Position(board, SIZE), 1)[1]


def test_a_four_of_the_defender_is_answered_and_the_three_stands():
    """White answers black's three with a four; black blocks it, the three
    stands, and the answers that follow are read too: the line still wins
    against every reply (the exhaustive check)."""
    black = [at(4, 2), at(4, 3), at(2, 4), at(3, 4)]
    white = [at(0, 1), at(1, 1), at(2, 1), at(8, 8)]  # a three of white's on row 1
    board = board_of(black, white)
    line = vct.solve(board, 1, SIZE)
    assert line is not None and wins(board.copy(), 1, 5)


def test_the_defender_with_a_five_point_refutes_a_three():
    black = [at(4, 2), at(4, 3), at(2, 4), at(3, 4)]
    white = [at(0, 1), at(1, 1), at(2, 1), at(3, 1), at(8, 8)]  # white's four on row 1
    board = board_of(black, white)
    # Black to move must block at (4, 1) first (a four for nothing), and wins
    # only if a threat stands after it: whatever the reader says, it is sound.
    line = vct.solve(board, 1, SIZE)
    assert line is None or line[0] == at(4, 1)
    if line is not None:
        assert wins(board.copy(), 1, 5)


def test_defences_leave_no_vct_and_the_empty_board_has_no_threat():
    black = [at(4, 2), at(4, 3), at(2, 4), at(3, 4)]
    white = [at(0, 0), at(8, 8), at(1, 4), at(4, 1)]
    board = board_of(black, white)
    found = vct.defences(board, -1, SIZE)
    assert found is not None
    moves, line = found
    assert moves and wins(board.copy(), 1, 5)
    for m in moves:
        b = board.copy()
        b[m] = -1
        assert vct.solve(b, 1, SIZE) is None
    assert vct.defences(np.zeros(SIZE * SIZE, np.int8), -1, SIZE) is None


def test_renju_black_never_threatens_from_a_forbidden_point():
    """Under renju a black move onto a forbidden point is no threat, and
    white's win that black can only block on one stands."""
    forbidden_points = {at(4, 4)}

    def is_forbidden(cells, p):
        return p in forbidden_points

    black = [at(4, 2), at(4, 3), at(2, 4), at(3, 4)]
    white = [at(0, 0), at(8, 8), at(0, 8), at(8, 0)]
    board = board_of(black, white)
    line = vct.solve(board, 1, SIZE, "renju", is_forbidden=is_forbidden)
    assert line is None or at(4, 4) not in line[0::2]
    fours, threes = vct.threats(vcf.Position(board, SIZE, "renju", is_forbidden), 1)
    assert at(4, 4) not in fours + threes


def test_a_passed_deadline_stops_the_reading_and_leaves_the_board():
    board = random_position(3, stones=(8, 12))
    with pytest.raises(vct.OutOfTime):
        vct.solve(board, 1, SIZE, deadline=time.perf_counter() - 1.0)
    pos = vcf.Position(board, SIZE)
    before = (list(pos.cells), pos.key, {c: set(s) for c, s in pos.twos.items()})
    try:
        vct.solve_position(pos, 1, deadline=time.perf_counter() + 1e-4)
    except vct.OutOfTime:
        pass
    assert (pos.cells, pos.key, pos.twos) == before
