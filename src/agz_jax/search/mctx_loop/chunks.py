"""Searches in chunks that share one tree: ``start_tree`` makes it,
``continue_tree`` grows it until each root has a number of simulations, one
leaf a step (``agz_jax.search.mctx_loop.steps``) or K (``...parallel``), so a
caller can stop when its time is up; ``search_tree`` is ``mctx.search``
on that loop."""

from __future__ import annotations

import functools

import jax
import mctx

from agz_jax.search.mctx_loop.parallel import parallel_steps
from agz_jax.search.mctx_loop.steps import Selection, one_leaf_steps, start_tree
from agz_jax.search.transpositions import Expansion, Transpositions


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
    steps = functools.partial(parallel_steps, leaves=leaves) if leaves else one_leaf_steps
    return steps(params, rng_key, tree, recurrent_fn=recurrent_fn, selection=selection,
                 until=until)
