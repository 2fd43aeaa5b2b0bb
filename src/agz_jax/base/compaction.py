"""A row-wise function computed only on the rows of a batch that need it.

The search reads tactics at every node of a batch of positions, and some
readings are costly and rarely needed: the answers to an open three or to a
four-three only matter where the opponent has one. ``jax.vmap`` computes them
for every row. ``map_where`` gathers the rows that need them, in chunks of a
fixed size (``CHUNKS`` to a batch), computes each chunk and scatters its
results back, with static shapes and no host round trip:

* a ``lax.while_loop`` runs as many chunks as the needed rows fill: none when
  no row needs it, every chunk when all do;
* a row that does not need it gets zeros (``False``);
* a batch of one row (the engine's one-position search) is a ``lax.cond``.

The function is traced and compiled once, at the chunk's size: a switch
between sub-batches of several sizes held one copy of it per size, and made
every program that reads the tactics about three times as long to compile.

The results are the same bits as ``jax.vmap`` on the needed rows: each row is
computed on its own, whatever batch it is in (integer and boolean tactics,
checked in the tests).

Under ``jax.vmap`` a loop with a batched trip count would run the longest
row's chunks for every row, so
``map_where`` has its own batching rule (``with_vmap_rule``, on
``custom_vmap``): a vmapped batch ``[S, B]`` is one batch of ``S * B`` rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

CHUNKS = 8
"""``map_where`` computes the rows that need the function in chunks of
``1 / CHUNKS`` of the batch (``chunk_size``)."""


def chunk_size(size: int) -> int:
    """The rows of one of ``map_where``'s chunks for a batch of ``size`` rows."""
    return max(1, math.ceil(size / CHUNKS))


def capacities(size: int, fractions: tuple[float, ...]) -> tuple[int, ...]:
    """Sub-batch sizes for a batch of ``size`` rows: those of ``fractions``
    of it below ``size``, distinct, ascending (the routed nets' capacities)."""
    return tuple(sorted({k for f in fractions if (k := math.ceil(f * size)) < size}))


def capacities_below(count: jax.Array, caps: tuple[int, ...]) -> jax.Array:
    """int32[]: how many of ``caps`` are below ``count``, the index of the
    smallest that holds it (``len(caps)`` for none). Summed from Python ints,
    so the traced function holds no constant array."""
    return sum((count > k).astype(jnp.int32) for k in caps)


def first_true(mask: jax.Array, k: int) -> jax.Array:
    """int32[k]: the indices of ``mask`` bool[n]'s True entries in ascending
    order, then of its False ones in ascending order, the first ``k`` of them:
    ``lax.top_k(mask.astype(int32), k)[1]``, without its sort.

    XLA:CPU sorts by calling a comparator for every comparison, about 30 us
    for 225 entries; here each entry's rank comes from the count of True
    entries before it, as two small matrix products (rows of ``ceil(sqrt(n))``
    entries, exact in float32), and the ranks are a permutation scattered back
    to indices: a few microseconds.
    """
    n = mask.shape[-1]
    if mask.ndim != 1 or not 0 <= k <= n:
        raise ValueError(f"first_true takes a bool[n] mask and 0 <= k <= n, got "
                         f"{mask.shape} and k={k}")
    side = math.isqrt(n - 1) + 1 if n else 0
    padded = jnp.zeros(side * side, jnp.float32).at[:n].set(mask.astype(jnp.float32))
    rows = padded.reshape(side, side)
    strict = jnp.asarray(np.triu(np.ones((side, side), np.float32), 1))  # [j, i]: j < i
    before = (rows @ strict + (jnp.sum(rows, axis=1) @ strict)[:, None]).reshape(-1)[:n]
    before = before.astype(jnp.int32)  # True entries before each
    index = jnp.arange(n, dtype=jnp.int32)
    count = jnp.sum(mask, dtype=jnp.int32)
    rank = jnp.where(mask, before, count + index - before)
    return jnp.zeros(n, jnp.int32).at[rank].set(index, unique_indices=True)[:k]


def with_vmap_rule(fn: Callable[..., Any], rule: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with ``rule`` as its batching rule (``jax.custom_batching.custom_vmap``):
    ``rule(axis_size, in_batched, *args) -> (out, out_batched)``.

    ``fn``'s constants (the tables the tactics read, say) are passed to it as
    arguments rather than closed over: a ``lax.cond`` vmapped with a batched
    predicate broadcasts every operand, constants included, and
    ``custom_vmap`` refuses batched constants. When they do come batched,
    ``fn`` is vmapped as it is, without ``rule``.
    """

    def call(*args):
        closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        tree = jax.tree.structure(shape)

        def run(consts, *args):
            flat = jax.core.eval_jaxpr(closed.jaxpr, list(consts), *jax.tree.leaves(args))
            return jax.tree.unflatten(tree, flat)

        batched = custom_vmap(run)

        @batched.def_vmap
        def _(axis_size, in_batched, consts, *args):
            consts_batched, *args_batched = in_batched
            if any(jax.tree.leaves(consts_batched)):
                axes = jax.tree.map(lambda b: 0 if b else None, (consts_batched, *args_batched))
                return (jax.vmap(run, in_axes=axes)(consts, *args),
                        jax.tree.map(lambda _: True, shape))
            return rule(axis_size, args_batched, *args)

        return batched(tuple(closed.consts), *args)

    return call


def flat_rows(axis_size: int, batched: Any, tree: Any) -> Any:
    """A vmapped batch as one: each leaf of ``tree`` ``[S, B, ...]`` (``[B, ...]``
    where ``batched`` says it is not vmapped, broadcast to every ``S``) as
    ``[S * B, ...]``."""
    def flat(x, b):
        x = x if b else jnp.broadcast_to(x, (axis_size, *x.shape))
        return x.reshape(-1, *x.shape[2:])

    return jax.tree.map(flat, tree, batched)


def unflat_rows(axis_size: int, tree: Any) -> tuple[Any, Any]:
    """``flat_rows`` undone on an output ``[S * B, ...]``, with the output's
    ``out_batched`` (every leaf vmapped), as a batching rule returns them."""
    return (jax.tree.map(lambda x: x.reshape(axis_size, -1, *x.shape[1:]), tree),
            jax.tree.map(lambda _: True, tree))


def map_where(fn: Callable[..., Any], needed: jax.Array, *args: Any) -> Any:
    """``jax.vmap(fn)(*args)`` on the rows where ``needed`` bool[B], zeros on the
    others. ``args``: pytrees of arrays with a leading batch axis ``B``.

    The needed rows are read in chunks of ``chunk_size(B)`` in a loop; a batch
    of one row (a one-position search) is a ``lax.cond`` instead, a few XLA
    operations fewer than the loop's gathers and scatters."""

    def rule(axis_size, in_batched, needed, args):
        return unflat_rows(axis_size, run(*flat_rows(axis_size, tuple(in_batched), (needed, args))))

    run = with_vmap_rule(lambda needed, args: _map_where(fn, needed, args), rule)
    return run(needed, args)


def _map_where(fn, needed: jax.Array, args):
    size = needed.shape[0]
    if size == 1:  # one row (a one-position search): a branch, not a loop over chunks
        shapes = jax.eval_shape(jax.vmap(fn), *args)
        return jax.lax.cond(needed[0], jax.vmap(fn),
                            lambda *_: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                                                    shapes), *args)
    chunk = chunk_size(size)
    chunks = -(-size // chunk)
    shapes = jax.eval_shape(fn, *jax.tree.map(lambda x: x[0], args))
    count = jnp.sum(needed, dtype=jnp.int32)
    # The needed rows first, then the others; the last chunk's overhang points
    # past the batch (read clipped, written nowhere).
    order = jnp.concatenate([first_true(needed, size),
                             jnp.full(chunks * chunk - size, size, jnp.int32)])

    def run_chunk(i, out):
        start = i * chunk
        rows = jax.lax.dynamic_slice_in_dim(order, start, chunk)
        keep = start + jnp.arange(chunk) < count
        got = jax.vmap(fn)(*jax.tree.map(lambda x: jnp.take(x, rows, axis=0, mode="clip"),
                                         args))
        return jax.tree.map(
            lambda z, o: z.at[rows].set(
                jnp.where(keep.reshape(-1, *([1] * (o.ndim - 1))), o, jnp.zeros_like(o)),
                mode="drop"),
            out, got)

    out = jax.tree.map(lambda s: jnp.zeros((size, *s.shape), s.dtype), shapes)
    return jax.lax.fori_loop(0, (count + chunk - 1) // chunk, run_chunk, out)
