"""Go boards as arrays: the building blocks of ``go.rules`` (and of the feature
planes and the ladder reader), pure functions of ``size`` (static) and arrays.

A board is int8[A] (0 empty, +1 black, -1 white) with its chain ids int16[A]
(each stone's chain representative, a point of the chain; -1 on empty points).
Tables indexed by point get one extra slot ``A`` for "off the board" (or "no
chain"), so neighbour lookups need no bounds checks.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

OFF_BOARD = 2
"""The value ``padded`` boards hold in their extra slot ``A`` (off the board)."""
EMPTY_SLOT = np.uint32(2**32 - 1)
"""Both words of an unused slot of a sorted hash history (sorts after every hash)."""


class Move(NamedTuple):
    """What a stone of the side to move would do on each of some points ``[K]``.

    Attributes:
      nbr: int32[K, 4]; the neighbours (``A`` off the board).
      nbr_chain: int32[K, 4]; their chain ids (``A`` for empty or off-board).
      friend: bool[K, 4]; a distinct friendly chain (merged by the move).
      capture: bool[K, 4]; a distinct enemy chain in atari (captured by the move).
      legal: bool[K]; empty, not suicide, not the simple-ko point (superko aside).
      hash: uint32[K, 2]; the board's hash after the move.
    """

    nbr: jax.Array
    nbr_chain: jax.Array
    friend: jax.Array
    capture: jax.Array
    legal: jax.Array
    hash: jax.Array


def stone(colour: jax.Array) -> jax.Array:
    """Board value (+1/-1, int8) of a colour index (0 black, 1 white)."""
    return (1 - 2 * jnp.asarray(colour)).astype(jnp.int8)


@functools.cache
def neighbour_table(size: int) -> np.ndarray:
    """int32[A, 4]: each point's up, down, left and right neighbour; ``A`` off the board."""
    a = size * size
    table = np.full((a, 4), a, np.int32)
    for p in range(a):
        r, c = divmod(p, size)
        for k, (dr, dc) in enumerate(((-1, 0), (1, 0), (0, -1), (0, 1))):
            if 0 <= r + dr < size and 0 <= c + dc < size:
                table[p, k] = (r + dr) * size + c + dc
    return table


@functools.cache
def zobrist_table(size: int) -> np.ndarray:
    """uint32[A, 2, 2]: two random words per (point, colour index), fixed per size."""
    rng = np.random.default_rng(0x60 + size)
    return rng.integers(0, 2**32, (size * size, 2, 2), dtype=np.uint32)


def padded(values: jax.Array, fill) -> jax.Array:
    """``values`` [A] with one more slot, ``A``, holding ``fill`` (off the board)."""
    return jnp.concatenate([values, jnp.full((1,), fill, values.dtype)])


def distinct(ids: jax.Array) -> jax.Array:
    """bool[..., 4]: ``ids[..., k]`` differs from ``ids[..., :k]`` (first occurrences)."""
    same = ids[..., :, None] == ids[..., None, :]  # [..., 4, 4]
    earlier = jnp.tril(jnp.ones((4, 4), bool), k=-1)
    return ~jnp.any(same & earlier, axis=-1)


def chain_liberties(size: int, board: jax.Array, chain: jax.Array) -> jax.Array:
    """int32[A + 1]: liberties of the chain whose id is the index (0 elsewhere)."""
    a = size * size
    nbr = jnp.asarray(neighbour_table(size))
    ids = padded(chain.astype(jnp.int32), a)[nbr]  # [A, 4]; ``A`` = no chain
    counts = distinct(ids) & (ids < a) & (board == 0)[:, None]
    return jnp.zeros(a + 1, jnp.int32).at[ids].add(counts.astype(jnp.int32))


def board_hash(size: int, board: jax.Array) -> jax.Array:
    """uint32[2]: the Zobrist hash of a board (sum mod 2**32 over its stones)."""
    z = jnp.asarray(zobrist_table(size))
    colour = (board < 0).astype(jnp.int32)
    words = jnp.take_along_axis(z, colour[:, None, None], axis=1)[:, 0]  # [A, 2]
    return jnp.sum(jnp.where((board != 0)[:, None], words, 0), axis=0, dtype=jnp.uint32)


def label_chains(size: int, board: jax.Array) -> jax.Array:
    """int16[A]: ``State.chain`` of a board built from scratch (each chain's
    smallest point), by propagating minimum labels between equal stones."""
    a = size * size
    nbr = jnp.asarray(neighbour_table(size))
    same = (padded(board, OFF_BOARD)[nbr] == board[:, None]) & (board != 0)[:, None]

    def relax(carry):
        label, _ = carry
        best = jnp.min(jnp.where(same, padded(label, a)[nbr], a), axis=1)
        new = jnp.minimum(label, best)
        return new, jnp.any(new != label)

    start = jnp.where(board != 0, jnp.arange(a), a)
    label, _ = jax.lax.while_loop(lambda c: c[1], relax, (start, jnp.bool_(True)))
    return jnp.where(board != 0, label, -1).astype(jnp.int16)


def analyse(size: int, board: jax.Array, chain: jax.Array, me: jax.Array,
            ko: jax.Array, points: jax.Array, base_hash: jax.Array | None = None,
            hashes: bool = True) -> Move:
    """``Move``: a stone ``me`` (+1/-1) on each of ``points`` int32[K] (each < A).

    Legal (superko aside) when the point is empty, is not the ko point, and the
    stone keeps a liberty: an empty neighbour, a captured enemy chain (its last
    liberty is this point), or a friendly chain with another liberty.
    ``base_hash`` is ``board``'s hash when known (else it is computed); with
    ``hashes=False`` the resulting hashes are not computed (zeros).
    """
    a = size * size
    nbr = jnp.asarray(neighbour_table(size))[points]
    colour = padded(board, OFF_BOARD)[nbr]
    ids = padded(chain.astype(jnp.int32), a)[nbr]
    libs = chain_liberties(size, board, chain)[ids]
    first = distinct(ids)
    friend = (colour == me) & first
    capture = (colour == -me) & (libs == 1) & first
    breathes = jnp.any(colour == 0, 1) | jnp.any(capture, 1) | jnp.any(friend & (libs >= 2), 1)
    legal = (board[points] == 0) & breathes & (points != ko)
    if not hashes:
        return Move(nbr, ids, friend, capture, legal, jnp.zeros((len(points), 2), jnp.uint32))
    z = jnp.asarray(zobrist_table(size))
    me_index = (me < 0).astype(jnp.int32)
    chain_hash = jnp.zeros((a + 1, 2), jnp.uint32).at[
        jnp.where(chain >= 0, chain.astype(jnp.int32), a)].add(
        z[jnp.arange(a), (board < 0).astype(jnp.int32)])
    lost = jnp.sum(jnp.where(capture[..., None], chain_hash[ids], 0), axis=1, dtype=jnp.uint32)
    base_hash = board_hash(size, board) if base_hash is None else base_hash
    new_hash = base_hash[None, :] + z[points, me_index] - lost
    return Move(nbr, ids, friend, capture, legal, new_hash)


def lower_bound(table: jax.Array, keys: jax.Array) -> jax.Array:
    """int32[K]: for each of ``keys`` uint32[K, 2], the first row of ``table``
    uint32[N, 2] (sorted lexicographically) that is not less than it (N if none);
    a binary search of ceil(log2(N + 1)) halvings."""
    n = table.shape[0]

    def halve(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        row = table[jnp.minimum(mid, n - 1)]
        less = (row[:, 0] < keys[:, 0]) | ((row[:, 0] == keys[:, 0]) & (row[:, 1] < keys[:, 1]))
        open_ = lo < hi
        return jnp.where(open_ & less, mid + 1, lo), jnp.where(open_ & ~less, mid, hi)

    start = (jnp.zeros(keys.shape[0], jnp.int32), jnp.full(keys.shape[0], n, jnp.int32))
    return jax.lax.fori_loop(0, int(np.ceil(np.log2(n + 1))), halve, start)[0]


def insert(table: jax.Array, key: jax.Array) -> jax.Array:
    """``table`` uint32[N, 2] (sorted) with ``key`` uint32[2] inserted in order and
    its last row (an unused ``EMPTY_SLOT``) dropped."""
    at = lower_bound(table, key[None])[0]
    rows = jnp.arange(table.shape[0])[:, None]
    shifted = jnp.concatenate([table[:1], table[:-1]])
    return jnp.where(rows < at, table, jnp.where(rows == at, key[None], shifted))


class Placed(NamedTuple):
    """The board after a stone is placed: ``board`` int8[A], ``chain`` int16[A],
    ``captured`` bool[A] (the stones removed), ``ko`` int32[] (the new simple-ko
    point, -1 none)."""

    board: jax.Array
    chain: jax.Array
    captured: jax.Array
    ko: jax.Array


def place(size: int, board: jax.Array, chain: jax.Array, me: jax.Array,
          point: jax.Array, move: Move) -> Placed:
    """Put a stone ``me`` on ``point`` (a legal one), with ``move`` its row of
    ``analyse``: remove the captured chains, merge the friendly ones into
    ``point``'s chain, and find the new ko point."""
    a = size * size
    chain32 = chain.astype(jnp.int32)
    captured = jnp.any(chain32[:, None] == jnp.where(move.capture, move.nbr_chain, -2), 1)
    merged = jnp.any(chain32[:, None] == jnp.where(move.friend, move.nbr_chain, -2), 1)
    is_point = jnp.arange(a) == point
    new_board = jnp.where(captured, 0, board).at[point].set(me.astype(board.dtype))
    new_chain = jnp.where(captured, -1, jnp.where(merged | is_point, point, chain32))
    # A single stone that captured a single stone and has no other liberty may be
    # recaptured at once, which would repeat the board: that point is the ko.
    lone = ~jnp.any(move.friend)
    liberties = jnp.sum(padded(new_board, OFF_BOARD)[move.nbr] == 0)
    is_ko = lone & (jnp.sum(captured) == 1) & (liberties == 1)
    ko = jnp.where(is_ko, jnp.argmax(captured), -1).astype(jnp.int32)
    return Placed(new_board, new_chain.astype(jnp.int16), captured, ko)
