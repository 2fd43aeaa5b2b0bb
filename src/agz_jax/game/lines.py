"""The board's lines as index tables: each point's neighbours along the four
directions (horizontal, vertical, diagonal, anti-diagonal), read by the rules
(``agz_jax.game.gomoku``), the renju reading (``agz_jax.game.renju``) and the
tactics (``agz_jax.game.tactics``). Points are ``row * size + col``; ``A =
size * size`` is a padding slot for the points off the board, which
``with_off_board`` fills with ``OFF_BOARD``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

# Row/column steps of the four line directions: horizontal, vertical, diagonal,
# anti-diagonal.
_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


@functools.cache
def line_table(size: int) -> np.ndarray:
    """int32[A, 4, 2, 5]: index of the k-th neighbour (k = 1..5) of each point
    along each direction, both ways; ``A`` (a padding slot) when off the board."""
    a = size * size
    table = np.full((a, 4, 2, 5), a, dtype=np.int32)
    for p in range(a):
        r, c = divmod(p, size)
        for d, (dr, dc) in enumerate(_DIRECTIONS):
            for s, sign in enumerate((1, -1)):
                for k in range(1, 6):
                    rr, cc = r + sign * k * dr, c + sign * k * dc
                    if 0 <= rr < size and 0 <= cc < size:
                        table[p, d, s, k - 1] = rr * size + cc
    return table


@functools.cache
def line_window_table(size: int, half: int = 5) -> np.ndarray:
    """int32[A, 4, 2 * half + 1]: the points at offsets -half..half (default
    -5..5) from each point along each direction; ``A`` (a padding slot) when
    off the board."""
    a = size * size
    table = np.full((a, 4, 2 * half + 1), a, dtype=np.int32)
    for p in range(a):
        r, c = divmod(p, size)
        for d, (dr, dc) in enumerate(_DIRECTIONS):
            for i, k in enumerate(range(-half, half + 1)):
                rr, cc = r + k * dr, c + k * dc
                if 0 <= rr < size and 0 <= cc < size:
                    table[p, d, i] = rr * size + cc
    return table


@functools.cache
def reach_table(size: int, half: int = 5) -> np.ndarray:
    """bool[A, A]: ``[t, p]`` when ``p`` is ``t`` or lies within ``half`` of it
    on one of its four lines; with 5, the points whose stone can change ``t``'s
    entry of ``Rules.new_five_points``."""
    window = line_window_table(size, half)
    a = size * size
    table = np.zeros((a, a + 1), bool)
    np.put_along_axis(table, window.reshape(a, -1), True, axis=1)
    return table[:, :a]


OFF_BOARD = 2
"""What ``with_off_board`` puts in the padding slot ``A`` of the line tables."""


def with_off_board(board: jax.Array) -> jax.Array:
    """int[A + 1]: ``board`` with the off-board slot ``A`` (``OFF_BOARD``), so
    that ``line_window_table`` indices can be read from it directly."""
    return jnp.concatenate([board, jnp.full((1,), OFF_BOARD, board.dtype)])
