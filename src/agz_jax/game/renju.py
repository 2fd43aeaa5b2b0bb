"""Black's forbidden moves under the renju rule, as pure functions of arrays.

Renju restricts black only: a black move is *forbidden* (black may not play it;
if a manager lets it through, black loses) when it makes

  * an **overline**: six or more black stones in a row;
  * a **double four**: two or more fours at once (a *four* is a line of stones
    that one more black stone turns into exactly five; ``.XXXX.``, a straight
    four, is one four; ``X.XXX.X`` is two on one line);
  * a **double three**: two or more threes at once. A *three* is a line that one
    more black stone turns into a straight four, and it counts only when that
    stone is not itself forbidden (the standard recursive definition: a "false
    three" does not count).

A move that makes exactly five wins, whatever else it makes. White has no
restriction and wins with five or more; black wins only with exactly five.

Everything a point needs is on its four lines within 5 of it: an 11-point
window a line. Each window is read by one lookup in a table of 3**10 entries
(each of the 10 other points empty, black, or white/off the board) that gives,
for a black stone at the centre: exact five, overline, the number of fours, and
the *completion points* of a three (the points where a second black stone makes
a straight four through both). ``forbidden`` reads every empty point at once;
the recursion of the double-three rule (is a completion point itself
forbidden, with the first stone on the board?) follows only points that might
be double threes, at most ``CANDIDATES`` of them a board (any further ones
are reported forbidden, the safe side for black), to a fixed ``depth`` (each
level adds a black stone; deeper completions are taken as not forbidden).
``tests/test_renju.py`` checks the result against an independent referee.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.base import compaction
from agz_jax.game.lines import OFF_BOARD, line_window_table, with_off_board

EMPTY, BLACK, OTHER = 0, 1, 2
"""A window point's digit in the table index: empty, black, white or off the board."""
OTHERS = np.array([0, 1, 2, 3, 4, 6, 7, 8, 9, 10])
"""The 10 window points besides the centre (index 5), in digit order."""
POWERS = 3 ** np.arange(len(OTHERS))
"""Each window digit's place value in the table index."""
COMPLETIONS = np.array([1, 2, 3, 4, 6, 7, 8, 9])
"""The window points a three's completion point can lie on (within 4 of the centre)."""
DEPTH = 2
"""Default levels of the double-three recursion (``forbidden``)."""
CANDIDATES = 8
"""Points a board whose double threes are read recursively (``forbidden``)."""


def _run(line: np.ndarray, at: int) -> np.ndarray:
    """int[N]: length of the black run through ``at`` (black there) in ``line`` int[N, 11]."""
    black = line == BLACK
    right = np.cumprod(black[:, at + 1:], axis=-1).sum(-1)
    left = np.cumprod(black[:, at - 1::-1], axis=-1).sum(-1) if at > 0 else 0
    return 1 + left + right


def _five_points(line: np.ndarray) -> np.ndarray:
    """bool[N, 11]: the empty points that give the centre's run exactly five."""
    base = _run(line, 5)
    out = np.zeros(line.shape, bool)
    for k in range(1, 10):
        if k == 5:
            continue
        placed = line.copy()
        placed[:, k] = BLACK
        run = _run(placed, 5)
        out[:, k] = (line[:, k] == EMPTY) & (run == 5) & (run > base)
    return out


def _straight_four(fives: np.ndarray) -> np.ndarray:
    """bool[N]: two five points 5 apart (the ends of one straight four)."""
    return np.any(fives[:, 0:6] & fives[:, 5:11], axis=-1)


@functools.cache
def line_table() -> dict[str, np.ndarray]:
    """The renju reading of every 11-point window with a black stone at its
    centre, by index ``sum(digit[i] * 3**i)`` over ``OTHERS``:

      five: bool, the centre makes exactly five;
      over: bool, it makes six or more;
      fours: int8, the fours through the centre (0, 1 or 2);
      threes: uint8, bit ``j`` when a second black stone on ``COMPLETIONS[j]``
        makes a straight four with the centre and that stone in it.
    """
    n = 3 ** len(OTHERS)
    index = np.arange(n)
    line = np.full((n, 11), BLACK, np.int8)
    for i, point in enumerate(OTHERS):
        line[:, point] = (index // 3 ** i) % 3
    run = _run(line, 5)
    fives = _five_points(line)
    fours = fives.sum(-1) - _straight_four(fives)
    threes = np.zeros(n, np.uint8)
    for j, q in enumerate(COMPLETIONS):
        placed = line.copy()
        placed[:, q] = BLACK
        after = _five_points(placed)
        # A straight four through the centre and q: ends k and k + 5 with
        # k < q < k + 5 (and so k < 5 < k + 5: the run holds the centre).
        ends = after[:, 0:6] & after[:, 5:11]  # [n, 6]: k = 0..5
        holds_q = (np.arange(6) < q) & (q < np.arange(6) + 5)
        straight = np.any(ends & holds_q, axis=-1)
        threes |= ((line[:, q] == EMPTY) & straight).astype(np.uint8) << j
    return dict(five=run == 5, over=run >= 6, fours=fours.astype(np.int8), threes=threes)


@functools.cache
def _set_bits() -> tuple[np.ndarray, np.ndarray]:
    """int32[256] twice: the lowest and the second lowest set bit of a byte (8: none)."""
    first, second = np.full(256, 8, np.int32), np.full(256, 8, np.int32)
    for v in range(256):
        bits = [j for j in range(8) if v >> j & 1]
        first[v], second[v] = (bits + [8, 8])[:2]
    return first, second


def _digits(vals: jax.Array) -> jax.Array:
    """int32[...]: the table digit of board values (+1 black, 0 empty, else other)."""
    return jnp.where(vals == 0, EMPTY, jnp.where(vals == 1, BLACK, OTHER)).astype(jnp.int32)


def read_lines(vals: jax.Array):
    """The table's reading (five, over, fours, threes), each [..., 4], of
    windows ``vals`` int[..., 4, 11] of black stones at their centres."""
    digits = _digits(vals[..., OTHERS])
    index = jnp.sum(digits * jnp.asarray(POWERS, jnp.int32), axis=-1)
    table = line_table()
    return tuple(jnp.asarray(table[k])[index] for k in ("five", "over", "fours", "threes"))


def _point(padded: jax.Array, windows: jax.Array, p: jax.Array, depth: int,
           added: jax.Array | None = None, judge: bool = False) -> jax.Array:
    """bool[]: is a black stone on the empty point ``p`` forbidden on ``padded``
    (int8[A + 1], ``with_off_board``) with black stones also on ``added``
    (int32[K], the stones of the recursion above)? ``depth`` levels of the
    double-three recursion; at 0 every three counts. ``judge``: read as the
    Piskvork judge does, where a straight-four point that also makes five does
    not make a three (the rule text counts it: a five is never forbidden)."""
    added = jnp.zeros((0,), jnp.int32) if added is None else added
    win = windows[p]  # [4, 11]
    vals = padded[win]
    if added.shape[0]:
        vals = jnp.where(jnp.any(win[..., None] == added, axis=-1), 1, vals)
    five, over, fours, threes = read_lines(vals)
    simple = jnp.any(over) | (jnp.sum(fours) >= 2)
    has_three = threes != 0
    if depth > 0:
        # A line's completion points: its lowest two set bits (at most 2 are set).
        first, second = (jnp.asarray(t)[threes] for t in _set_bits())
        slots = jnp.stack([first, second], axis=-1)  # [4, 2]; 8 for none
        points = jnp.take_along_axis(win[:, COMPLETIONS], jnp.minimum(slots, 7), axis=-1)
        below = jnp.concatenate([added, p[None]])
        bad = jax.vmap(jax.vmap(
            lambda q: _completion_bad(padded, windows, q, depth - 1, below, judge)))(points)
        has_three = jnp.any((slots < 8) & ~bad, axis=-1)
    return ~jnp.any(five) & (simple | (jnp.sum(has_three) >= 2))


def _completion_bad(padded, windows, q, depth, added, judge: bool) -> jax.Array:
    """bool[]: the straight-four point ``q`` does not make its three real."""
    bad = _point(padded, windows, q, depth, added, judge)
    if judge:
        win = windows[q]
        vals = jnp.where(jnp.any(win[..., None] == added, axis=-1), 1, padded[win])
        bad |= jnp.any(read_lines(vals)[0])
    return bad


def forbidden(board: jax.Array, depth: int = DEPTH, candidates: int = CANDIDATES,
              judge: bool = False) -> jax.Array:
    """bool[A]: the empty points where black may not play on ``board`` int8[A]
    (+1 black, -1 white), whoever is to move."""
    padded, simple, maybe, slots = _candidates(board, depth, candidates)
    if depth == 0:
        return simple | maybe
    return _settled(simple, maybe, slots, _recursion(padded, slots, depth, judge))


def forbidden_rows(boards: jax.Array, depth: int = DEPTH, candidates: int = CANDIDATES
                   ) -> jax.Array:
    """bool[B, A]: ``forbidden`` of each board of ``boards`` int8[B, A], the
    double-three recursion read only on the boards that have a candidate for
    it (``compaction.map_where``; most boards of a game have none). In a
    one-position search that is a branch: on a renju opening the engine's
    tactics took 139 us a position instead of 259 (2026-12-02)."""
    padded, simple, maybe, slots = jax.vmap(
        lambda b: _candidates(b, depth, candidates))(boards)
    if depth == 0:
        return simple | maybe
    read = compaction.map_where(lambda pad, s: _recursion(pad, s, depth, False),
                                jnp.any(maybe, axis=-1), padded, slots)
    return jax.vmap(_settled)(simple, maybe, slots, read)


def _candidates(board: jax.Array, depth: int, candidates: int):
    """(padded, simple, maybe, slots) of ``board``: the board ``with_off_board``;
    the empty points an overline or a double four forbids; those that have two
    threes (forbidden unless the recursion finds a three false); and the first
    ``candidates`` of those (``compaction.first_true``; none at depth 0)."""
    a = board.shape[-1]
    windows = jnp.asarray(line_window_table(int(round(a ** 0.5))))
    padded = with_off_board(board)
    five, over, fours, threes = read_lines(padded[windows])  # [A, 4]
    empty = board == 0
    no_five = ~jnp.any(five, axis=-1)
    simple = empty & no_five & (jnp.any(over, axis=-1) | (jnp.sum(fours, axis=-1) >= 2))
    maybe = empty & no_five & ~simple & (jnp.sum(threes != 0, axis=-1) >= 2)
    slots = (compaction.first_true(maybe, min(candidates, a)) if depth
             else jnp.zeros((0,), jnp.int32))
    return padded, simple, maybe, slots


def _recursion(padded: jax.Array, slots: jax.Array, depth: int, judge: bool) -> jax.Array:
    """bool[K]: is each candidate point of ``slots`` forbidden (``_point``)?"""
    size = int(round((padded.shape[-1] - 1) ** 0.5))
    windows = jnp.asarray(line_window_table(size))
    return jax.vmap(lambda p: _point(padded, windows, p, depth, judge=judge))(slots)


def _settled(simple: jax.Array, maybe: jax.Array, slots: jax.Array, read: jax.Array
             ) -> jax.Array:
    """bool[A]: the forbidden points, the candidates read by the recursion and
    any further ones (past ``CANDIDATES``) taken as forbidden, the safe side."""
    a = simple.shape[-1]
    checked = jnp.zeros(a, bool).at[slots].set(True)
    exact = jnp.zeros(a, bool).at[slots].set(read)
    return simple | (maybe & jnp.where(checked, exact, True))


def forbidden_at(board: jax.Array, p: jax.Array, depth: int = DEPTH) -> jax.Array:
    """bool[]: ``forbidden(board)[p]`` for one empty point ``p``, read alone."""
    a = board.shape[-1]
    windows = jnp.asarray(line_window_table(int(round(a ** 0.5))))
    return _point(with_off_board(board), windows, jnp.asarray(p, jnp.int32), depth)


FOULS = ("none", "double three", "double four", "overline")
"""``foul``'s codes, as the referee numbers them."""


def foul(board: jax.Array, p: jax.Array, depth: int = DEPTH) -> jax.Array:
    """int32[]: why black may not play the empty point ``p``: an index into
    ``FOULS`` (0 when it may; an exact five is never a foul)."""
    a = board.shape[-1]
    windows = jnp.asarray(line_window_table(int(round(a ** 0.5))))
    padded = with_off_board(board)
    five, over, fours, _ = read_lines(padded[windows[p]])
    bad = _point(padded, windows, jnp.asarray(p, jnp.int32), depth)
    code = jnp.where(jnp.any(over), 3, jnp.where(jnp.sum(fours) >= 2, 2, 1))
    return jnp.where(bad & ~jnp.any(five), code, 0).astype(jnp.int32)


REFEREE_DEPTH = 4
"""Recursion depth of ``foul_code``, the host's reading of one point (a
protocol's or the web board's check of a move): deeper than the search's."""


def foul_code(board, p: int, depth: int = REFEREE_DEPTH) -> int:
    """``foul`` of one point of a host board (int8[A], +1 black), an index
    into ``FOULS``; 0 for an occupied point.

    Read on the host, in NumPy, the same reading as ``foul`` (tested point
    for point against it), but following only the lines that hold a three
    and stopping as soon as the verdict is known: the VCF reading asks it
    for every black four it tries, and a call on the device cost about
    1.5 ms against tens of microseconds here."""
    board = np.asarray(board, np.int8)
    if board[p] != 0:
        return 0
    size = int(round(board.shape[-1] ** 0.5))
    host = _HostReader(board, size)
    if not host.forbidden(int(p), depth, ()):
        return 0
    _, over, fours, _ = host.lines(int(p), ())
    return 3 if over.any() else 2 if int(fours.sum()) >= 2 else 1


class _HostReader:
    """``_point`` on a host board, one point at a time, with early exits."""

    def __init__(self, board: np.ndarray, size: int):
        self.windows = line_window_table(size)  # cached
        self.padded = np.concatenate([board, np.array([OFF_BOARD], np.int8)])
        self.table = line_table()
        self.first, self.second = _set_bits()

    def lines(self, q: int, added: tuple[int, ...]):
        win = self.windows[q]  # [4, 11]
        vals = self.padded[win]
        if added:
            vals = np.where(np.isin(win, added), 1, vals)
        digits = np.where(vals == 0, EMPTY, np.where(vals == 1, BLACK, OTHER))[:, OTHERS]
        index = digits @ POWERS
        t = self.table
        return t["five"][index], t["over"][index], t["fours"][index], t["threes"][index]

    def forbidden(self, q: int, depth: int, added: tuple[int, ...]) -> bool:
        five, over, fours, threes = self.lines(q, added)
        if five.any():
            return False
        if over.any() or int(fours.sum()) >= 2:
            return True
        lines = [d for d in range(4) if threes[d]]
        if len(lines) < 2:
            return False
        if depth == 0:
            return True
        below = (*added, q)
        real = 0
        for d in lines:
            t = int(threes[d])
            for j in (self.first[t], self.second[t]):
                if j < 8 and not self.forbidden(int(self.windows[q][d, COMPLETIONS[j]]),
                                                depth - 1, below):
                    real += 1
                    break
            if real >= 2:
                return True
            if real + (len(lines) - 1 - lines.index(d)) < 2:
                return False
        return False
