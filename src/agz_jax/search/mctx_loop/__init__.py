"""The search loop, on mctx's private API (pinned: mctx==0.0.71).

mctx's public ``mctx.search`` runs a fixed number of simulations from an empty
tree; this project needs what it does not give:

* a simulation written for the batch (``steps``: ``select_leaves``,
  ``expand``, ``batched_backward``): the same trees (mctx's arithmetic in
  mctx's order; the backed-up values equal to the rounding of two programs),
  without copying tree arrays on every step, so that a simulation costs the
  same in a tree of 64 nodes or 8192;
* searches in chunks that share one tree (``chunks``: ``start_tree``,
  ``continue_tree``), so the engine can stop when its time is up;
* leaf parallelism in one tree (``parallel``: ``parallel_steps``, with the
  virtual visits of ``virtual``): K leaves a step, selected under virtual loss
  and evaluated in one call of the net (with K = 1, mctx's loop's tree);
* transpositions (``agz_jax.search.transpositions``): a position the tree
  holds already, reached by another order of the same moves, takes the
  prior and value of its node instead of another call of the net
  (``steps.expand_known``);
* the tree carried from one move to the next (``surgery``: ``reuse``,
  ``with_root``);
* Gumbel MuZero's policy on that loop (``gumbel``: ``gumbel_policy``).

Everything that touches ``mctx._src`` lives in this package, so an mctx upgrade
is checked in one place (``tests/test_search.py`` compares these against
mctx's own ``search`` and ``gumbel_muzero_policy``, tree for tree). Its names
are imported from here.
"""

from agz_jax.search.mctx_loop.chunks import continue_tree, search_tree
from agz_jax.search.mctx_loop.gumbel import (
    gumbel_policy,
    gumbel_result,
    gumbel_selection,
    gumbel_tree,
)
from agz_jax.search.mctx_loop.parallel import parallel_steps
from agz_jax.search.mctx_loop.steps import (
    Selection,
    batched_backward,
    mask_logits,
    node_count,
    one_leaf_steps,
    select_leaves,
    start_tree,
)
from agz_jax.search.mctx_loop.surgery import reuse, with_root
from agz_jax.search.mctx_loop.virtual import (
    VIRTUAL_LOSS_VALUE,
    add_virtual_visit,
    take_back_virtual_visits,
)

__all__ = [
    "VIRTUAL_LOSS_VALUE", "Selection", "add_virtual_visit", "batched_backward",
    "continue_tree", "gumbel_policy", "gumbel_result", "gumbel_selection", "gumbel_tree",
    "mask_logits", "node_count", "one_leaf_steps", "parallel_steps", "reuse", "search_tree",
    "select_leaves", "start_tree", "take_back_virtual_visits", "with_root",
]
