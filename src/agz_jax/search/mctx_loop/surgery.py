"""Tree surgery between moves: the subtree under the move played, re-indexed
(``reuse``), under the next search's fresh root (``with_root``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mctx

from agz_jax.search.mctx_loop.steps import node_count, start_tree
from agz_jax.search.transpositions import Transpositions


def reuse(tree: mctx.Tree, action: jax.Array) -> mctx.Tree:
    """The subtree under each row's ``action`` (or line of actions), re-indexed
    into a tree of the same size.

    Node ``n`` of the subtree keeps its statistics, children and embedding and
    becomes node ``m``, where ``m`` counts the subtree's nodes before ``n``:
    the subtree's root (the child played) becomes node 0, and, since a node is
    created after its parent, every node's parent still comes before it, so
    the search can go on expanding nodes ``node_count, node_count + 1, ...``.
    Every other node is cleared as ``start_tree`` leaves it. A row whose child
    was never expanded comes back with no node at all (``node_count`` 0): give
    it a root with ``with_root``.

    Args:
      tree: a batched tree ``[B, N, ...]``.
      action: int32[B], the move played at each row's root; or int32[B, K],
        the K moves played from it, of which the first is a move and the later
        ones may be -1 (none): the subtree at the end of the line is carried in
        one pass (ours and the opponent's reply, say), not in one a move.
    """
    batch_size, num_nodes = tree.node_visits.shape
    batch_range = jnp.arange(batch_size)
    line = jnp.reshape(action, (batch_size, -1))
    new_root = tree.children_index[batch_range, mctx.Tree.ROOT_INDEX, line[:, 0]]
    for k in range(1, line.shape[1]):
        move = line[:, k]
        below = tree.children_index[batch_range, jnp.maximum(new_root, 0), jnp.maximum(move, 0)]
        new_root = jnp.where((move >= 0) & (new_root >= 0), below, new_root)

    # Membership in index order: a node is in the subtree if it is its root or
    # its parent (an earlier node) is in it.
    def member(n, inside):
        parent = tree.parents[:, n]
        mine = (n == new_root) | ((parent >= 0) & inside[batch_range, jnp.maximum(parent, 0)])
        return inside.at[:, n].set(mine & (tree.node_visits[:, n] > 0))

    inside = jax.lax.fori_loop(1, num_nodes, member, jnp.zeros((batch_size, num_nodes), bool))
    new_index = jnp.where(inside, jnp.cumsum(inside, axis=-1) - 1, num_nodes)  # [B, N]
    old_index = jnp.full((batch_size, num_nodes), num_nodes, jnp.int32).at[
        batch_range[:, None], new_index].set(jnp.arange(num_nodes), mode="drop")
    kept = old_index < num_nodes  # [B, N]: new slot m holds a node
    take = jnp.minimum(old_index, num_nodes - 1)

    def gather(x, fill):
        got = jnp.take_along_axis(x, take.reshape(take.shape + (1,) * (x.ndim - 2)), axis=1)
        keep = kept.reshape(kept.shape + (1,) * (x.ndim - 2))
        return jnp.where(keep, got, jnp.asarray(fill, x.dtype))

    def renumber(index, keep):
        moved = jnp.take_along_axis(new_index, jnp.maximum(index, 0).reshape(batch_size, -1),
                                    axis=1).reshape(index.shape)
        return jnp.where(keep & (index >= 0), moved, index).astype(jnp.int32)

    children = gather(tree.children_index, mctx.Tree.UNVISITED)
    parents = gather(tree.parents, mctx.Tree.NO_PARENT)
    parents = renumber(parents, kept).at[:, mctx.Tree.ROOT_INDEX].set(mctx.Tree.NO_PARENT)
    from_parent = gather(tree.action_from_parent, mctx.Tree.NO_PARENT).at[
        :, mctx.Tree.ROOT_INDEX].set(mctx.Tree.NO_PARENT)
    extra_data = tree.extra_data
    if isinstance(extra_data, Transpositions):
        def carried_as(index):  # node numbers [B, M]: the subtree's, -1 if not carried
            moved = renumber(index, True)
            return jnp.where(moved < num_nodes, moved, -1)

        extra_data = extra_data.carried(gather, carried_as)
    return tree.replace(
        extra_data=extra_data,
        node_visits=gather(tree.node_visits, 0),
        raw_values=gather(tree.raw_values, 0),
        node_values=gather(tree.node_values, 0),
        parents=parents,
        action_from_parent=from_parent,
        children_index=renumber(children, kept[..., None]),
        children_prior_logits=gather(tree.children_prior_logits, 0),
        children_values=gather(tree.children_values, 0),
        children_visits=gather(tree.children_visits, 0),
        children_rewards=gather(tree.children_rewards, 0),
        children_discounts=gather(tree.children_discounts, 0),
        embeddings=jax.tree.map(lambda x: gather(x, 0), tree.embeddings))


def with_root(tree: mctx.Tree, root: mctx.RootFnOutput, invalid_actions: jax.Array
              ) -> mctx.Tree:
    """The next search's tree: each row's carried subtree (``reuse``) under the
    fresh ``root``'s prior and invalid actions, or, where nothing was carried,
    ``root`` alone (as ``start_tree`` makes it).

    The root's prior is always the fresh one, so self-play's exploration noise
    is drawn anew on every move; a carried root keeps its visits and its
    backed-up value.
    """
    extra_data = tree.extra_data
    if isinstance(extra_data, Transpositions):  # a fresh row's nodes: none expanded
        extra_data = extra_data.cleared()
    fresh = start_tree(root, tree.node_visits.shape[1] - 1, invalid_actions, extra_data)
    carried = node_count(tree) > 0

    def pick(old, new):
        return jnp.where(carried.reshape(carried.shape + (1,) * (old.ndim - 1)), old, new)

    tree = jax.tree.map(pick, tree, fresh)
    root_index = mctx.Tree.ROOT_INDEX
    return tree.replace(
        children_prior_logits=tree.children_prior_logits.at[:, root_index].set(
            root.prior_logits),
        root_invalid_actions=jnp.asarray(invalid_actions, tree.root_invalid_actions.dtype))
