"""Virtual visits, for leaf parallelism (``agz_jax.search.mctx_loop.parallel``):
a leaf selected but not yet backed up counts as a visit that lost on every
edge of its path, so that the step's next selections lean elsewhere."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mctx

VIRTUAL_LOSS_VALUE = -1.0
"""The value, for the side that chose it, of a pending leaf's virtual visit."""


def add_virtual_visit(tree: mctx.Tree, node: jax.Array, action: jax.Array,
                      active: jax.Array) -> mctx.Tree:
    """One virtual visit of the edge ``(node, action)`` of each active row, for a
    leaf pending below it: the edge and the node count one visit more, and if
    the edge leads to an expanded unfinished position (discount != 0) its mean
    value, for the side that chose it, takes a loss (``VIRTUAL_LOSS_VALUE``),
    by way of the child's value in ``children_values``. The visits are taken
    back by ``take_back_virtual_visits``; the values need not be: the leaves'
    backups rewrite every ``children_values`` entry on their paths
    (``batched_backward`` sets them from the nodes' values, which a virtual
    visit leaves alone).

    Each array is read only after its own update (see ``batched_backward``).
    """
    batch_size = tree.node_visits.shape[0]
    batch_range = jnp.arange(batch_size)
    # Out of range: dropped. (``action >= 0`` always holds; it makes the node's
    # update wait for the selection that read the node's visits.)
    rows = jnp.where(active & (action >= 0), batch_range, batch_size)
    node = jnp.maximum(node, 0)
    visits = tree.children_visits.at[rows, node, action].add(1, mode="drop")
    count = visits[batch_range, node, action] - 1
    reward = tree.children_rewards[batch_range, node, action]
    discount = tree.children_discounts[batch_range, node, action]
    q = reward + discount * tree.children_values[batch_range, node, action]
    lowered = (q * count + VIRTUAL_LOSS_VALUE) / (count + 1.0)
    value = (lowered - reward) / jnp.where(discount == 0, 1.0, discount)
    valued = jnp.where(active & (discount != 0), batch_range, batch_size)
    return tree.replace(
        children_visits=visits,
        node_visits=tree.node_visits.at[rows, node].add(1, mode="drop"),
        children_values=tree.children_values.at[valued, node, action].set(value, mode="drop"))


def take_back_virtual_visits(tree: mctx.Tree, parent: jax.Array, action: jax.Array,
                             active: jax.Array) -> mctx.Tree:
    """Takes back the virtual visits of the paths from each row's root to its
    leaves' edges ``(parent, action)`` (int32[B, K], where ``active`` bool[B, K])
    that ``select_leaves`` added, all leaves at once (paths that share an edge
    take back one visit each: the updates add up)."""
    batch_size = tree.node_visits.shape[0]
    batch_range = jnp.arange(batch_size)[:, None]

    def cond_fun(loop_state):
        return jnp.any(loop_state[1] != mctx.Tree.NO_PARENT)

    def body_fun(loop_state):
        tree, node, action = loop_state
        on = node != mctx.Tree.NO_PARENT
        rows = jnp.where(on, batch_range, batch_size)
        safe = jnp.maximum(node, 0)
        tree = tree.replace(
            children_visits=tree.children_visits.at[rows, safe, action].add(-1, mode="drop"),
            node_visits=tree.node_visits.at[rows, safe].add(-1, mode="drop"))
        return (tree, jnp.where(on, tree.parents[batch_range, safe], node),
                jnp.where(on, tree.action_from_parent[batch_range, safe], action))

    start = jnp.where(active, parent, mctx.Tree.NO_PARENT).astype(jnp.int32)
    tree, _, _ = jax.lax.while_loop(cond_fun, body_fun, (tree, start, action))
    return tree

