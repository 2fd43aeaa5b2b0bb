"""Threat maps for the basic-rule generator (``agz_jax.curriculum.basic_rules``):
a player's winning points ``W`` and, per direction, the winning points each
empty point would make (``D`` is where they total two or more).

Dense shifted-slice arithmetic on an [H, W] board of 0 (empty), +1/-1 (stones)
and, in cut-outs, 2 (not a point). (A per-point neighbourhood gather compiles
faster but moves 44x the data: 10x slower to run on CPU.) This reads threats
to label generated positions; ``agz_jax.game.tactics`` reads them with the rules'
five-point readers to restrict a search.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))  # as gomoku's: -, |, \, /


_PAD = 5


def _shift(padded: jax.Array, dr: int, dc: int, shape) -> jax.Array:
    """[H, W]: ``out[r, c] = x[r + dr, c + dc]`` read from ``padded`` (pad 5)."""
    h, w = shape
    return padded[_PAD + dr:_PAD + dr + h, _PAD + dc:_PAD + dc + w]


def _pad(x: jax.Array) -> jax.Array:
    return jnp.pad(x, _PAD, constant_values=False)


def _windows(board: jax.Array, s, standard: bool | jax.Array, dirs=range(4)):
    """Player ``s``'s (+1/-1) 5-point windows, by start point and direction.

    Window (d, r, c) is the points (r, c) + k * DIRECTIONS[d], k = 0..4; a
    window reaching off the board is never active.
    Returns bool[len(dirs), H, W] each: ``four`` (4 stones of s, 1 empty: the
    empty point wins), ``three`` (3 stones, 2 empty: playing one empty makes the
    other a winning point), ``five`` (5 stones of s). Under 'standard' a window
    counts for ``four``/``three`` only when the points just outside it are not
    s (else its five would be an overline). ``standard`` is a Python bool (the
    rule's reading, fixed when traced) or a traced bool[] (renju reads black
    with exactly five and white with five or more, the side chosen at run time).
    """
    shape = board.shape
    own = _pad(board == s)
    # one sum of shifts counts both: stones of s in the low 3 bits, empty points above
    code = _pad((board == s).astype(jnp.int32) + 8 * (board == 0).astype(jnp.int32))
    four, three, five = [], [], []
    for d in dirs:
        dr, dc = DIRECTIONS[d]
        total = sum(_shift(code, k * dr, k * dc, shape) for k in range(5))
        n_own, n_emp = total % 8, total // 8
        ok = jnp.ones(shape, bool)
        if isinstance(standard, bool):
            if standard:
                ok = ~_shift(own, -dr, -dc, shape) & ~_shift(own, 5 * dr, 5 * dc, shape)
        else:  # traced (renju): exactly five for black, five or more for white
            ok = ~(standard & (_shift(own, -dr, -dc, shape) | _shift(own, 5 * dr, 5 * dc, shape)))
        four.append((n_own == 4) & (n_emp == 1) & ok)
        three.append((n_own == 3) & (n_emp == 2) & ok)
        five.append(n_own == 5)
    return jnp.stack(four), jnp.stack(three), jnp.stack(five)


def _back(active: jax.Array, d: int):
    """[5, H, W]: ``active`` (windows of direction d) read k = 0..4 points back."""
    dr, dc = DIRECTIONS[d]
    padded = _pad(active)
    return [_shift(padded, -k * dr, -k * dc, active.shape) for k in range(5)]


def _counts(board: jax.Array, three: jax.Array, dirs=range(4)) -> jax.Array:
    """int32[len(dirs), H, W] threat counts from the ``three`` windows (see threat_maps)."""
    shape = board.shape
    emp = _pad(board == 0)
    counts = []
    for i, d in enumerate(dirs):
        dr, dc = DIRECTIONS[d]
        back = _back(three[i], d)
        # the windows starting k points back from n hold n + j*d iff 0 <= j + k <= 4:
        # k <= 4 - j for j > 0 (a prefix of k), k >= -j for j < 0 (a suffix)
        prefix, suffix = [back[0]], [back[4]]
        for k in range(1, 4):
            prefix.append(prefix[-1] | back[k])
            suffix.append(suffix[-1] | back[4 - k])
        total = jnp.zeros(shape, jnp.int32)
        for j in (1, 2, 3, 4):
            total = total + (prefix[4 - j] & _shift(emp, j * dr, j * dc, shape)).astype(jnp.int32)
            total = total + (suffix[4 - j] & _shift(emp, -j * dr, -j * dc, shape)).astype(
                jnp.int32)
        counts.append(total)
    return jnp.stack(counts) * (board == 0)[None].astype(jnp.int32)


def threat_maps(board: jax.Array, s, standard: bool | jax.Array):
    """Player s's threats on an [H, W] board: (win bool[H, W], counts int32[4, H, W],
    five bool[]).

    win: W(s), the empty points where s makes a five (per the rule) at once.
    counts: per direction, the new winning points s gets by playing each empty
      point (0 on stones). Playing n makes p a winning point when a window
      holds n, p and three stones of s; p is on a line through n within 4
      points, so the counts for different offsets and directions are of
      distinct points. When W(s) is empty, the total over directions is the
      number of winning points s has after playing n, and D(s) is where it is
      2 or more.
    five: s has a run of five or more on the board.
    ``standard``: only exactly five wins (a Python bool or a traced bool[], see
    ``_windows``).
    """
    four, three, five = _windows(board, s, standard)
    win = jnp.zeros(board.shape, bool)
    for d in range(4):
        for x in _back(four[d], d):
            win = win | x
    return win & (board == 0), _counts(board, three), jnp.any(five)


def threat_counts(board: jax.Array, s, standard: bool | jax.Array, dirs=range(4)) -> jax.Array:
    """int32[len(dirs), H, W]: the ``counts`` of ``threat_maps``, for the directions given."""
    return _counts(board, _windows(board, s, standard, dirs)[1], dirs)
