"""Move-prediction batches drawn from a ``go.replay.Store``, planes made in the step.

1. ``sample_batch`` draws the examples (``draw``): uniform over the positions
   before a move on the board (passes are not examples, as in ``go.dataset``),
   ``per_game`` positions from each of ``batch_size / per_game`` games. A game
   is drawn with probability proportional to its examples and its positions
   uniformly within it, so every position is equally likely whatever
   ``per_game``; ``per_game=1`` draws independent positions, a larger one
   replays fewer games per batch.
2. ``examples_at`` replays each drawn game once (``go.replay.replay``), gathers
   the drawn positions from the scan's output and computes their planes
   (``go.planes.planes``).
3. each example is put under one of the 8 symmetries drawn at random, planes and
   target alike, as ``go.movepred``'s training step does (``symmetries=False``
   leaves them as they are).

Everything is jit-able with fixed shapes (``T``, the longest stored game, is
static): no host round trip per position. ``sampler`` is ``sample_batch``
jitted; ``ladder_table`` computes the ladder plane of every stored position
once, for ``Store.ladder``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.game import symmetry
from agz_jax.go.features import RANKS
from agz_jax.go.planes import LADDER_CHANNEL, Positions, pack, planes, positions
from agz_jax.go.replay import Store, game_moves, replay, replay_rules
from agz_jax.go.rules import Rules


class Batch(NamedTuple):
    """``sample_batch``'s examples: planes [B, H, W, C] (``dtype``), target
    int32[B] (the point played, under the example's symmetry), to_play int32[B],
    game int32[B], ply int32[B] (0-based), symmetry int32[B]."""

    planes: jax.Array
    target: jax.Array
    to_play: jax.Array
    game: jax.Array
    ply: jax.Array
    symmetry: jax.Array


def draw(key: jax.Array, s: Store, games: int, per_game: int) -> tuple[jax.Array, jax.Array]:
    """(game int32[games], ply int32[games, per_game]): ``games`` games drawn in
    proportion to their examples, ``per_game`` examples uniform within each."""
    k_game, k_pos = jax.random.split(key)
    e = s.examples.shape[0]
    anchor = s.examples[jax.random.randint(k_game, (games,), 0, e)]
    game = (jnp.searchsorted(s.offsets, anchor, side="right") - 1).astype(jnp.int32)
    lo, hi = s.first[game], s.first[game + 1]
    u = jax.random.uniform(k_pos, (games, per_game))
    pick = lo[:, None] + jnp.minimum((u * (hi - lo)[:, None]).astype(jnp.int32),
                                     (hi - lo - 1)[:, None])
    ply = s.examples[pick] - s.offsets[game][:, None]
    return game, ply.astype(jnp.int32)


def examples_at(rules: Rules, s: Store, game: jax.Array, ply: jax.Array, length: int,
                ranks: int = RANKS, **kwargs) -> tuple[jax.Array, Positions, jax.Array]:
    """(planes [G * K, H, W, C], Positions, target int32[G * K]) of the
    positions before ``ply`` int32[G, K] of ``game`` int32[G] (each game
    replayed once, ``length`` plies)."""
    g, k = ply.shape
    actions = game_moves(s, game, length)
    before, hashes = replay(rules, actions, None if s.setup is None else s.setup[game])
    local = jnp.repeat(jnp.arange(g), k)
    flat = ply.reshape(-1)
    rank = None
    if s.rank is not None:
        rank = s.rank[game[local], before.to_play[flat, local]]
    p = positions(before, hashes, local, flat, rank)
    target = actions[local, flat]
    if s.ladder is not None:
        kwargs = {**kwargs, "ladder_bits": s.ladder[s.offsets[game[local]] + flat]}
    return planes(rules.size, p, ranks, **kwargs), p, target


def ladder_table(s: Store, size: int, length: int, games: int = 8, **kwargs) -> np.ndarray:
    """uint32[N, W]: the ladder plane (``planes``' channel 26, ``kwargs`` its
    ladder settings) of the position before every stored move, as bitsets
    (``pack``), to keep in ``Store.ladder`` (48 bytes a 19x19 position): the
    plane is then looked up, not read, in every batch. ``games`` games are
    replayed at a time, each through all its ``length`` plies (the last call
    padded: one compilation)."""
    g_all = int(s.offsets.shape[0]) - 1
    words = (size * size + 31) // 32
    rules = replay_rules(size)
    bare = s._replace(ladder=None)

    @jax.jit
    def chunk(game):
        ply = jnp.broadcast_to(jnp.arange(length), (games, length))
        x, _, _ = examples_at(rules, bare, game, ply, length, 0, dtype=jnp.uint8, **kwargs)
        bits = jax.vmap(pack)(x[..., LADDER_CHANNEL].reshape(games * length, -1) > 0)
        return bits.reshape(games, length, words)

    offsets = np.asarray(s.offsets)
    out = np.zeros((int(offsets[-1]), words), np.uint32)
    for first in range(0, g_all, games):
        idx = np.minimum(np.arange(first, first + games), g_all - 1)
        bits = np.asarray(chunk(jnp.asarray(idx, jnp.int32)))
        for k, g in enumerate(range(first, min(first + games, g_all))):
            n = offsets[g + 1] - offsets[g]
            out[offsets[g]:offsets[g + 1]] = bits[k, :n]
    return out


def sample_batch(key: jax.Array, s: Store, batch_size: int, length: int, size: int = 19,
                 per_game: int = 1, ranks: int = 0, symmetries: bool = True,
                 dtype=jnp.float32, **kwargs) -> Batch:
    """``batch_size`` examples drawn uniformly over the stored positions before a
    move on the board (``draw``), ``per_game`` from each replayed game;
    ``length`` (static) >= the longest game (``go.replay.longest(offsets)``);
    ``ranks``: 0 (a constant plane) or 9 (``Store.rank``); ``kwargs``:
    ``go.planes.planes``' ladder settings. Jit it with ``batch_size``,
    ``length``, ``size``, ``per_game``, ``ranks``, ``symmetries``, ``dtype`` and
    the ladder settings static."""
    if batch_size % per_game:
        raise ValueError(f"batch_size {batch_size} is not a multiple of per_game {per_game}")
    k_draw, k_sym = jax.random.split(key)
    rules = replay_rules(size)
    game, ply = draw(k_draw, s, batch_size // per_game, per_game)
    x, p, target = examples_at(rules, s, game, ply, length, ranks, dtype=dtype, **kwargs)
    games = jnp.repeat(game, per_game)
    g = jnp.zeros(batch_size, jnp.int32)
    if symmetries:
        g = symmetry.random_symmetry(k_sym, (batch_size,))
        x = jax.vmap(symmetry.transform_planes)(x, g)
        perm = jnp.asarray(symmetry.permutations(size))[g]  # [B, A]
        target = jnp.argmax(perm == target[:, None], axis=-1)
    return Batch(x, target.astype(jnp.int32), p.to_play.astype(jnp.int32), games,
                 ply.reshape(-1), g)


@functools.cache
def sampler(length: int, size: int = 19, batch_size: int = 128, per_game: int = 1,
            ranks: int = 0, symmetries: bool = True, dtype=jnp.float32, ladder: str = "auto",
            ladder_limit: int = 8, ladder_pool: int | None = None):
    """``jax.jit(sample_batch)`` with these static settings: ``fn(key, store)``."""
    return jax.jit(functools.partial(
        sample_batch, batch_size=batch_size, length=length, size=size, per_game=per_game,
        ranks=ranks, symmetries=symmetries, dtype=dtype, ladder=ladder,
        ladder_limit=ladder_limit, ladder_pool=ladder_pool))


__all__ = ["Batch", "draw", "examples_at", "ladder_table", "sample_batch", "sampler"]
