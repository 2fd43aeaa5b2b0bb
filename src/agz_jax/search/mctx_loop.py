"""The search loop, on mctx's private API (pinned: mctx==0.0.71).

mctx's public ``mctx.search`` runs a fixed number of simulations from an empty
tree; this project needs what it does not give:

* a simulation written for the batch (``select_leaves``, ``batched_backward``):
  the same trees (mctx's arithmetic in mctx's order; the backed-up values equal
  to the rounding of two programs), without copying tree arrays on every step. XLA
  copies an array that one op writes in place while another may still read
  it; mctx's loop has such arrays (the embeddings, the children's indices,
  the visit counts), so its simulations slow down as the tree's capacity
  grows (about 2.5 times at 8192 nodes on a 15x15 board). Here a simulation
  costs the same in a tree of 64 nodes or 8192;
* searches in chunks that share one tree (``start_tree``, ``continue_tree``),
  so the engine can stop when its time is up;
* Gumbel MuZero's policy on that loop (``gumbel_policy``);
* leaf parallelism in one tree (``parallel_steps``): K leaves a step, selected
  under virtual loss and evaluated in one call of the net (with K = 1, mctx's
  loop's tree);
* transpositions (``agz_jax.search.transpositions``): a position the tree
  holds already, reached by another order of the same moves, takes the
  prior and value of its node instead of another call of the net
  (``_expand_known``).

Everything that touches ``mctx._src`` lives here, so an mctx upgrade is checked
in one place (``tests/test_search.py`` compares these against mctx's own
``search`` and ``gumbel_muzero_policy``, tree for tree).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import mctx
from mctx._src import action_selection as mctx_selection
from mctx._src import qtransforms as mctx_qtransforms
from mctx._src import search as mctx_search
from mctx._src import seq_halving as mctx_seq_halving

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


def _expand(params, rng_key, tree: mctx.Tree, recurrent_fn, parent_index, action,
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
    return _write_expansion(tree, rows, parent_index, action, next_node_index, step, embedding)


def _expand_known(params, rng_key, tree: mctx.Tree, expansion: Expansion, parent_index,
                  action, next_node_index, active, embedding) -> mctx.Tree:
    """``_expand`` for a tree ``with_transpositions``: the net is called only if
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
    return _write_expansion(tree, rows, parent_index, action, next_node_index, step, child)


def _write_expansion(tree: mctx.Tree, rows, parent, action, node, step, embedding) -> mctx.Tree:
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
        expand = _expand_known if isinstance(tree.extra_data, Transpositions) else _expand
        tree = expand(params, expand_key, tree, recurrent_fn, parent_index, action,
                      next_node_index, active, embedding)
        tree = batched_backward(tree, jnp.where(active, next_node_index, mctx.Tree.ROOT_INDEX))
        return rng_key, tree

    return body_fun


def search_tree(
    params,
    rng_key: jax.Array,
    *,
    root: mctx.RootFnOutput,
    recurrent_fn,
    root_action_selection_fn,
    interior_action_selection_fn,
    num_simulations: int,
    invalid_actions: jax.Array | None = None,
    extra_data=None,
) -> mctx.Tree:
    """``mctx.search`` (no ``max_depth``) with ``batched_backward``.

    mctx's own ``instantiate_tree_from_root`` and ``simulate``, its ``expand``'s
    arithmetic, the same RNG splitting: the same tree (tested; its backed-up
    values to float rounding, which XLA may contract differently in two loops).
    """
    tree = start_tree(root, num_simulations, invalid_actions, extra_data)
    return continue_tree(
        params, rng_key, tree, recurrent_fn=recurrent_fn,
        root_action_selection_fn=root_action_selection_fn,
        interior_action_selection_fn=interior_action_selection_fn,
        until=num_simulations)


def start_tree(root: mctx.RootFnOutput, capacity: int, invalid_actions: jax.Array | None = None,
               extra_data=None) -> mctx.Tree:
    """An mctx tree holding only ``root``, with room for ``capacity`` simulations."""
    if invalid_actions is None:
        invalid_actions = jnp.zeros_like(root.prior_logits)
    return mctx_search.instantiate_tree_from_root(
        root, capacity, root_invalid_actions=invalid_actions, extra_data=extra_data)


def continue_tree(
    params,
    rng_key: jax.Array,
    tree: mctx.Tree,
    *,
    recurrent_fn,
    root_action_selection_fn,
    interior_action_selection_fn,
    until,
    leaves: int = 0,
) -> mctx.Tree:
    """Simulate on each row until its root has ``until`` simulations.

    A row's root has had ``node_count - 1`` simulations (each one expands a
    node), whether they ran in this search's earlier chunks or were carried
    over from the last move's tree (``reuse``). So a search can run in chunks
    (``until`` = k, 2k, ...) and stop when time runs out, and a carried
    subtree's visits count towards the budget. ``until`` may be traced (one
    compilation serves every chunk) and is at most the tree's capacity. The
    RNG keys are the caller's: on a fresh tree, one call with ``until = n``
    gives the same tree as ``search_tree`` with the same key.

    ``leaves``: 0 runs mctx's loop, one leaf at a time; K >= 1 runs
    ``parallel_steps``, K leaves a step evaluated in one call of
    ``recurrent_fn`` (with K = 1, the same tree as mctx's loop).
    A tree ``with_transpositions`` evaluates each position once (one leaf a
    step; ``recurrent_fn`` an ``Expansion``).
    """
    selection = Selection(root_action_selection_fn, interior_action_selection_fn)
    if isinstance(tree.extra_data, Transpositions):
        if leaves:
            raise ValueError("transpositions are for one leaf a step (leaves=0): "
                             "parallel_steps does not read or write the keys")
        if not isinstance(recurrent_fn, Expansion):
            raise ValueError("a tree with_transpositions needs its recurrent_fn as an "
                             "Expansion (its evaluation apart from its move)")
    if leaves:
        return parallel_steps(params, rng_key, tree, recurrent_fn=recurrent_fn,
                              selection=selection, until=until, leaves=leaves)
    max_depth = tree.children_visits.shape[1] - 1
    first = node_count(tree)
    body_fun = _simulation(params, recurrent_fn, selection, max_depth, first, until)
    steps = jnp.maximum(until + 1 - jnp.min(first), 0)
    _, tree = jax.lax.fori_loop(0, steps, body_fun, (rng_key, tree))
    return tree


# -- leaf parallelism ----------------------------------------------------------------------

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


def _expand_leaves(params, rng_key, tree: mctx.Tree, recurrent_fn, parent, action, node,
                   active, embedding):
    """``_expand`` of K leaves a row, in one call of ``recurrent_fn`` on ``B * K``
    positions; ``parent``, ``action``, ``node``, ``active``: [B, K], the leaves
    of a row distinct where active; ``embedding``: the parents' ``[B, K, ...]``.
    With K = 1, ``_expand``'s tree."""
    batch_size, num_leaves = parent.shape
    rows = jnp.where(active, jnp.arange(batch_size)[:, None], batch_size)

    def flat(x):
        return x.reshape((batch_size * num_leaves,) + x.shape[2:])

    def unflat(x):
        return x.reshape((batch_size, num_leaves) + x.shape[1:])

    step, embedding = recurrent_fn(params, rng_key, flat(action), jax.tree.map(flat, embedding))
    step, embedding = jax.tree.map(unflat, step), jax.tree.map(unflat, embedding)
    return _write_expansion(tree, rows, parent, action, node, step, embedding)


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


def reuse(tree: mctx.Tree, action: jax.Array) -> mctx.Tree:
    """The subtree under each row's ``action``, re-indexed into a tree of the same size.

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
      action: int32[B], the move played at each row's root.
    """
    batch_size, num_nodes = tree.node_visits.shape
    batch_range = jnp.arange(batch_size)
    new_root = tree.children_index[batch_range, mctx.Tree.ROOT_INDEX, action]

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
        extra_data = extra_data.carried(gather)
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


def gumbel_selection(num_simulations: int, max_num_considered_actions: int,
                     qtransform=mctx_qtransforms.qtransform_completed_by_mix_value):
    """Gumbel MuZero's (root, interior) action selection functions: sequential
    halving at the root, scheduled for ``num_simulations``."""
    root = functools.partial(mctx_selection.gumbel_muzero_root_action_selection,
                             num_simulations=num_simulations,
                             max_num_considered_actions=max_num_considered_actions,
                             qtransform=qtransform)
    interior = functools.partial(mctx_selection.gumbel_muzero_interior_action_selection,
                                 qtransform=qtransform)
    return root, interior


def gumbel_tree(root: mctx.RootFnOutput, capacity: int, invalid_actions: jax.Array,
                gumbel_key: jax.Array, gumbel_scale: float | jax.Array = 1.0) -> mctx.Tree:
    """A tree holding ``root`` (its prior masked by ``invalid_actions``) and the
    root's Gumbel noise, drawn from ``gumbel_key`` and scaled by ``gumbel_scale``
    (0: no noise; an array broadcast against the logits scales rows apart)."""
    chex.assert_equal_shape([root.prior_logits, invalid_actions])
    root = root.replace(prior_logits=mask_logits(root.prior_logits, ~invalid_actions))
    gumbel = gumbel_scale * jax.random.gumbel(
        gumbel_key, shape=root.prior_logits.shape, dtype=root.prior_logits.dtype)
    return start_tree(root, capacity, invalid_actions,
                      mctx_selection.GumbelMuZeroExtraData(root_gumbel=gumbel))


def gumbel_result(tree: mctx.Tree,
                  qtransform=mctx_qtransforms.qtransform_completed_by_mix_value):
    """(action int32[B], action_weights float32[B, A]) of a Gumbel search's tree:
    among the most visited considered actions, the best "Gumbel + logits +
    completed Q"; and the improved policy softmax(logits + completed Q)."""
    invalid_actions = tree.root_invalid_actions
    prior_logits = tree.children_prior_logits[:, mctx.Tree.ROOT_INDEX]
    gumbel = tree.extra_data.root_gumbel
    summary = tree.summary()
    considered_visit = jnp.max(summary.visit_counts, axis=-1, keepdims=True)
    completed_qvalues = jax.vmap(qtransform, in_axes=[0, None])(tree, tree.ROOT_INDEX)
    to_argmax = mctx_seq_halving.score_considered(
        considered_visit, gumbel, prior_logits, completed_qvalues, summary.visit_counts)
    action = mctx_selection.masked_argmax(to_argmax, invalid_actions)
    action_weights = jax.nn.softmax(
        mask_logits(prior_logits + completed_qvalues, ~invalid_actions.astype(bool)))
    return action, action_weights


def gumbel_policy(
    params,
    rng_key: jax.Array,
    root: mctx.RootFnOutput,
    recurrent_fn,
    num_simulations: int,
    invalid_actions: jax.Array,
    *,
    qtransform=mctx_qtransforms.qtransform_completed_by_mix_value,
    max_num_considered_actions: int = 16,
    gumbel_scale: float = 1.0,
) -> mctx.PolicyOutput:
    """``mctx.gumbel_muzero_policy`` (no ``max_depth``) on ``search_tree``: the
    same action, action weights and tree (tested). It is ``gumbel_tree``, then
    ``continue_tree`` with ``gumbel_selection``, then ``gumbel_result``."""
    rng_key, gumbel_rng = jax.random.split(rng_key)
    tree = gumbel_tree(root, num_simulations, invalid_actions, gumbel_rng, gumbel_scale)
    root_selection, interior_selection = gumbel_selection(
        num_simulations, max_num_considered_actions, qtransform)
    tree = continue_tree(params, rng_key, tree, recurrent_fn=recurrent_fn,
                         root_action_selection_fn=root_selection,
                         interior_action_selection_fn=interior_selection,
                         until=num_simulations)
    action, action_weights = gumbel_result(tree, qtransform)
    return mctx.PolicyOutput(action=action, action_weights=action_weights, search_tree=tree)
