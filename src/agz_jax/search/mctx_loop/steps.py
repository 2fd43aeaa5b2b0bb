"""One simulation a step, written for the batch: select a leaf
(``select_leaves``), expand it (``expand``; ``expand_known`` in a tree
``with_transpositions``), back it up (``batched_backward``).

These are mctx's ``simulate``, ``expand`` and ``backward`` with mctx's
arithmetic in mctx's order, so the trees are mctx's (``tests/test_search.py``),
but written so that XLA updates the tree's arrays in place: mctx's loop reads
arrays after an op that writes them (the embeddings, the children's indices,
the visit counts), which makes XLA copy them on every simulation, a cost that
grows with the tree's capacity (about 2.5 times at 8192 nodes on a 15x15
board). Here a simulation costs the same in a tree of 64 nodes or 8192.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import mctx
from mctx._src import search as mctx_search

from agz_jax.search.mctx_loop.virtual import add_virtual_visit
from agz_jax.search.transpositions import Expansion, Transpositions


class Selection(NamedTuple):
    """A search's action selection, unbatched, as mctx takes it: ``root(key,
    tree, node)`` at the root, ``interior(key, tree, node, depth)`` below it."""

    root: Callable
    interior: Callable


def mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Give illegal actions the lowest finite logit (prior exactly 0).

    A position with no legal move (a finished game) keeps uniform logits: its
    children are absorbing copies of it.
    """
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    any_legal = jnp.any(legal, axis=-1, keepdims=True)
    masked = jnp.where(legal, logits, jnp.finfo(logits.dtype).min)
    return jnp.where(any_legal, masked, jnp.zeros_like(logits))

def batched_backward(tree: mctx.Tree, leaf_index: jax.Array) -> mctx.Tree:
    """mctx's ``backward``, written for the batch: the same trees.

    mctx's is ``jax.vmap`` of a ``lax.while_loop`` carrying one tree; under
    vmap the batched predicate turns into a ``select`` over every carried tree
    array ``[B, N, A]`` on every step up the path. Here one loop runs while any
    row is below its root, and each step scatters only the ``B`` path entries;
    a row already at its root gets an out-of-range batch index, so its update
    is dropped. The arithmetic is mctx's, in mctx's order. Each array a step
    writes is read at most once, before the write (the counts are incremented
    in place, the child's value rides in the carry), so that XLA need not copy
    it on every step.

    Args:
      tree: the batched tree ``[B, ...]``.
      leaf_index: int32[B], the node of each row to back up from.
    """
    batch_size = tree.node_visits.shape[0]
    batch_range = jnp.arange(batch_size)
    root = mctx.Tree.ROOT_INDEX

    def cond_fun(loop_state):
        return jnp.any(loop_state[2] != root)

    def body_fun(loop_state):
        # ``value``: node ``index``'s value, as the last step wrote it.
        tree, leaf_value, index, value = loop_state
        active = index != root
        rows = jnp.where(active, batch_range, batch_size)  # out of range: dropped
        parent = tree.parents[batch_range, index]
        action = tree.action_from_parent[batch_range, index]
        # Each array written here is read at most once, and before its write:
        # XLA copies an array that an update could overwrite before another
        # read of it, on every step. So the parent's count is read after its
        # increment, and the child's value comes from the carry.
        node_visits = tree.node_visits.at[rows, parent].add(1, mode="drop")
        count = node_visits[batch_range, parent] - 1
        reward = tree.children_rewards[batch_range, parent, action]
        new_leaf_value = (reward + tree.children_discounts[batch_range, parent, action]
                          * leaf_value)
        parent_value = (tree.node_values[batch_range, parent] * count
                        + new_leaf_value) / (count + 1.0)
        tree = tree.replace(
            node_values=tree.node_values.at[rows, parent].set(parent_value, mode="drop"),
            node_visits=node_visits,
            children_values=tree.children_values.at[rows, parent, action].set(
                value, mode="drop"),
            children_visits=tree.children_visits.at[rows, parent, action].add(
                1, mode="drop"))
        return (tree, jnp.where(active, new_leaf_value, leaf_value),
                jnp.where(active, parent, index), jnp.where(active, parent_value, value))

    leaf_index = jnp.asarray(leaf_index, jnp.int32)
    leaf_value = tree.node_values[batch_range, leaf_index]
    loop_state = (tree, leaf_value, leaf_index, leaf_value)
    tree, _, _, _ = jax.lax.while_loop(cond_fun, body_fun, loop_state)
    return tree


def node_count(tree: mctx.Tree) -> jax.Array:
    """int32[B]: the nodes each row of the tree holds (its root's visits)."""
    return jnp.sum(tree.node_visits > 0, axis=-1).astype(jnp.int32)


def start_tree(root: mctx.RootFnOutput, capacity: int, invalid_actions: jax.Array | None = None,
               extra_data=None) -> mctx.Tree:
    """An mctx tree holding only ``root``, with room for ``capacity`` simulations."""
    if invalid_actions is None:
        invalid_actions = jnp.zeros_like(root.prior_logits)
    return mctx_search.instantiate_tree_from_root(
        root, capacity, root_invalid_actions=invalid_actions, extra_data=extra_data)


def expand(params, rng_key, tree: mctx.Tree, recurrent_fn, parent_index, action,
            next_node_index, active, embedding=None):
    """mctx's ``expand``, with rows where ``active`` is False left untouched.

    The same arithmetic as mctx's (so, with every row active, the same tree bit
    for bit); an inactive row's writes go to an out-of-range batch index and
    are dropped. ``embedding``: the parents' embeddings where the caller has
    them (``select_leaves``); else they are read from the tree.
    """
    batch_size = tree.node_visits.shape[0]
    batch_range = jnp.arange(batch_size)
    rows = jnp.where(active, batch_range, batch_size)
    if embedding is None:
        embedding = jax.tree.map(lambda x: x[batch_range, parent_index], tree.embeddings)
    step, embedding = recurrent_fn(params, rng_key, action, embedding)
    chex.assert_shape(step.prior_logits, [batch_size, tree.num_actions])
    chex.assert_shape([step.reward, step.discount, step.value], [batch_size])
    return write_expansion(tree, rows, parent_index, action, next_node_index, step, embedding)


def expand_known(params, rng_key, tree: mctx.Tree, expansion: Expansion, parent_index,
                  action, next_node_index, active, embedding) -> mctx.Tree:
    """``expand`` for a tree ``with_transpositions``: the net is called only if
    some row's child is a position no node below the root holds (one lookup
    of its key in the row's keys, then a comparison of the codes).

    Only the transpositions' own arrays and the source's prior and value are
    read here: a read of the tree's embeddings after the selection's loop
    would make XLA copy them on every simulation."""
    batch_size = tree.node_visits.shape[0]
    batch_range = jnp.arange(batch_size)
    rows = jnp.where(active, batch_range, batch_size)
    child = expansion.move(params, rng_key, action, embedding)
    code = expansion.code(child)
    table = tree.extra_data
    key, known, source = table.find(code)
    logits = tree.children_prior_logits[batch_range, source]
    value = tree.raw_values[batch_range, source]

    def evaluate():
        fresh_logits, fresh_value = expansion.evaluate(params, rng_key, child)
        return (jnp.where(known[:, None], logits, fresh_logits),
                jnp.where(known, value, fresh_value))

    logits, value = jax.lax.cond(jnp.all(known), lambda: (logits, value), evaluate)
    step = expansion.output(embedding, child, logits, value)
    chex.assert_shape(step.prior_logits, [batch_size, tree.num_actions])
    # Only a position evaluated here is recorded: its node is the one every
    # later node of it finds. The write then depends on the read, so that XLA
    # updates the table in place (else it copied the codes twice a simulation).
    recorded = jnp.where(known, batch_size, rows)
    tree = tree.replace(extra_data=table.recorded(recorded, next_node_index, key, code))
    return write_expansion(tree, rows, parent_index, action, next_node_index, step, child)


def write_expansion(tree: mctx.Tree, rows, parent, action, node, step, embedding) -> mctx.Tree:
    """Write expanded nodes into the tree: ``node`` (a child of ``parent`` by
    ``action``) gets the step's prior, value and embedding, the edge its reward
    and discount. ``rows``: each write's batch row (out of range: dropped); all
    index arrays share one shape, [B] or [B, K]."""

    def set_node(x, vals):
        return x.at[rows, node].set(vals, mode="drop")

    def set_edge(x, vals):
        return x.at[rows, parent, action].set(vals, mode="drop")

    return tree.replace(
        children_prior_logits=set_node(tree.children_prior_logits, step.prior_logits),
        raw_values=set_node(tree.raw_values, step.value),
        node_values=set_node(tree.node_values, step.value),
        # A node expanded again (only at max_depth) counts one visit more.
        node_visits=tree.node_visits.at[rows, node].add(1, mode="drop"),
        embeddings=jax.tree.map(set_node, tree.embeddings, embedding),
        children_index=set_edge(tree.children_index, node),
        children_rewards=set_edge(tree.children_rewards, step.reward),
        children_discounts=set_edge(tree.children_discounts, step.discount),
        parents=set_node(tree.parents, parent),
        action_from_parent=set_node(tree.action_from_parent, action))


def select_leaves(rng_keys: jax.Array, tree: mctx.Tree, selection: Selection,
                  max_depth: int, virtual: jax.Array | None = None):
    """mctx's ``simulate`` for the whole batch in one loop: the same
    ``(parent_index, action)`` per row, from the same keys.

    mctx's is ``jax.vmap`` of a ``lax.while_loop`` that closes over the tree,
    and the step then reads the tree where the selection ended (the parent's
    embedding, its child's index) before writing the new node there; XLA
    copies the arrays so read and written (the embeddings, the children's
    indices) on every simulation, a cost that grows with the tree's capacity.
    Here the loop itself carries what the step needs of the node it stands
    on, so that nothing reads those arrays after it.

    mctx switches between the root's and the interior's selection with a
    ``lax.cond`` on the depth; under ``vmap`` that runs both on every step.
    Every row is at the root on the first step and below it on the others, so
    here the first step is taken with the root's selection alone and the loop
    with the interior's: the same choices (a row stopped before a step
    ignores it), and for one position 1.11x the simulations/s with PUCT,
    1.06x with Gumbel (docs/performance.md).

    Args:
      rng_keys: one key per row (mctx's ``simulate_keys``).
      tree: the batched tree ``[B, ...]``.
      selection: the unbatched root and interior selections (``Selection``).
      max_depth: the depth at which a selection stops (mctx's).
      virtual: bool[B] or None. Where True, each edge the row's selection
        takes gets a virtual visit (``add_virtual_visit``) as it is taken, for
        leaf parallelism: the tree rides in the loop (each step reads what it
        then writes) and comes back as a fifth output.

    Returns:
      (parent_index int32[B], action int32[B], child int32[B], embedding): the
      node the selection ended on, the action it chose there, that action's
      child (``Tree.UNVISITED`` unless ``max_depth`` stopped the selection) and
      the node's embedding; and with ``virtual``, the tree.
    """
    batch_size = tree.node_visits.shape[0]
    batch_range = jnp.arange(batch_size)
    at_root = jax.vmap(lambda key, tree, node, depth: selection.root(key, tree, node))
    below = jax.vmap(selection.interior)

    def embedding_at(tree, node):
        return jax.tree.map(lambda x: x[batch_range, node], tree.embeddings)

    def cond_fun(loop_state):
        return jnp.any(loop_state[5])

    def body_fun(loop_state, select=below):
        keys, node_index, action, next_node_index, depth, continuing, embedding, *rest = (
            loop_state)
        current = rest[0] if rest else tree
        split = jax.vmap(jax.random.split)(keys)
        new_keys, selection_keys = split[:, 0], split[:, 1]
        node = next_node_index
        new_action = select(selection_keys, current, node, depth)
        new_next = current.children_index[batch_range, node, new_action]
        new_depth = depth + 1
        going_on = (new_next != mctx.Tree.UNVISITED) & (new_depth < max_depth)

        def keep(new, old):
            if batch_size == 1:  # the loop runs only while its one row continues
                return new
            where = continuing.reshape(continuing.shape + (1,) * (new.ndim - 1))
            return jnp.where(where, new, old)

        out = (keep(new_keys, keys), keep(node, node_index), keep(new_action, action),
               keep(new_next, next_node_index), keep(new_depth, depth),
               continuing & going_on, jax.tree.map(keep, embedding_at(current, node), embedding))
        if rest:
            out += (add_virtual_visit(current, node, new_action, continuing & virtual),)
        return out

    none = jnp.full((batch_size,), mctx.Tree.NO_PARENT, jnp.int32)
    root = jnp.full((batch_size,), mctx.Tree.ROOT_INDEX, jnp.int32)
    loop_state = (rng_keys, none, none, root,
                  jnp.zeros((batch_size,), tree.children_prior_logits.dtype),
                  jnp.ones((batch_size,), bool), embedding_at(tree, root))
    if virtual is not None:
        loop_state += (tree,)
    loop_state = body_fun(loop_state, select=at_root)  # every row continues into the root
    _, parent_index, action, child, _, _, embedding, *rest = jax.lax.while_loop(
        cond_fun, body_fun, loop_state)
    return (parent_index, action, child, embedding, *rest)


def _simulation(params, recurrent_fn, selection: Selection, max_depth: int,
                first: jax.Array, until):
    """Simulation ``i`` as a ``fori_loop`` body over ``(rng_key, tree)``: select
    a leaf, expand it into node ``first + i`` of each row, back up; a row
    whose next node would be past ``until`` (it has ``until`` simulations
    already) sits the simulation out."""

    def body_fun(i, loop_state):
        rng_key, tree = loop_state
        batch_size = tree.node_visits.shape[0]
        rng_key, simulate_key, expand_key = jax.random.split(rng_key, 3)
        simulate_keys = jax.random.split(simulate_key, batch_size)
        parent_index, action, next_node_index, embedding = select_leaves(
            simulate_keys, tree, selection, max_depth)
        node = first + i
        active = node <= until
        next_node_index = jnp.where(next_node_index == mctx.Tree.UNVISITED,
                                    jnp.minimum(node, max_depth), next_node_index)
        expand_fn = expand_known if isinstance(tree.extra_data, Transpositions) else expand
        tree = expand_fn(params, expand_key, tree, recurrent_fn, parent_index, action,
                      next_node_index, active, embedding)
        tree = batched_backward(tree, jnp.where(active, next_node_index, mctx.Tree.ROOT_INDEX))
        return rng_key, tree

    return body_fun



def one_leaf_steps(params, rng_key: jax.Array, tree: mctx.Tree, *, recurrent_fn,
                   selection: Selection, until) -> mctx.Tree:
    """Simulate one leaf at a time on each row until its root has ``until``
    simulations: mctx's loop (``continue_tree`` with ``leaves=0``)."""
    max_depth = tree.children_visits.shape[1] - 1
    first = node_count(tree)
    body_fun = _simulation(params, recurrent_fn, selection, max_depth, first, until)
    steps = jnp.maximum(until + 1 - jnp.min(first), 0)
    _, tree = jax.lax.fori_loop(0, steps, body_fun, (rng_key, tree))
    return tree
