"""The Table 1 planes of a batch of positions on the accelerator, by chain bitsets.

``planes`` computes ``go.features.features``'s planes of each position, the
same numbers (tested against the host path), with the per-move planes
(liberties after the move, capture size) by chain bitsets: O(A * A / 32)
word operations per position instead of ``features``'s ``vmap`` of
``board.place`` over every point. The positions are ``Positions``: gathered
from ``go.replay.replay``'s states (``positions``, with each game's board
hashes sorted once, ``history``, for positional superko) or one ``State``'s
(``of_state``). The ladder plane (``ladder=``): the batch's (move, prey)
candidate pairs are packed into a pool, the pairs the first two plies decide
are decided at once (``first_plies``), the rest read by ``go.ladder.read`` in
lock-step (``"pool"``, for an accelerator) or one after another (``"map"``,
for a CPU, where a vmapped ``while_loop`` waits for the longest reading);
``"auto"`` picks by backend, ``"vmap"`` is ``go.features``'s way, ``"none"``
leaves the plane zero. Or the plane is looked up: ``go.sampling.ladder_table``
computes it once for every stored position (48 bytes a 19x19 position) into
``Store.ladder``.

Everything is jit-able with fixed shapes: no host round trip per position.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.go import ladder as ladder_lib
from agz_jax.go.board import (
    EMPTY_SLOT,
    analyse,
    chain_liberties,
    distinct,
    lower_bound,
    neighbour_table,
    padded,
    place,
    stone,
)
from agz_jax.go.features import RANKS, assemble, rank_planes
from agz_jax.go.rules import Rules, State

LADDER_MODES = ("auto", "vmap", "pool", "map", "none")


class Positions(NamedTuple):
    """What the planes of a batch of positions need (leading axis [B]): the
    ``State`` fields the features read; ``seen`` uint32[B, T, 2], hashes of
    boards of the game, sorted, and ``seen_at`` int32[B, T], the first ply each
    occurred at: a board repeats one of the game so far if its hash is in
    ``seen`` from a ply <= ``num_moves`` (positional superko)."""

    board: jax.Array
    chain: jax.Array
    to_play: jax.Array
    ko: jax.Array
    num_moves: jax.Array
    played_at: jax.Array
    hash: jax.Array
    seen: jax.Array
    seen_at: jax.Array
    rank: jax.Array


def positions(before: State, hashes: jax.Array, game: jax.Array, ply: jax.Array,
              rank: jax.Array | None = None) -> Positions:
    """The positions before ``ply`` int32[B] of ``game`` int32[B] (indices into
    ``go.replay.replay``'s games), with their games' board histories (sorted
    once a game: ``history``)."""
    pick = jax.tree.map(lambda x: x[ply, game], before)
    seen, seen_at = history(hashes)
    rank = jnp.full(game.shape, -1, jnp.int32) if rank is None else rank
    return Positions(pick.board, pick.chain, pick.to_play, pick.ko, pick.num_moves,
                     pick.played_at, pick.hash, seen[game], seen_at[game], rank)


def history(hashes: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(uint32[G, T, 2] each game's board hashes sorted, int32[G, T] the ply of
    each): from ``go.replay.replay``'s hashes [T, G, 2] of the board before each
    ply. Among equal hashes the earliest ply sorts first, so a binary search
    finds it."""
    t = hashes.shape[0]
    hist = jnp.swapaxes(hashes, 0, 1)  # [G, T, 2]
    at = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), hist.shape[:2])
    hi, lo, at = jax.lax.sort((hist[..., 0], hist[..., 1], at), dimension=1, num_keys=3)
    return jnp.stack([hi, lo], axis=-1), at


def of_state(rules: Rules, state: State) -> Positions:
    """``Positions`` of one ``State`` (no batch axis) of any ``Rules``: its own
    ``seen`` with positional superko, else an empty history (simple ko only)."""
    seen = state.seen if rules.superko else jnp.full((1, 2), EMPTY_SLOT, jnp.uint32)
    return Positions(state.board, state.chain, state.to_play, state.ko, state.num_moves,
                     state.played_at, state.hash, seen, jnp.zeros(seen.shape[0], jnp.int32),
                     state.rank)


@functools.cache
def _bit_tables(size: int) -> tuple[np.ndarray, np.ndarray]:
    """(uint32[A, W] each point's own bit, uint32[A, W] its neighbours' bits)."""
    a = size * size
    words = (a + 31) // 32
    own = np.zeros((a, words), np.uint32)
    for p in range(a):
        own[p, p // 32] = np.uint32(1) << np.uint32(p % 32)
    nbr = neighbour_table(size)
    around = np.zeros((a, words), np.uint32)
    for p in range(a):
        for q in nbr[p]:
            if q < a:
                around[p] |= own[q]
    return own, around


def pack(mask: jax.Array) -> jax.Array:
    """uint32[W]: bool[A] as a bitset (point p is bit p % 32 of word p // 32)."""
    a = mask.shape[-1]
    words = (a + 31) // 32
    bits = jnp.pad(mask, (0, words * 32 - a)).reshape(words, 32).astype(jnp.uint32)
    return jnp.sum(bits << jnp.arange(32, dtype=jnp.uint32), axis=-1, dtype=jnp.uint32)


def unpack(bits: jax.Array, points: int) -> jax.Array:
    """bool[..., points]: ``pack``'s inverse."""
    one = (bits[..., :, None] >> jnp.arange(32, dtype=jnp.uint32)) & 1
    return one.reshape(*bits.shape[:-1], -1)[..., :points].astype(bool)


def popcount(bits: jax.Array) -> jax.Array:
    """int32[...]: the set bits of uint32[..., W]."""
    return jnp.sum(jax.lax.population_count(bits).astype(jnp.int32), axis=-1)


def after_move(size: int, board, chain, me, ko) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(int32[A] liberties of the new stone's chain, int32[A] stones captured,
    bool[A] legal but for superko) if ``me`` played each point: the numbers of
    ``go.features.after_move`` on the legal points, by bitsets. The new chain is
    the point and its friendly neighbour chains S; its liberties are the points
    next to S that are empty or captured, the point itself aside."""
    a = size * size
    own, around = (jnp.asarray(t) for t in _bit_tables(size))
    nbr = jnp.asarray(neighbour_table(size))
    chain32 = chain.astype(jnp.int32)
    chain32 = jnp.where(chain32 >= 0, chain32, a)
    ids = padded(chain32, a)[nbr]  # [A, 4]; A: no chain (empty, off the board)
    # stones[c]: chain c's points; near[c]: the points next to chain c (each
    # (chain, point) pair added once, so the adds are ORs)
    stones = jnp.zeros((a + 1, own.shape[1]), jnp.uint32).at[chain32].add(own).at[a].set(0)
    first = distinct(ids) & (ids < a)
    near = jnp.zeros((a + 1, own.shape[1]), jnp.uint32).at[ids].add(
        jnp.where(first[..., None], own[:, None, :], 0))
    move = analyse(size, board, chain, me, ko, jnp.arange(a), hashes=False)
    # row A of both tables is empty: the neighbours that are not merged or taken
    reach = around | _or4(near[jnp.where(move.friend, ids, a)])
    taken = _or4(stones[jnp.where(move.capture, ids, a)])
    free = pack(board == 0)
    libs = popcount(reach & (free | taken) & ~own)
    return libs, popcount(taken), move.legal


def _or4(x: jax.Array) -> jax.Array:
    return x[:, 0] | x[:, 1] | x[:, 2] | x[:, 3]


def legality(size: int, p: Positions) -> jax.Array:
    """bool[A]: the legal points of one position (suicide, simple ko, and
    positional superko against ``p.seen``), as ``Rules.legal_mask``."""
    a = size * size
    move = analyse(size, p.board, p.chain, stone(p.to_play), p.ko, jnp.arange(a), p.hash)
    at = jnp.minimum(lower_bound(p.seen, move.hash), p.seen.shape[0] - 1)
    repeats = jnp.all(p.seen[at] == move.hash, axis=-1) & (p.seen_at[at] <= p.num_moves)
    return move.legal & ~repeats


def base_planes(size: int, p: Positions, ranks: int = RANKS) -> tuple[jax.Array, jax.Array]:
    """(bool[A, C] every plane of one position with the ladder plane zero, bool[A]
    the legal points)."""
    board = p.board
    me = stone(p.to_play)
    legal = legality(size, p)
    libs = chain_liberties(size, board, p.chain)
    libs = jnp.where(p.chain >= 0, libs[p.chain.astype(jnp.int32)], 0)
    libs_after, captured, _ = after_move(size, board, p.chain, me, p.ko)
    age = p.num_moves - p.played_at.astype(jnp.int32)
    age = jnp.where(p.played_at >= 0, age, 5)
    planes = assemble(board, legal, libs, libs_after, age, captured,
                      jnp.zeros(size * size, bool), rank_planes(ranks, p.rank, size * size))
    return planes, legal


LADDER_CHANNEL = 26


def first_plies(size: int, board, chain, attacker, move, prey, depth: int) -> jax.Array:
    """int32[]: ``go.ladder.read``'s answer when its first two plies decide it:
    0 when ``move`` does not leave the prey in atari or some answer of the
    defender escapes at once (3 or more liberties: whatever the reading of the
    other answers, it ends in an escape or a cut-off, both a no), 1 when every
    answer is captured at once (at most 7 nodes), else -1 (a reading is needed).
    Meant for readings of at least 3 frames and 8 nodes."""
    def after(bd, ch, mover, m):
        row = jax.tree.map(lambda x: x[0], analyse(size, bd, ch, mover, jnp.int32(-1), m[None],
                                                   hashes=False))
        bd2, ch2, _, _ = place(size, bd, ch, mover, m, row)
        libs = chain_liberties(size, bd2, ch2)
        return row.legal, bd2, ch2, libs, libs[ch2[prey].astype(jnp.int32)]

    legal, bd1, ch1, libs1, prey_libs = after(board, chain, attacker, move)
    atari = legal & (prey_libs == 1) & (board[prey] == -attacker)
    options, count = ladder_lib.prey_options(size, bd1, ch1, libs1, prey, False)
    ok, _, _, _, libs = jax.vmap(lambda m: after(bd1, ch1, -attacker, m))(options)
    tried = jnp.arange(ladder_lib.MAX_OPTIONS) < count
    caught = ~ok | (libs == 1)
    escapes = jnp.any(tried & ~caught & (libs >= 3))
    decided = jnp.where(jnp.all(~tried | caught), 1, -1)
    return jnp.where(~atari | escapes, 0, decided).astype(jnp.int32)


def ladders(size: int, p: Positions, legal: jax.Array, mode: str = "auto", limit: int = 8,
            pool: int | None = None, depth: int | None = None,
            steps: int | None = None, map_batch: int | None = None) -> jax.Array:
    """bool[B, A]: the ladder plane of a batch of positions (``p`` and ``legal``
    with a leading axis [B]); the same plane whatever the mode (``go.features``'s:
    the first ``limit`` candidate (move, prey) pairs of each position read by
    ``go.ladder.read``).

    ``"vmap"``: ``go.ladder.ladder_moves`` of each position, vmapped (the reader's
    ``while_loop`` runs in lock-step until the batch's longest reading ends).
    The others read only the batch's actual candidates, packed into ``pool``
    lanes (default ``B * limit``, room for all; a smaller pool leaves those past
    it unread, no ladder), first deciding what ``first_plies`` decides for all of
    them at once; the rest are read in lock-step (``"pool"``, for an
    accelerator) or one after another (``"map"``, ``lax.map`` in chunks of
    ``map_batch``: on a CPU each reading then costs its own nodes only).
    ``"auto"``: ``"map"`` on a CPU, else ``"pool"``."""
    b, a = legal.shape
    me = jax.vmap(stone)(p.to_play)
    if mode == "auto":
        mode = "map" if jax.default_backend() == "cpu" else "pool"
    if mode == "vmap":
        return jax.vmap(lambda bd, ch, m, lg: ladder_lib.ladder_moves(
            size, bd, ch, m, lg, limit, depth, steps))(p.board, p.chain, me, legal)
    moves, preys, valid = jax.vmap(
        lambda bd, ch, m, lg: ladder_lib.candidates(size, bd, ch, m, lg, limit))(
        p.board, p.chain, me, legal)
    pool = b * limit if pool is None else pool
    slot = jnp.nonzero(valid.reshape(-1), size=pool, fill_value=b * limit)[0]
    used = slot < b * limit
    slot = jnp.minimum(slot, b * limit - 1)
    who = slot // limit
    move, prey = moves.reshape(-1)[slot], preys.reshape(-1)[slot]
    frames = ladder_lib.default_depth(size) if depth is None else depth
    nodes = ladder_lib.default_steps(size) if steps is None else steps
    if frames >= 3 and nodes >= 8:
        quick = jax.vmap(lambda w, m, q: first_plies(size, p.board[w], p.chain[w], me[w], m, q,
                                                     frames))(who, move, prey)
    else:
        quick = jnp.full(pool, -1, jnp.int32)
    deep = used & (quick < 0)
    # the readings left, packed to the front (the pool's order otherwise kept)
    order = jnp.argsort(~deep, stable=True)

    def read(w, m, q, on):
        return ladder_lib.read(size, p.board[w], p.chain[w], me[w], m, q, depth, steps, on)

    args = (who[order], move[order], prey[order], deep[order])
    if mode == "map":
        read_ = jax.lax.map(lambda x: read(*x), args, batch_size=map_batch)
    else:
        read_ = jax.vmap(read)(*args)
    works = jnp.zeros(pool, bool).at[order].set(read_)
    works = used & jnp.where(deep, works, quick == 1)
    return jnp.zeros((b, a), bool).at[who, move].max(works)


def planes(size: int, p: Positions, ranks: int = RANKS, ladder: str = "auto",
           ladder_limit: int = 8, ladder_pool: int | None = None,
           ladder_depth: int | None = None, ladder_steps: int | None = None,
           dtype=jnp.float32, ladder_bits: jax.Array | None = None) -> jax.Array:
    """[B, H, W, C] ``dtype``: ``go.features.features``'s planes of a batch of
    positions (the same numbers; ``ladder="none"``: the ladder plane zero).
    ``ladder_bits`` uint32[B, W]: the ladder plane known
    (``go.sampling.ladder_table``), not read."""
    if ladder not in LADDER_MODES:
        raise ValueError(f"ladder must be one of {LADDER_MODES}, got {ladder!r}")
    base, legal = jax.vmap(functools.partial(base_planes, size, ranks=ranks))(p)
    if ladder_bits is not None:
        base = base.at[..., LADDER_CHANNEL].set(unpack(ladder_bits, size * size))
    elif ladder != "none":
        lad = ladders(size, p, legal, ladder, ladder_limit, ladder_pool, ladder_depth,
                      ladder_steps)
        base = base.at[..., LADDER_CHANNEL].set(lad & legal)
    return base.astype(dtype).reshape(base.shape[0], size, size, -1)


def features(rules: Rules, state: State, ranks: int = RANKS, **kwargs) -> jax.Array:
    """float32[H, W, C]: ``planes`` of one ``State`` (no batch axis), a drop-in
    for ``go.features.features``."""
    p = jax.tree.map(lambda x: x[None], of_state(rules, state))
    return planes(rules.size, p, ranks, **kwargs)[0]


__all__ = ["LADDER_CHANNEL", "LADDER_MODES", "Positions", "after_move", "base_planes",
           "features", "first_plies", "history", "ladders", "legality", "of_state", "pack",
           "planes", "popcount", "positions", "unpack"]
