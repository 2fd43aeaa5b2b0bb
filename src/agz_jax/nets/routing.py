"""Double Networks at the cost of one: each position through its own colour's net.

A batch of positions mixes the two colours to move, and the black net must see
only black's positions, the white net only white's. Evaluating both nets on
the whole batch and selecting per position (``plain``) costs two forward
passes. ``by_colour`` costs about one, with static shapes and no host round
trip:

1. the positions are sorted by colour, black first (a stable sort, within each
   of ``blocks`` equal blocks of the batch, so that a batch split over devices
   is sorted where it lies);
2. with ``b`` positions a block and ``K`` a fixed *capacity* (a few fractions of
   ``b``, ``CAPACITIES``), the black net evaluates each block's first ``K``
   sorted positions and the white net its last ``K``: every position meets its
   own net as long as neither colour has more than ``K`` positions in any
   block;
3. ``lax.switch`` takes the smallest capacity that holds the batch; a batch of
   one colour runs that colour's net alone; a batch too uneven for every
   capacity runs both nets on everything (``plain``);
4. the outputs are put back in the batch's order.

A position's logits and value are its own net's whichever branch runs, so the
results equal ``plain``'s up to float rounding: a convolution over another
batch size may round differently in the last bit (measured on XLA:CPU), so
routed and plain searches are equal games only until a near tie falls the
other way. A given batch always takes the same branch, so a run stays
deterministic.

Under ``jax.vmap`` a ``lax.switch`` whose index is batched runs every branch.
``by_colour`` therefore has its own batching rule
(``compaction.with_vmap_rule``): vmapped over positions with shared nets it
routes the flattened batch as one; with
vmapped nets (``agz_jax.studies.seeds``, one pair of nets per seed) it falls back to
``plain``, which was the cost before routing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from agz_jax.base import compaction
from agz_jax.base.compaction import flat_rows, unflat_rows, with_vmap_rule

Apply = Callable[[Any, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]
"""One net's inference: (its variables, obs [N, ...], to_play int32[N])
-> (logits [N, A], value [N])."""

CAPACITIES = (0.5625, 0.625, 0.75)
"""Each net's share of a block, as fractions of its positions; the smallest that
holds a batch is used. In the ``campaign`` preset's self-play (64 positions a
batch, measured over three iterations), the larger colour was at most 5/8 of
the batch in 80% of the net calls and at most 3/4 in 96%."""


def capacities(block: int) -> tuple[int, ...]:
    """The routed branches' capacities for blocks of ``block`` positions: those
    of ``CAPACITIES`` below ``block`` (at least half of it), distinct, ascending."""
    return compaction.capacities(block, CAPACITIES)


def plain(apply: Apply, variables: Any, obs: jax.Array, to_play: jax.Array):
    """Both nets on every position, each position's own net's output selected."""
    black = apply(net_variables(variables, 0), obs, to_play)
    white = apply(net_variables(variables, 1), obs, to_play)
    is_white = to_play == 1
    return (jnp.where(is_white[:, None], white[0], black[0]),
            jnp.where(is_white, white[1], black[1]))


def branch(to_play: jax.Array, blocks: int) -> jax.Array:
    """int32[]: the branch ``by_colour`` takes for ``to_play`` int32[B]: 0 for
    one colour only, ``1 + i`` for ``capacities(B // blocks)[i]``, and
    ``1 + len(capacities)`` for both nets on everything."""
    block = to_play.shape[0] // blocks
    white = jnp.sum((to_play == 1).reshape(blocks, block), axis=1)
    need = jnp.max(jnp.maximum(white, block - white))
    beyond = compaction.capacities_below(need, capacities(block))
    one_colour = jnp.all(to_play == to_play[0])
    return jnp.where(one_colour, 0, 1 + beyond).astype(jnp.int32)


def by_colour(apply: Apply, variables: Any, obs: jax.Array, to_play: jax.Array,
              blocks: int = 1):
    """Each position of ``obs`` [B, ...] through the net of its colour to move
    (``to_play`` int32[B], 0 black, 1 white), as ``plain`` gives, at the cost
    of about one net on the batch (see the module docstring).

    ``variables``: both nets' variables, stacked ``[2, ...]`` or ``PerNet``
    (``networks.split``, which a loop should be given). ``blocks``: the
    batch is routed in this many equal blocks (the devices it is split over);
    1 when ``B`` is not a multiple of it.
    """
    if obs.shape[0] % blocks:
        blocks = 1

    def rule(axis_size, in_batched, variables, obs, to_play):
        nets_batched, obs_batched, tp_batched = in_batched
        if any(jax.tree.leaves(nets_batched)):
            axes = (jax.tree.map(lambda b: 0 if b else None, nets_batched),
                    0 if obs_batched else None, 0 if tp_batched else None)
            return jax.vmap(lambda v, o, t: plain(apply, v, o, t), axes)(
                variables, obs, to_play), (True, True)
        obs, to_play = flat_rows(axis_size, (obs_batched, tp_batched), (obs, to_play))
        return unflat_rows(axis_size, route(variables, obs, to_play))

    route = with_vmap_rule(lambda v, o, t: _route(apply, v, o, t, blocks), rule)
    return route(variables, obs, to_play)


@jax.tree_util.register_pytree_node_class
class PerNet:
    """Each net's variables, one after another (``networks.split``), where
    stacked variables hold them on a leading axis."""

    def __init__(self, nets):
        self.nets = tuple(nets)

    def __getitem__(self, n: int) -> Any:
        return self.nets[n]

    def __len__(self) -> int:
        return len(self.nets)

    def tree_flatten(self):
        return self.nets, None

    @classmethod
    def tree_unflatten(cls, _, nets):
        return cls(nets)


def net_variables(variables: Any, n) -> Any:
    """Net ``n``'s variables, from stacked ``[num_nets, ...]`` ones or from
    ``PerNet`` (``networks.unstack``)."""
    if isinstance(variables, PerNet):
        return variables[n]
    return jax.tree.map(lambda v: v[n], variables)


def _route(apply: Apply, variables: Any, obs: jax.Array, to_play: jax.Array, blocks: int):
    size = obs.shape[0]
    block = size // blocks

    def one_colour(obs, to_play):
        if isinstance(variables, PerNet):  # each net in a branch of its own: no weights copied
            nets = [lambda obs, to_play, n=n: apply(variables[n], obs, to_play)
                    for n in range(len(variables))]
            return jax.lax.switch(to_play[0], nets, obs, to_play)
        return apply(net_variables(variables, to_play[0]), obs, to_play)

    def routed(k: int):
        def run(obs, to_play):
            split = lambda x: x.reshape(blocks, block, *x.shape[1:])  # noqa: E731
            is_white = split(to_play == 1)
            order = jnp.argsort(is_white, axis=1, stable=True)  # black first, per block
            take = lambda x: jnp.take_along_axis(  # noqa: E731
                split(x), order.reshape(blocks, block, *([1] * (x.ndim - 1))), axis=1)
            obs_s, tp_s = take(obs), take(to_play)
            window = lambda x, lo: x[:, lo:lo + k].reshape(blocks * k, *x.shape[2:])  # noqa: E731
            black = apply(net_variables(variables, 0), window(obs_s, 0), window(tp_s, 0))
            white = apply(net_variables(variables, 1), window(obs_s, block - k),
                          window(tp_s, block - k))
            # Sorted position j of a block is black's for j < its black count.
            j = jnp.arange(block)
            blacks = block - jnp.sum(is_white, axis=1, keepdims=True)
            mine = j[None, :] < blacks  # [blocks, block]
            at_black = jnp.minimum(j, k - 1)
            at_white = jnp.maximum(j - (block - k), 0)
            inverse = jnp.argsort(order, axis=1)

            def merge(b, w):
                b, w = b.reshape(blocks, k, *b.shape[1:]), w.reshape(blocks, k, *w.shape[1:])
                pick = mine.reshape(blocks, block, *([1] * (b.ndim - 2)))
                out = jnp.where(pick, b[:, at_black], w[:, at_white])
                back = inverse.reshape(blocks, block, *([1] * (out.ndim - 2)))
                return jnp.take_along_axis(out, back, axis=1).reshape(size, *out.shape[2:])

            return merge(black[0], white[0]), merge(black[1], white[1])

        return run

    branches = [one_colour, *(routed(k) for k in capacities(block)),
                lambda obs, to_play: plain(apply, variables, obs, to_play)]
    return jax.lax.switch(branch(to_play, blocks), branches, obs, to_play)
