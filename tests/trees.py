"""A check the search tests share: two search trees are the same tree."""

from __future__ import annotations

import jax
import numpy as np


def assert_same_tree(got, want):
    """Every field of two trees (any pytrees of arrays): the same nodes, edges,
    visits and positions exactly; the same values up to the rounding of two
    programs' backups (XLA may contract or reorder their arithmetic
    differently in two loops)."""
    assert jax.tree.structure(got) == jax.tree.structure(want)

    def check(path, x, y):
        x, y = np.asarray(x), np.asarray(y)
        if np.issubdtype(y.dtype, np.floating):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6,
                                       err_msg=jax.tree_util.keystr(path))
        else:
            np.testing.assert_array_equal(x, y, err_msg=jax.tree_util.keystr(path))

    jax.tree_util.tree_map_with_path(check, got, want)
