"""Victory by continuous fours (VCF): a win forced with fours alone, read on the host.

A *four* is a move after which its side has a five point; the opponent, who has
none of its own, must block it. A VCF is a line of such moves, each answered by
its one block, that ends in a five, or in a move that makes two five points at
once (an open four or a double four: only one can be blocked). Because every
reply is forced, the search is narrow and can read lines twenty fours deep
that a net-guided tree search of a few thousand simulations never sees; it is
what alpha-beta engines such as Rapfi read at every node.

The play-time engine (``agz_jax.play.engine``) reads it at the root of each move:

- ``solve(board, me)``: ``me``'s VCF on ``board`` (``me`` to move), as the
  line ``[four, block, four, block, ..., winning move]``, or None;
- ``defences(board, me)``: when the opponent would have a VCF if it were to
  move, the moves of ``me`` after which it has none (empty: none found, the
  game is lost against best play), or None when there is no such threat.

It is a plain-Python reader over the board's 5-point windows, kept apart from
the jitted search: it runs once a move at the root, not inside the tree, and
never in self-play. The windows' stone counts are updated as stones are put
and taken back, so a node of the search costs tens of microseconds; a node
budget bounds every call (a line not found within it counts as none).

Rules: freestyle (five or more wins), standard (exactly five) and renju
(black exactly five and never on a forbidden point, read by the
``is_forbidden`` callback; white five or more). A black block on a forbidden
point is no block under renju, so white's single four then wins.

Boards are int8[A] with +1 black, -1 white, 0 empty; points are
``row * size + col``.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Sequence

import numpy as np

NODES = 20_000
"""Nodes a ``solve`` call reads at most (a search not finished by then finds none)."""
DEPTH = 40
"""Fours a line holds at most."""

_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


class _OutOfNodes(Exception):
    pass


class OutOfTime(Exception):
    """A reading passed its deadline: nothing is known."""


@functools.cache
def _geometry(size: int):
    """(windows, windows_of, steps, directions): the 5-point windows (tuples of
    points), the windows through each point, each point's neighbour along each
    direction and its opposite (-1 off the board), and each window's direction."""
    windows: list[tuple[int, ...]] = []
    directions: list[int] = []
    for d, (dr, dc) in enumerate(_DIRECTIONS):
        for r in range(size):
            for c in range(size):
                cells = [(r + k * dr, c + k * dc) for k in range(5)]
                if all(0 <= rr < size and 0 <= cc < size for rr, cc in cells):
                    windows.append(tuple(rr * size + cc for rr, cc in cells))
                    directions.append(d)
    windows_of: list[list[int]] = [[] for _ in range(size * size)]
    for w, cells in enumerate(windows):
        for p in cells:
            windows_of[p].append(w)
    steps = []
    for dr, dc in _DIRECTIONS:
        for sign in (1, -1):
            nxt = [-1] * (size * size)
            for r in range(size):
                for c in range(size):
                    rr, cc = r + sign * dr, c + sign * dc
                    if 0 <= rr < size and 0 <= cc < size:
                        nxt[r * size + c] = rr * size + cc
            steps.append(nxt)
    return (tuple(windows), tuple(tuple(w) for w in windows_of),
            tuple(tuple(s) for s in steps), tuple(directions))


@functools.cache
def _zobrist(num_points: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    rng = random.Random(20261128)
    return (tuple(rng.getrandbits(64) for _ in range(num_points)),
            tuple(rng.getrandbits(64) for _ in range(num_points)))


class Position:
    """A board with its windows' stone counts, for putting and taking back stones.

    ``rule``: 'freestyle', 'standard' or 'renju'. ``is_forbidden(cells, p)``:
    under renju, whether black may not play the empty point ``p`` of the board
    ``cells`` (a list: +1 black, -1 white, 0 empty); without it no point is
    forbidden.
    """

    def __init__(self, board, size: int, rule: str = "freestyle",
                 is_forbidden: Callable[[list[int], int], bool] | None = None):
        if rule not in ("freestyle", "standard", "renju"):
            raise ValueError(f"rule must be freestyle, standard or renju, got {rule!r}")
        cells = [int(v) for v in np.asarray(board).reshape(-1)]
        if len(cells) != size * size:
            raise ValueError(f"a {size}x{size} board has {size * size} points, got {len(cells)}")
        self.size, self.rule = size, rule
        self.cells = cells
        self.windows, self.windows_of, self.steps, self.direction = _geometry(size)
        self._fouls: dict[tuple[int, int], bool] = {}
        self.is_forbidden = is_forbidden if rule == "renju" else None
        n = len(self.windows)
        self.count = {1: [0] * n, -1: [0] * n}
        self.fours = {1: set(), -1: set()}   # windows: 4 of a colour, none of the other
        self.threes = {1: set(), -1: set()}  # windows: 3 of a colour, none of the other
        self.twos = {1: set(), -1: set()}    # windows: 2 of a colour, none of the other
        # By a colour's count in a window with none of the other's: its set, if kept.
        self._sets = {c: (None, None, self.twos[c], self.threes[c], self.fours[c], None)
                      for c in (1, -1)}
        self._keys = _zobrist(size * size)
        self.key = 0
        for p, v in enumerate(cells):
            if v:
                cells[p] = 0
                self.put(p, v)

    # -- stones -----------------------------------------------------------------------------
    # A window changes sets only when its count of the stone's colour crosses one
    # of 2..4 with none of the other colour's in it, or when it gets its first
    # stone of a colour (and leaves the other colour's sets) or loses its last.

    def put(self, p: int, colour: int):
        self.cells[p] = colour
        self.key ^= self._keys[0 if colour == 1 else 1][p]
        own, other = self.count[colour], self.count[-colour]
        sets, theirs = self._sets[colour], self._sets[-colour]
        for w in self.windows_of[p]:
            n = own[w]
            own[w] = n + 1
            o = other[w]
            if o == 0:
                if n >= 2:
                    sets[n].discard(w)
                if 1 <= n <= 3:
                    sets[n + 1].add(w)
            elif n == 0 and o >= 2:
                theirs[o].discard(w)

    def take(self, p: int):
        colour = self.cells[p]
        self.cells[p] = 0
        self.key ^= self._keys[0 if colour == 1 else 1][p]
        own, other = self.count[colour], self.count[-colour]
        sets, theirs = self._sets[colour], self._sets[-colour]
        for w in self.windows_of[p]:
            n = own[w]
            own[w] = n - 1
            o = other[w]
            if o == 0:
                if 2 <= n <= 4:
                    sets[n].discard(w)
                if 3 <= n <= 5:
                    sets[n - 1].add(w)
            elif n == 1 and o >= 2:
                theirs[o].add(w)

    # -- readings ---------------------------------------------------------------------------

    def _exact(self, colour: int) -> bool:
        return self.rule == "standard" or (self.rule == "renju" and colour == 1)

    def _run(self, p: int, colour: int, d: int) -> int:
        """Stones of ``colour`` in a row through ``p`` (counted as theirs) along direction d."""
        n, cells = 1, self.cells
        for s in (self.steps[2 * d], self.steps[2 * d + 1]):
            q = s[p]
            while q >= 0 and cells[q] == colour:
                n += 1
                q = s[q]
        return n

    def makes_five(self, p: int, colour: int) -> bool:
        """Would a stone ``colour`` on the empty point ``p`` make a winning five?"""
        if self._exact(colour):
            return any(self._run(p, colour, d) == 5 for d in range(4))
        return any(self._run(p, colour, d) >= 5 for d in range(4))

    def five_points(self, colour: int) -> set[int]:
        """The empty points where ``colour`` makes a winning five (under renju
        black's forbidden points among them are left out)."""
        out = self._empties(self.fours[colour])
        if self._exact(colour):
            out = {p for p in out if self.makes_five(p, colour)}
        if colour == 1 and self.is_forbidden is not None:
            out = {p for p in out if not self.forbidden(p, colour)}
        return out

    def four_moves(self, colour: int) -> set[int]:
        """The empty points where a stone ``colour`` may make a four (a superset:
        the points of windows with three of its stones and none of the other)."""
        return self._empties(self.threes[colour])

    def _empties(self, windows) -> set[int]:
        cells, out = self.cells, set()
        for w in windows:
            for p in self.windows[w]:
                if cells[p] == 0:
                    out.add(p)
        return out

    def forbidden(self, p: int, colour: int) -> bool:
        """Under renju, may black (``colour`` 1) not play the empty point ``p``?

        ``is_forbidden`` is asked only where a foul can be: a black stone on
        ``p`` makes six or more in a row; or it makes three or more black
        stones with no white one in a window through ``p`` in two directions
        (a double three or a double four across two lines); or four in two
        windows of one direction (a double four on one line, ``X.XXX.X``).
        Its answers are kept for the position."""
        if colour != 1 or self.is_forbidden is None:
            return False
        count_b, count_w = self.count[1], self.count[-1]
        lines: set[int] = set()
        fours = [0, 0, 0, 0]
        for w in self.windows_of[p]:
            if count_w[w] == 0 and count_b[w] >= 2:
                lines.add(self.direction[w])
                fours[self.direction[w]] += count_b[w] >= 3
        if (len(lines) < 2 and max(fours) < 2
                and not any(self._run(p, 1, d) >= 6 for d in range(4))):
            return False
        key = (self.key, p)
        if key not in self._fouls:
            self._fouls[key] = bool(self.is_forbidden(self.cells, p))
        return self._fouls[key]


class _Search:
    def __init__(self, pos: Position, attacker: int, nodes: int, deadline: float | None):
        self.pos, self.a, self.d = pos, attacker, -attacker
        self.nodes, self.deadline = nodes, deadline
        self.table: dict[int, list[int] | None] = {}

    def tick(self, every: int = 64):
        """One node more: _OutOfNodes past the budget; OutOfTime past the
        deadline (read every ``every`` nodes)."""
        self.nodes -= 1
        if self.nodes < 0:
            raise _OutOfNodes
        if self.deadline is not None and self.nodes % every == 0 \
                and time.perf_counter() > self.deadline:
            raise OutOfTime

    def run(self, depth: int) -> list[int] | None:
        pos, a, d = self.pos, self.a, self.d
        if mine := pos.five_points(a):
            return [min(mine)]
        self.tick()
        key = pos.key
        if key in self.table:
            return self.table[key]
        theirs = pos.five_points(d)
        found = None
        if len(theirs) < 2 and depth > 0:
            moves = pos.four_moves(a)
            if theirs:
                moves &= theirs  # their five must be blocked, and by a four
            for m in sorted(moves):
                if pos.forbidden(m, a):
                    continue
                pos.put(m, a)
                try:  # every stone comes off again, also when the search is cut off
                    fives = pos.five_points(a)
                    if len(fives) >= 2:
                        found = [m]
                    elif len(fives) == 1:
                        (b,) = fives
                        if pos.forbidden(b, d):
                            found = [m]  # black may not block there (renju)
                        else:
                            pos.put(b, d)
                            try:
                                rest = self.run(depth - 1)
                            finally:
                                pos.take(b)
                            if rest is not None:
                                found = [m, b, *rest]
                finally:
                    pos.take(m)
                if found is not None:
                    break
        self.table[key] = found
        return found


def solve_position(pos: Position, attacker: int, *, nodes: int = NODES,
                   depth: int = DEPTH, deadline: float | None = None) -> list[int] | None:
    """``attacker``'s VCF in ``pos`` with ``attacker`` to move (see ``solve``)."""
    if deadline is not None and time.perf_counter() > deadline:
        raise OutOfTime
    try:
        return _Search(pos, attacker, nodes, deadline).run(depth)
    except _OutOfNodes:
        return None


def solve(board, me: int, size: int, rule: str = "freestyle", *, nodes: int = NODES,
          depth: int = DEPTH, is_forbidden=None, deadline: float | None = None
          ) -> list[int] | None:
    """``me``'s (+1 black, -1 white) VCF on ``board`` with ``me`` to move: the
    line ``[four, block, ..., four, block, winning move]`` (the winning move
    makes a five, or two five points, or a four whose block black may not
    play), or None when none is found within ``nodes`` nodes and ``depth``
    fours. A position where ``me`` has a five point gives ``[that point]``.
    ``deadline``: a ``time.perf_counter()`` value; past it ``OutOfTime`` is raised."""
    return solve_position(Position(board, size, rule, is_forbidden), me, nodes=nodes,
                          depth=depth, deadline=deadline)


def holds(pos: Position, attacker: int, line: Sequence[int]) -> bool:
    """Does the VCF ``line`` (from ``solve``) still win for ``attacker`` to move in ``pos``?"""
    a, d = attacker, -attacker
    played: list[int] = []
    try:
        for i in range(0, len(line), 2):
            if pos.five_points(a):
                return True
            theirs = pos.five_points(d)
            m = line[i]
            if len(theirs) >= 2 or (theirs and m not in theirs) or pos.cells[m] != 0:
                return False
            if pos.forbidden(m, a):
                return False
            pos.put(m, a)
            played.append(m)
            fives = pos.five_points(a)
            if len(fives) >= 2 or (len(fives) == 1 and pos.forbidden(next(iter(fives)), d)):
                return True
            if len(fives) != 1:
                return False
            (b,) = fives
            pos.put(b, d)
            played.append(b)
        return bool(pos.five_points(a))
    finally:
        for p in reversed(played):
            pos.take(p)


def _candidates(pos: Position, me: int, line: Sequence[int]) -> set[int]:
    """The moves of ``me`` that may break the opponent's VCF ``line``: its
    points, the five points its last move makes, the points within 4 along a
    line of one of ``me``'s blocks (a stone there may turn a block into a four
    of ``me``, which the opponent must answer first), and ``me``'s fours. A
    stone elsewhere leaves every move of the line a four with the same block,
    and its end a win."""
    out = set(line) | pos.four_moves(me)
    attacker = -me
    for i, p in enumerate(line):
        pos.put(p, attacker if i % 2 == 0 else me)
    out |= pos.five_points(attacker)
    for i in reversed(range(len(line))):
        pos.take(line[i])
    for b in line[1::2]:
        for d in range(8):
            q, step = b, pos.steps[d]
            for _ in range(4):
                q = step[q]
                if q < 0:
                    break
                out.add(q)
    return out


def defences(board, me: int, size: int, rule: str = "freestyle", *, nodes: int = NODES,
             depth: int = DEPTH, is_forbidden=None, deadline: float | None = None
             ) -> tuple[list[int], list[int]] | None:
    """When the opponent of ``me`` would have a VCF on ``board`` if it were to
    move, ``(moves, line)``: the moves of ``me`` after which it finds none, and
    the line it had. None when it has no VCF (or none found within ``nodes``).

    The candidates are the moves that may break the line (``_candidates``);
    any other leaves it winning as it was. A candidate after which
    the line still ``holds`` is out at once; for the others a fresh search
    decides. A four of ``me`` is read with the opponent's forced block and the
    opponent then to move, as if the four had cost ``me`` its tempo (the safe
    side). ``moves`` may be empty: nothing found stops every VCF.
    ``deadline``: as in ``solve`` (``OutOfTime`` past it). ``me`` is taken to
    have no five point of its own (with one it just wins).
    """
    budget = dict(nodes=nodes, depth=depth, deadline=deadline)
    pos = Position(board, size, rule, is_forbidden)
    line = solve_position(pos, -me, **budget)
    if line is None:
        return None
    keeps = functools.partial(holds, pos, -me, line)
    return stopping_moves(pos, me, _candidates(pos, me, line),
                          lambda: solve_position(pos, -me, **budget) is not None, keeps), line


def stopping_moves(pos: Position, me: int, candidates, wins: Callable[[], bool],
                   keeps: Callable[[], bool] | None = None) -> list[int]:
    """The ``candidates`` (sorted; occupied and forbidden ones left out) after
    which ``wins()`` (the opponent's reading, the opponent to move) finds no win.
    A four of ``me`` is read with its forced block and the opponent then to
    move, as if the four had cost ``me`` its tempo (the safe side); two five
    points win outright. ``keeps()``, when given, is asked first after a move
    that is no four: True (the opponent's line still wins as it was) rules the
    move out without a reading."""
    cells, out = pos.cells, []
    for m in sorted(candidates):
        if cells[m] != 0 or pos.forbidden(m, me):
            continue
        pos.put(m, me)
        try:
            fives = pos.five_points(me)
            if len(fives) == 1:
                (b,) = fives
                pos.put(b, -me)
                try:
                    stops = not wins()
                finally:
                    pos.take(b)
            elif fives:
                stops = True
            else:
                stops = not (keeps is not None and keeps()) and not wins()
        finally:
            pos.take(m)
        if stops:
            out.append(m)
    return out
