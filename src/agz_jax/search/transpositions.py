"""Transpositions: a search that evaluates each position of its tree once.

Two orders of the same moves reach the same position, and a search tree holds
such positions at several nodes (7% to 84% of a 4,096-node tree in the
engine's searches of docs/performance.md). A position's prior and value
depend on the position alone, so a node expanded into a position that
another node below the root holds already can take that node's prior logits
and raw value instead of another call of the net.

* ``Expansion``: a ``recurrent_fn`` in parts (the move, the evaluation, the
  output, the position's code), so that the evaluation can be skipped;
* ``Transpositions``: the table a tree carries in its ``extra_data``, each
  node's code and a key to find it by, and a hash table of the keys
  (``find``, ``recorded``); a carried subtree keeps it (``carried``), a fresh
  tree starts empty (``cleared``);
* ``with_transpositions``: a tree made to carry it.

The search loop (``agz_jax.search.mctx_loop``) reads and writes the table as
it expands nodes; nothing here touches ``mctx._src``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import chex
import jax
import jax.numpy as jnp
import mctx
import numpy as np


@dataclasses.dataclass(frozen=True)
class Expansion:
    """A ``recurrent_fn`` in parts, so that a search can skip the evaluation of a
    position its tree holds already. Called whole, it is mctx's ``recurrent_fn``.

    Attributes:
      move: ``(params, key, action[B], embedding[B]) -> child[B]``, the child
        positions' embeddings.
      evaluate: ``(params, key, child[B]) -> (prior_logits[B, A], value[B])``,
        the costly part: it must depend on the child's position alone (what
        ``code`` packs), so that one evaluation serves every node of it.
      output: ``(embedding[B], child[B], prior_logits, value) ->
        mctx.RecurrentFnOutput``, the edge's reward and discount; given a
        node's own stored ``raw_values`` as ``value``, it returns it unchanged.
      code: ``embedding[...] -> uint32[..., W]``, the position packed into W
        words: equal exactly for positions ``evaluate`` cannot tell apart, and
        never all zeros for a child (the code of a node not yet expanded).
    """

    move: Callable
    evaluate: Callable
    output: Callable
    code: Callable

    def __call__(self, params, rng_key, action, embedding):
        child = self.move(params, rng_key, action, embedding)
        prior_logits, value = self.evaluate(params, rng_key, child)
        return self.output(embedding, child, prior_logits, value), child


@chex.dataclass(frozen=True)
class Transpositions:
    """A tree's ``extra_data`` when its search evaluates each position once
    (``with_transpositions``): the position code (``Expansion.code``) of each
    node that was evaluated, and a key of it to look it up by (zeros at the
    other nodes: those that took an evaluated node's prior and value, the
    root, the nodes not yet expanded), and the search's own extra data
    (Gumbel's noise), which mctx's Gumbel selection still finds as
    ``root_gumbel``. So a position is recorded at one node, the one every
    later node of it finds."""

    keys: jax.Array  # uint32[B, N]
    codes: jax.Array  # uint32[B, N, W]
    slots: jax.Array  # int32[B, S]: the node recorded in each slot, -1 for none
    inner: object = None

    @property
    def root_gumbel(self):
        return self.inner.root_gumbel

    def _window(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(slot int32[B, PROBES], node int32[B, PROBES]): the slots where a
        key is recorded, ``PROBES`` from the key's own, and their nodes."""
        size = self.slots.shape[1]
        slot = ((key[:, None] + jnp.arange(PROBES, dtype=jnp.uint32))
                & jnp.uint32(size - 1)).astype(jnp.int32)
        return slot, jnp.take_along_axis(self.slots, slot, axis=1)

    def find(self, code: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(key uint32[B], known bool[B], source int32[B]) of each row's child
        code uint32[B, W]: its key, whether a node of the row holds that code,
        and which (0 where none does)."""
        batch_size = self.keys.shape[0]
        key = _mix(code)
        # The key's slots (a few reads, whatever the tree's size): of the nodes
        # there that hold the key (more than one only where two positions'
        # keys collide), the last, a max, which vectorises where an argmax
        # would not.
        _, nodes = self._window(key)
        held = jnp.take_along_axis(self.keys, jnp.maximum(nodes, 0), axis=1)
        source = jnp.max(jnp.where((nodes >= 0) & (held == key[:, None]), nodes, -1), axis=-1)
        found, source = source >= 0, jnp.maximum(source, 0)
        known = found & jnp.all(self.codes[jnp.arange(batch_size), source] == code, axis=-1)
        return key, known, source

    def recorded(self, rows: jax.Array, node: jax.Array, key: jax.Array, code: jax.Array
                 ) -> Transpositions:
        """The table with ``node`` of each of ``rows`` (out of range: dropped)
        holding ``key`` and ``code``: a node whose position was evaluated. Its
        slot is the first free one of the key's; where all ``PROBES`` are
        taken, the node is not recorded (its position is evaluated again if
        reached again: the tree is the same, the net called once more)."""
        batch_size = self.keys.shape[0]
        slot, nodes = self._window(key)
        free = nodes < 0
        at = jnp.take_along_axis(slot, jnp.argmax(free, axis=-1)[:, None], axis=1)[:, 0]
        slot_rows = jnp.where(jnp.any(free, axis=-1), rows, batch_size)
        return self.replace(keys=self.keys.at[rows, node].set(key, mode="drop"),
                            codes=self.codes.at[rows, node].set(code, mode="drop"),
                            slots=self.slots.at[slot_rows, at].set(node, mode="drop"))

    def carried(self, gather: Callable, renumber: Callable) -> Transpositions:
        """The table of a subtree carried to the next search: ``gather(x,
        fill)`` renumbers a ``[B, N, ...]`` array's nodes and ``renumber(index)``
        maps node numbers ``[B, ...]`` to the subtree's (-1 for a node not
        carried; ``mctx_loop.reuse``). The new root's entries are cleared: never
        a source, as its prior may carry noise."""
        root = mctx.Tree.ROOT_INDEX
        slots = renumber(self.slots)
        return self.replace(keys=gather(self.keys, 0).at[:, root].set(0),
                            codes=gather(self.codes, 0).at[:, root].set(0),
                            slots=jnp.where(slots == root, -1, slots))

    def cleared(self) -> Transpositions:
        """The table of a tree none of whose nodes is expanded."""
        return self.replace(keys=jnp.zeros_like(self.keys), codes=jnp.zeros_like(self.codes),
                            slots=jnp.full_like(self.slots, -1))


def with_transpositions(tree: mctx.Tree, code_words: int) -> mctx.Tree:
    """``tree`` made to share evaluations between transpositions in
    ``mctx_loop.continue_tree`` (whose ``recurrent_fn`` must then be an
    ``Expansion`` with codes of ``code_words`` words): a node expanded into a
    position that another node below the root holds already (the same code:
    for the searcher, the same stones, side to move and last move) takes that
    node's prior logits and raw value, and the net is not called unless
    another row of the batch needs it. The trees are the ones searched
    without, up to the net's rounding between two calls on one position.

    The root is never a source: its prior may carry exploration noise.
    """
    if isinstance(tree.extra_data, Transpositions):
        return tree
    batch_size, num_nodes = tree.node_visits.shape
    keys = jnp.zeros((batch_size, num_nodes), jnp.uint32)
    codes = jnp.zeros((batch_size, num_nodes, code_words), jnp.uint32)
    # At least twice the nodes, a power of two (a slot is the key's low bits).
    slots = jnp.full((batch_size, 1 << (2 * num_nodes - 1).bit_length()), -1, jnp.int32)
    return tree.replace(extra_data=Transpositions(keys=keys, codes=codes, slots=slots,
                                                  inner=tree.extra_data))


def _mix(code: jax.Array) -> jax.Array:
    """uint32[...]: a key of each code uint32[..., W] (equal codes, equal keys):
    each word offset by a random constant of its place and mixed by
    MurmurHash3's finaliser, then summed."""
    offsets = jnp.asarray(np.random.default_rng(_MIX_SEED).integers(
        0, 2**32, size=code.shape[-1], dtype=np.uint32))
    h = code + offsets
    h = (h ^ (h >> 16)) * jnp.uint32(0x85EBCA6B)
    h = (h ^ (h >> 13)) * jnp.uint32(0xC2B2AE35)
    h = h ^ (h >> 16)
    return jnp.sum(h, axis=-1, dtype=jnp.uint32)


PROBES = 8
"""The slots of a key's hash-table window: a position is recorded in the first
free one. At most half the slots are taken, so a full window is rare, and it
costs only a repeated evaluation."""

_MIX_SEED = 20261129
"""The seed of ``_mix``'s offsets (any fixed value)."""
