"""Subtree reuse (``mctx_loop.reuse``, ``with_root``) and searches that go on from
a carried tree (``continue_tree`` with per-row node counts).

Checked on a hand-made tree (every carried count exact), against a plain-Python
re-indexing of a searched tree, and against a fresh search where nothing is
carried. The toy "game" is a counter: a node's embedding is a number, an
action appends a digit, and the priors and values are fixed functions of it,
so a search is cheap to compile and its trees are easy to read.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from agz_jax.search import mctx_loop

A = 3  # actions
N = 20  # the searches' capacity (one shape for every test: one compilation)
ROOTS = jnp.array([5, 17, 42, 8])
UNVISITED, NO_PARENT = mctx.Tree.UNVISITED, mctx.Tree.NO_PARENT


def toy_root(embedding):
    embedding = jnp.asarray(embedding, jnp.int32)
    logits = jnp.sin(embedding[:, None] * 0.37 + jnp.arange(A) * 1.3).astype(jnp.float32)
    return mctx.RootFnOutput(prior_logits=logits, value=jnp.cos(embedding * 0.11).astype(
        jnp.float32), embedding=embedding)


def toy_recurrent(params, key, action, embedding):
    del params, key
    child = (embedding * A + action + 1) % 100_003
    out = toy_root(child)
    return mctx.RecurrentFnOutput(reward=jnp.zeros_like(out.value),
                                  discount=-jnp.ones_like(out.value),
                                  prior_logits=out.prior_logits, value=out.value), child


def puct(key, tree, node_index, depth=0):
    del depth
    visits = tree.children_visits[node_index]
    prior = jax.nn.softmax(tree.children_prior_logits[node_index])
    q = jnp.where(visits > 0, tree.qvalues(node_index), 0.0)
    score = q + 1.5 * prior * jnp.sqrt(tree.node_visits[node_index]) / (visits + 1)
    return jnp.argmax(score + 1e-7 * jax.random.uniform(key, score.shape)).astype(jnp.int32)


GROW = functools.partial(mctx_loop.continue_tree, None, recurrent_fn=toy_recurrent,
                         root_action_selection_fn=puct, interior_action_selection_fn=puct)


@jax.jit
def fresh_search(embedding, until, key):
    tree = mctx_loop.start_tree(toy_root(embedding), N)
    return GROW(key, tree, until=until)


@jax.jit
def grow(tree, until, key):
    return GROW(key, tree, until=until)


def assert_consistent(t):
    """Every node's visits are 1 + its children's; parents and children agree."""
    for b in range(t.node_visits.shape[0]):
        nodes = int((t.node_visits[b] > 0).sum())
        assert np.all(t.node_visits[b, :nodes] > 0) and np.all(t.node_visits[b, nodes:] == 0)
        for n in range(nodes):
            kids = t.children_index[b, n]
            assert t.node_visits[b, n] == 1 + t.children_visits[b, n].sum()
            for a in np.flatnonzero(kids != UNVISITED):
                assert t.parents[b, kids[a]] == n and t.action_from_parent[b, kids[a]] == a
                assert t.children_visits[b, n, a] == t.node_visits[b, kids[a]]


def hand_made_tree() -> mctx.Tree:
    """Two rows, 7 nodes, 3 actions. Row 0: 0 -a0-> 1, 0 -a1-> 2, 1 -a2-> 3,
    2 -a0-> 4, 2 -a1-> 5, 4 -a2-> 6. Row 1: only 0 -a0-> 1."""
    n = 7
    children = np.full((2, n, A), UNVISITED, np.int32)
    parents = np.full((2, n), NO_PARENT, np.int32)
    from_parent = np.full((2, n), NO_PARENT, np.int32)
    for b, edges in enumerate([[(0, 0, 1), (0, 1, 2), (1, 2, 3), (2, 0, 4), (2, 1, 5), (4, 2, 6)],
                               [(0, 0, 1)]]):
        for parent, a, child in edges:
            children[b, parent, a], parents[b, child], from_parent[b, child] = child, parent, a
    visits = np.zeros((2, n), np.int32)
    child_visits = np.zeros((2, n, A), np.int32)
    for b in range(2):
        for node in reversed(range(n)):
            if node == 0 or parents[b, node] != NO_PARENT:
                visits[b, node] = 1 + sum(visits[b, c] for c in children[b, node] if c >= 0)
                for a, c in enumerate(children[b, node]):
                    child_visits[b, node, a] = visits[b, c] if c >= 0 else 0
    rng = np.random.default_rng(0)
    value = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    return mctx.Tree(
        node_visits=jnp.asarray(visits), raw_values=jnp.asarray(value(2, n)),
        node_values=jnp.asarray(value(2, n)), parents=jnp.asarray(parents),
        action_from_parent=jnp.asarray(from_parent), children_index=jnp.asarray(children),
        children_prior_logits=jnp.asarray(value(2, n, A)),
        children_visits=jnp.asarray(child_visits), children_rewards=jnp.asarray(value(2, n, A)),
        children_discounts=jnp.asarray(value(2, n, A)),
        children_values=jnp.asarray(value(2, n, A)),
        embeddings=jnp.asarray(np.arange(2 * n).reshape(2, n) * 10, jnp.int32),
        root_invalid_actions=jnp.zeros((2, A)), extra_data=None)


def test_carried_counts_are_exact_on_a_hand_made_tree():
    tree = hand_made_tree()
    old = jax.tree.map(np.asarray, tree)
    new = jax.tree.map(np.asarray, jax.jit(mctx_loop.reuse)(tree, jnp.array([1, 2])))
    # Row 0 keeps the subtree of node 2: nodes 2, 4, 5, 6 become 0, 1, 2, 3.
    moved = {2: 0, 4: 1, 5: 2, 6: 3}
    for o, m in moved.items():
        assert new.node_visits[0, m] == old.node_visits[0, o]
        for field in ("raw_values", "node_values", "embeddings"):
            assert getattr(new, field)[0, m] == getattr(old, field)[0, o]
        for field in ("children_prior_logits", "children_visits", "children_rewards",
                      "children_discounts", "children_values"):
            np.testing.assert_array_equal(getattr(new, field)[0, m], getattr(old, field)[0, o])
    assert new.node_visits[0].tolist() == [4, 2, 1, 1, 0, 0, 0]
    assert new.children_index[0, 0].tolist() == [1, 2, UNVISITED]
    assert new.children_index[0, 1].tolist() == [UNVISITED, UNVISITED, 3]
    assert new.parents[0].tolist() == [NO_PARENT, 0, 0, 1, NO_PARENT, NO_PARENT, NO_PARENT]
    assert new.action_from_parent[0].tolist() == [NO_PARENT, 0, 1, 2, NO_PARENT, NO_PARENT,
                                                  NO_PARENT]
    assert np.all(new.children_index[0, 4:] == UNVISITED)
    assert np.all(new.children_visits[0, 4:] == 0) and np.all(new.node_values[0, 4:] == 0)
    # Row 1 played an action whose child was never expanded: nothing is carried.
    assert mctx_loop.node_count(new)[1] == 0 and np.all(new.children_index[1] == UNVISITED)
    assert_consistent(jax.tree.map(lambda x: x[:1], new))


def reference_reuse(t, b: int, action: int) -> dict[int, int]:
    """old node -> new node, by walking the subtree in index order (plain Python)."""
    root = int(t.children_index[b, 0, action])
    if root < 0:
        return {}
    inside = {root}
    for n in range(root + 1, t.node_visits.shape[1]):
        if t.node_visits[b, n] > 0 and int(t.parents[b, n]) in inside:
            inside.add(n)
    return {o: m for m, o in enumerate(sorted(inside))}


@pytest.mark.parametrize("seed", [0, 1])
def test_reuse_of_a_searched_tree_matches_a_plain_python_reindexing(seed):
    tree = fresh_search(ROOTS, N, jax.random.PRNGKey(seed))
    t = jax.tree.map(np.asarray, tree)
    actions = np.array([0, 1, 2, int(np.argmax(t.children_visits[3, 0]))])
    new = jax.tree.map(np.asarray, mctx_loop.reuse(tree, jnp.asarray(actions)))
    for b, a in enumerate(actions):
        mapping = reference_reuse(t, b, int(a))
        assert int(mctx_loop.node_count(new)[b]) == len(mapping) == t.children_visits[b, 0, a]
        for o, m in mapping.items():
            assert new.node_visits[b, m] == t.node_visits[b, o]
            assert new.embeddings[b, m] == t.embeddings[b, o]
            kids = t.children_index[b, o]
            want = [mapping[k] if k >= 0 else UNVISITED for k in kids]
            assert new.children_index[b, m].tolist() == want
    assert_consistent(new)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_line_of_two_moves_is_carried_as_the_moves_one_after_the_other(seed):
    """``reuse`` along a line (ours, then the reply) equals two single carries;
    a line padded with -1 equals the single carry of its first move; a reply
    never expanded carries nothing."""
    tree = fresh_search(ROOTS, N, jax.random.PRNGKey(seed))
    t = jax.tree.map(np.asarray, tree)
    rows = np.arange(4)
    ours = np.argmax(t.children_visits[:, 0], axis=-1)
    child = t.children_index[rows, 0, ours]
    reply = np.argmax(t.children_visits[rows, child], axis=-1)
    reply[3] = int(np.argmin(t.children_visits[3, child[3]]))  # maybe never expanded
    line = jnp.asarray(np.stack([ours, reply], axis=-1), jnp.int32)
    both = jax.tree.map(np.asarray, mctx_loop.reuse(tree, line))
    twice = jax.tree.map(np.asarray, mctx_loop.reuse(mctx_loop.reuse(tree, jnp.asarray(ours)),
                                                     jnp.asarray(reply)))
    jax.tree.map(np.testing.assert_array_equal, both, twice)
    padded = jnp.asarray(np.stack([ours, -np.ones_like(ours)], axis=-1), jnp.int32)
    jax.tree.map(np.testing.assert_array_equal,
                 jax.tree.map(np.asarray, mctx_loop.reuse(tree, padded)),
                 jax.tree.map(np.asarray, mctx_loop.reuse(tree, jnp.asarray(ours))))
    kept = mctx_loop.node_count(both)
    for b in range(4):
        grandchild = t.children_index[b, child[b], reply[b]] if child[b] >= 0 else -1
        assert kept[b] == (t.node_visits[b, grandchild] if grandchild >= 0 else 0)
    assert_consistent(jax.tree.map(lambda x: x[kept > 0], both))


def test_a_carried_tree_grows_to_the_budget_and_keeps_its_visits():
    n = N
    tree = fresh_search(ROOTS, n, jax.random.PRNGKey(3))
    best = jnp.argmax(tree.children_visits[:, 0], axis=-1)
    carried = mctx_loop.reuse(tree, best)
    kept = np.asarray(mctx_loop.node_count(carried))
    assert np.all(kept >= 2)  # the most visited child had a subtree under it
    rows = jnp.arange(4)
    children = tree.embeddings[rows, tree.children_index[rows, 0, best]]
    carried = mctx_loop.with_root(carried, toy_root(children), jnp.zeros((4, A)))
    grown = jax.tree.map(np.asarray, grow(carried, jnp.int32(n), jax.random.PRNGKey(4)))
    # The carried visits count towards the budget: the root ends with n
    # simulations, n + 1 - kept of them new, and the carried nodes are unchanged
    # but for the visits the new simulations added.
    assert grown.node_visits[:, 0].tolist() == [n + 1] * 4
    assert mctx_loop.node_count(grown).tolist() == [n + 1] * 4
    for b in range(4):
        assert np.all(grown.node_visits[b, :kept[b]] >= np.asarray(carried.node_visits)[b,
                                                                                      :kept[b]])
        np.testing.assert_array_equal(grown.embeddings[b, :kept[b]],
                                      np.asarray(carried.embeddings)[b, :kept[b]])
    assert_consistent(grown)


def test_reuse_equals_a_fresh_search_where_the_subtree_is_empty():
    # Two simulations expand at most two of the three root moves.
    tree = fresh_search(ROOTS, 2, jax.random.PRNGKey(0))
    # A move whose child the search never expanded: nothing to carry.
    unexpanded = jnp.argmin(jnp.where(tree.children_index[:, 0] == UNVISITED, 0, 1), axis=-1)
    assert np.all(np.asarray(tree.children_index)[np.arange(4), 0, np.asarray(unexpanded)] ==
                  UNVISITED)
    carried = mctx_loop.reuse(tree, unexpanded)
    assert mctx_loop.node_count(carried).tolist() == [0] * 4
    next_roots = jnp.array([7, 9, 11, 13])
    key = jax.random.PRNGKey(5)
    got = grow(mctx_loop.with_root(carried, toy_root(next_roots), jnp.zeros((4, A))),
               jnp.int32(N), key)
    want = fresh_search(next_roots, N, key)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_chunks_and_rows_at_different_counts():
    """Rows carrying different numbers of nodes each stop at the budget; running
    the budget in two chunks gives the same tree as in one."""
    n = N
    tree = fresh_search(ROOTS, n, jax.random.PRNGKey(1))
    carried = mctx_loop.reuse(tree, jnp.array([0, 1, 2, 0]))
    counts = np.asarray(mctx_loop.node_count(carried))
    roots = jnp.where(jnp.asarray(counts) > 0, 1, 2)  # any roots: only fresh rows read them
    carried = mctx_loop.with_root(carried, toy_root(roots), jnp.zeros((4, A)))
    assert len(set(np.maximum(counts, 1).tolist())) > 1, "rows should carry different counts"
    key = jax.random.PRNGKey(2)
    one = grow(carried, jnp.int32(n), key)
    assert np.asarray(one.node_visits[:, 0]).tolist() == [n + 1] * 4
    half = grow(carried, jnp.int32(n // 2), key)
    assert np.all(np.asarray(half.node_visits[:, 0]) == np.maximum(n // 2 + 1, np.maximum(
        counts, 1)))
    assert_consistent(jax.tree.map(np.asarray, half))
    assert_consistent(jax.tree.map(np.asarray, one))
