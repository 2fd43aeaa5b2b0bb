"""Gumbel MuZero's policy on this package's loop: its selections
(``gumbel_selection``), its root noise (``gumbel_tree``), its choice and improved
policy (``gumbel_result``), and all three as ``mctx.gumbel_muzero_policy``
(``gumbel_policy``)."""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import mctx
from mctx._src import action_selection as mctx_selection
from mctx._src import qtransforms as mctx_qtransforms
from mctx._src import seq_halving as mctx_seq_halving

from agz_jax.search.mctx_loop.chunks import continue_tree
from agz_jax.search.mctx_loop.steps import mask_logits, start_tree


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
