"""Victory by continuous threats (VCT): a win forced with fours and threes, read on the host.

It widens the VCF reader (``agz_jax.game.vcf``) from fours to threes. A *three*
is a move after which its side has an *open-four point*: a point where one more
stone makes two five points at once (an open four, or a double four), which no
single block stops. The opponent must answer a three at once, by a stone that
leaves no open-four point, or by a four of its own (which the threatening side
must block, after which the three still stands). A four must be blocked at its
one five point. A VCT is a strategy of fours and threes that wins against every
such answer: an AND-OR search where the attacker picks one threat and the
defender tries every answer.

The defender's answers to a three are complete: an open-four point turns into
five points only through the 5-point windows that hold three of the attacker's
stones and none of the defender's, so a stone anywhere else leaves it in place;
every empty point of those windows is tried, and every four of the defender's.
A stone of the defender's that makes a three of its own is too slow (the
attacker makes its open four, then a five), and a four does not stop an open
four (the attacker plays its five instead of blocking). So a line found wins
against best play, within the rule's five; a line not found within the budget
may still exist.

Rules as in ``vcf``: freestyle, standard (exactly five) and renju (black exactly
five, never on a forbidden point; a black block on a forbidden point is no
block). The search is plain Python over ``vcf.Position``'s window counts with
a node budget and a deadline; it runs at the root of a play-time move, never in
self-play.

- ``solve(board, me)``: ``me``'s VCT with ``me`` to move, as the principal line
  (the first threat first: the move to play), or None;
- ``defences(board, me)``: when the opponent would have a VCT if it were to
  move, the moves of ``me`` after which it has none found, or None.
"""

from __future__ import annotations

import time

from agz_jax.game import vcf
from agz_jax.game.vcf import OutOfTime

__all__ = ["DEPTH", "NODES", "OutOfTime", "defences", "open_four_points",
           "solve", "solve_position", "threats"]

NODES = 4_000
"""Nodes (attacker and defender) a ``solve`` call reads at most."""
DEPTH = 6
"""Threats (fours and threes) of the attacker a line holds at most; forced
blocks do not count."""


def open_four_points(pos: vcf.Position, colour: int) -> set[int]:
    """The empty points where a stone ``colour`` makes two or more five points
    (an open four or a double four), leaving out black's forbidden ones."""
    return {p for p in pos.four_moves(colour) if _opens(pos, colour, p)}


def _opens_through(pos: vcf.Position, colour: int, m: int) -> bool:
    """Has ``colour`` an open-four point in a window through its stone on ``m``?
    (A stone makes new open-four points only there.)"""
    cells, threes = pos.cells, pos.threes[colour]
    seen = set()
    for w in pos.windows_of[m]:
        if w not in threes:
            continue
        for p in pos.windows[w]:
            if cells[p] == 0 and p not in seen:
                seen.add(p)
                if _opens(pos, colour, p):
                    return True
    return False


def _fives_after(pos: vcf.Position, colour: int, p: int, enough: int) -> int:
    """How many five points ``colour`` would have after a stone on the empty
    ``p`` (counted up to ``enough``), read from the window counts without
    putting it: the other empty point of each window through ``p`` with three
    of its stones and none of the other's, and the empty point of each window
    with four that ``p`` is not in. Five or more wins (no exact-five rule)."""
    cells, windows = pos.cells, pos.windows
    own, other = pos.count[colour], pos.count[-colour]
    found = set()
    for w in pos.windows_of[p]:
        if own[w] == 3 and other[w] == 0:
            for q in windows[w]:
                if q != p and cells[q] == 0:
                    found.add(q)
                    if len(found) >= enough:
                        return enough
    for w in pos.fours[colour]:
        for q in windows[w]:
            if cells[q] == 0 and q != p:
                found.add(q)
    return min(len(found), enough)


def _leaves_fives(pos: vcf.Position, colour: int, p: int, n: int) -> bool:
    """Would a stone ``colour`` on the empty ``p`` leave it ``n`` or more five
    points? From the window counts, or under an exactly-five rule (where an
    overline is no five) read on the board."""
    if not pos._exact(colour):
        return _fives_after(pos, colour, p, n) >= n
    pos.put(p, colour)
    try:
        return len(pos.five_points(colour)) >= n
    finally:
        pos.take(p)


def _opens(pos: vcf.Position, colour: int, p: int) -> bool:
    """Is the empty point ``p`` an open-four point of ``colour``?"""
    return not pos.forbidden(p, colour) and _leaves_fives(pos, colour, p, 2)


def threats(pos: vcf.Position, colour: int) -> tuple[list[int], list[int]]:
    """(fours, threes): the moves of ``colour`` that make a five point, and the
    others that make an open-four point; black's forbidden moves left out."""
    fours, threes = [], []
    cells = pos.cells
    for p in sorted(pos.four_moves(colour)):
        if not pos.forbidden(p, colour) and _leaves_fives(pos, colour, p, 1):
            fours.append(p)
    seen = set(fours)
    for w in pos.twos[colour] | pos.threes[colour]:
        for p in pos.windows[w]:
            if cells[p] == 0 and p not in seen:
                seen.add(p)
                if pos.forbidden(p, colour):
                    continue
                pos.put(p, colour)
                try:
                    if not pos.five_points(colour) and _opens_through(pos, colour, p):
                        threes.append(p)
                finally:
                    pos.take(p)
    return fours, sorted(threes)


class _Search(vcf._Search):
    """The AND-OR search; ``vcf._Search``'s budget (``tick``), a table of the
    attacker's nodes by position with the depth they were read to."""

    def __init__(self, pos: vcf.Position, attacker: int, nodes: int, deadline: float | None):
        super().__init__(pos, attacker, nodes, deadline)
        self.table: dict[int, tuple[int, list[int] | None]] = {}

    def _tick(self):
        self.tick(16)  # a node here costs more than a VCF node: the clock more often

    def _threat_stands(self) -> bool:
        return bool(self.pos.five_points(self.a)) or bool(open_four_points(self.pos, self.a))

    def attack(self, depth: int) -> list[int] | None:
        """The attacker to move: its winning line, or None."""
        pos, a, d = self.pos, self.a, self.d
        if mine := pos.five_points(a):
            return [min(mine)]
        self._tick()
        theirs = pos.five_points(d)
        if len(theirs) >= 2:
            return None
        if theirs:  # the defender's four: block it, and the threat must still stand
            (b,) = theirs
            if pos.forbidden(b, a):
                return None
            pos.put(b, a)
            try:
                rest = self.defend(depth) if self._threat_stands() else None
            finally:
                pos.take(b)
            return None if rest is None else [b, *rest]
        if depth <= 0:
            return None
        seen = self.table.get(pos.key)
        if seen is not None and (seen[1] is not None or seen[0] >= depth):
            return seen[1]
        found = None
        if opens := open_four_points(pos, a):
            found = [min(opens)]
        else:
            fours, threes = threats(pos, a)
            for m in fours + threes:
                pos.put(m, a)
                try:
                    rest = self.defend(depth - 1)
                finally:
                    pos.take(m)
                if rest is not None:
                    found = [m, *rest]
                    break
        self.table[pos.key] = (depth, found)
        return found

    def defend(self, depth: int) -> list[int] | None:
        """The defender to move against a threat: the attacker's line against
        its first answer if every answer loses, else None."""
        pos, a, d = self.pos, self.a, self.d
        self._tick()
        if pos.five_points(d):
            return None
        fives = pos.five_points(a)
        if len(fives) >= 2:
            return []
        if fives:
            (b,) = fives
            if pos.forbidden(b, d):
                return []
            pos.put(b, d)
            try:
                rest = self.attack(depth)
            finally:
                pos.take(b)
            return None if rest is None else [b, *rest]
        opens = open_four_points(pos, a)
        if not opens:
            return None
        cells = pos.cells
        answers = {p for w in pos.threes[a] for p in pos.windows[w] if cells[p] == 0}
        answers |= pos.four_moves(d)
        line = None
        for q in sorted(answers):
            if pos.forbidden(q, d):
                continue
            pos.put(q, d)
            try:
                # A stone of the defender's makes no open-four point of the
                # attacker's: only the ones there were can remain.
                if not pos.five_points(d) and any(_opens(pos, a, p) for p in opens - {q}):
                    rest = []  # neither a four nor a block: the open four wins
                else:
                    rest = self.attack(depth)
            finally:
                pos.take(q)
            if rest is None:
                return None
            if line is None:
                line = [q, *rest]
        return line


def solve_position(pos: vcf.Position, attacker: int, *, nodes: int = NODES,
                   depth: int = DEPTH, deadline: float | None = None) -> list[int] | None:
    """``attacker``'s VCT in ``pos`` with ``attacker`` to move (see ``solve``).
    The depth deepens from 1, so the line found is one of the fewest threats
    that the budget reached."""
    if deadline is not None and time.perf_counter() > deadline:
        raise OutOfTime
    search = _Search(pos, attacker, nodes, deadline)
    try:
        for d in range(1, depth + 1):
            line = search.attack(d)
            if line is not None:
                return line
    except vcf._OutOfNodes:
        return None
    return None


def solve(board, me: int, size: int, rule: str = "freestyle", *, nodes: int = NODES,
          depth: int = DEPTH, is_forbidden=None, deadline: float | None = None
          ) -> list[int] | None:
    """``me``'s (+1 black, -1 white) VCT on ``board`` with ``me`` to move: a
    principal line ``[threat, answer, threat, answer, ..., winning move]``
    (its first move is the one to play; the defender's other answers lose
    too), or None when none is found within ``nodes`` nodes and ``depth``
    threats. ``deadline``: a ``time.perf_counter()`` value; past it
    ``OutOfTime`` is raised."""
    return solve_position(vcf.Position(board, size, rule, is_forbidden), me, nodes=nodes,
                          depth=depth, deadline=deadline)


def defences(board, me: int, size: int, rule: str = "freestyle", *, nodes: int = NODES,
             depth: int = DEPTH, is_forbidden=None, deadline: float | None = None
             ) -> tuple[list[int], list[int]] | None:
    """When the opponent of ``me`` would have a VCT on ``board`` if it were to
    move, ``(moves, line)``: the moves of ``me`` after which none is found
    (a four of ``me`` read with its forced block and the opponent then to move,
    as ``vcf.defences`` does), and the line it had; None when it has none
    found. The candidates are the empty points of every window through the
    line's points, and ``me``'s fours and threes; ``moves`` may be empty.
    "None found" includes a reading cut off by its node budget, so ``moves``
    may hold moves that still lose."""
    budget = dict(nodes=nodes, depth=depth, deadline=deadline)
    pos = vcf.Position(board, size, rule, is_forbidden)
    line = solve_position(pos, -me, **budget)
    if line is None:
        return None
    cells = pos.cells
    candidates = {p for q in line for w in pos.windows_of[q] for p in pos.windows[w]
                  if cells[p] == 0}
    fours, threes = threats(pos, me)
    candidates |= set(fours) | set(threes)
    return vcf.stopping_moves(pos, me, candidates,
                              lambda: solve_position(pos, -me, **budget) is not None), line
