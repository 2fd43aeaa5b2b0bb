"""Leaf parallelism in one tree (``parallel_steps``): K leaves a step, selected
under virtual loss (``agz_jax.search.mctx_loop.virtual``) and evaluated in one
call of the net. With K = 1 it grows mctx's loop's tree."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mctx

from agz_jax.search.mctx_loop.steps import (
    Selection,
    batched_backward,
    node_count,
    select_leaves,
    write_expansion,
)
from agz_jax.search.mctx_loop.virtual import take_back_virtual_visits


def _expand_leaves(params, rng_key, tree: mctx.Tree, recurrent_fn, parent, action, node,
                   active, embedding):
    """``expand`` of K leaves a row, in one call of ``recurrent_fn`` on ``B * K``
    positions; ``parent``, ``action``, ``node``, ``active``: [B, K], the leaves
    of a row distinct where active; ``embedding``: the parents' ``[B, K, ...]``.
    With K = 1, ``expand``'s tree."""
    batch_size, num_leaves = parent.shape
    rows = jnp.where(active, jnp.arange(batch_size)[:, None], batch_size)

    def flat(x):
        return x.reshape((batch_size * num_leaves,) + x.shape[2:])

    def unflat(x):
        return x.reshape((batch_size, num_leaves) + x.shape[1:])

    step, embedding = recurrent_fn(params, rng_key, flat(action), jax.tree.map(flat, embedding))
    step, embedding = jax.tree.map(unflat, step), jax.tree.map(unflat, embedding)
    return write_expansion(tree, rows, parent, action, node, step, embedding)


def parallel_steps(params, rng_key: jax.Array, tree: mctx.Tree, *, recurrent_fn,
                   selection: Selection, until, leaves: int) -> mctx.Tree:
    """Leaf parallelism with virtual loss: ``continue_tree`` in steps of ``leaves``
    (K) leaves a row, each step's leaves evaluated in one call of
    ``recurrent_fn`` (a batch of ``B * K``), until each row's root has
    ``until`` simulations.

    A step selects K leaves one after another (``select_leaves``), each with a
    virtual visit (``add_virtual_visit``) on every edge of its path while it
    is pending, so that the next selections lean elsewhere; expands the
    leaves in one call; takes the virtual visits back; and backs the leaves up
    one after another.
    Two selections that end on the same unexpanded edge (a collision) make
    one node: the later one is dropped (not evaluated into the tree, not backed
    up), so a row's root visits stay its nodes less one, as in mctx's loop. A
    step selects at most the leaves the row's budget has left. With K = 1
    nothing is pending, and the tree is mctx's loop's (the same
    keys, node numbers and arithmetic; tested).

    For PUCT-like selections: Gumbel's root selection reads the visit counts
    as its sequential-halving schedule, which virtual visits would disturb.
    """
    batch_size = tree.node_visits.shape[0]
    max_depth = tree.children_visits.shape[1] - 1
    num_leaves = int(leaves)
    if num_leaves < 1:
        raise ValueError(f"leaves must be a positive integer, got {leaves!r}")
    lower = jnp.tril(jnp.ones((num_leaves, num_leaves), bool), -1)  # [j, i]: i < j

    def step_fun(loop_state):
        step, rng_key, tree, count = loop_state
        rng_key, simulate_key, expand_key = jax.random.split(rng_key, 3)
        wanted = jnp.clip(until + 1 - count, 0, num_leaves)  # [B]: leaves this step

        def select_fun(j, carry):
            tree, key, parents, actions, children, embeddings = carry
            parent, action, child, embedding, tree = select_leaves(
                jax.random.split(key, batch_size), tree, selection, max_depth,
                virtual=j < wanted)
            put = lambda xs, x: xs.at[:, j].set(x)  # noqa: E731
            return (tree, jax.random.fold_in(key, 1), put(parents, parent),
                    put(actions, action), put(children, child),
                    jax.tree.map(put, embeddings, embedding))

        slots = jnp.zeros((batch_size, num_leaves), jnp.int32)
        embeddings = jax.tree.map(
            lambda x: jnp.zeros((batch_size, num_leaves) + x.shape[2:], x.dtype),
            tree.embeddings)
        tree, _, parents, actions, children, embeddings = jax.lax.fori_loop(
            0, num_leaves, select_fun,
            (tree, simulate_key, slots, slots, slots, embeddings))
        selected = jnp.arange(num_leaves)[None, :] < wanted[:, None]  # [B, K]
        # Collisions: a leaf whose edge an earlier leaf of the step holds.
        same = ((parents[:, :, None] == parents[:, None, :])
                & (actions[:, :, None] == actions[:, None, :]))  # [B, j, i]
        duplicate = jnp.any(same & lower & selected[:, None, :], axis=-1)
        active = selected & ~duplicate
        fresh = active & (children == mctx.Tree.UNVISITED)
        index = count[:, None] + jnp.cumsum(fresh, axis=1) - 1
        node = jnp.where(fresh, jnp.minimum(index, max_depth), children)
        tree = _expand_leaves(params, expand_key, tree, recurrent_fn, parents, actions, node,
                              active, embeddings)
        # After the expansion, which writes the parents this reads (the other
        # order would make XLA copy them), and before the backups, which count
        # the visits.
        tree = take_back_virtual_visits(tree, parents, actions, selected)

        def backup_fun(j, tree):
            return batched_backward(tree, jnp.where(active[:, j], node[:, j],
                                                    mctx.Tree.ROOT_INDEX))

        tree = jax.lax.fori_loop(0, num_leaves, backup_fun, tree)
        return step + 1, rng_key, tree, count + jnp.sum(fresh, axis=1, dtype=jnp.int32)

    first = node_count(tree)
    max_steps = jnp.maximum(until + 1 - jnp.min(first), 0)  # a step makes >= 1 node

    def cond_fun(loop_state):
        step, _, _, count = loop_state
        return (step < max_steps) & jnp.any(count <= until)

    _, _, tree, _ = jax.lax.while_loop(cond_fun, step_fun,
                                       (jnp.int32(0), rng_key, tree, first))
    return tree

