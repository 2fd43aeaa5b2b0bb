"""Leaf parallelism (``mctx_loop.parallel_steps``): K leaves a step, selected
under virtual loss and evaluated in one net call. With K = 1 it is mctx's loop,
tree for tree; with K > 1 every root ends with exactly its budget of visits
(collisions dropped, the carried visits counted), no node of the tree takes an
illegal move, a win in one is found, and the engine plays with it. A random
9x9 net (one net) keeps it quick."""

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from test_engine import crowded_board
from tiny_models import random_model

from agz_jax.nets import models
from agz_jax.play import engine
from agz_jax.search import searcher as search
from tests.trees import assert_same_tree

SIZE = 9
A = SIZE * SIZE
CAPACITY = 96


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    m = models.load(random_model(tmp_path_factory.mktemp("leaves") / "m", SIZE, seed=7,
                                 double=False))
    # No forced moves: the search alone must find a win.
    return m._replace(config=m.config.replace(**{"search.algorithm": "puct"}))


def board_of(black, white):
    board = np.zeros(A, np.int8)
    board[[y * SIZE + x for x, y in black]] = 1
    board[[y * SIZE + x for x, y in white]] = -1
    return board


def random_positions(count: int, seed: int) -> list[np.ndarray]:
    """Boards with 2 to 20 random stones (black to move) and no five."""
    rng = np.random.default_rng(seed)
    rules = engine.Rules(SIZE)
    out = []
    while len(out) < count:
        n = int(rng.integers(1, 11))
        board = np.zeros(A, np.int8)
        points = rng.choice(A, 2 * n, replace=False)
        board[points[:n]], board[points[n:]] = 1, -1
        wins = jax.vmap(rules.is_win, in_axes=(None, 0))(jnp.asarray(board), jnp.arange(A))
        if not np.asarray(wins).any():
            out.append(board)
    return out


def stack(boards, rules):
    states = [engine.make_state(rules, b, 0) for b in boards]
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *states)


@pytest.fixture(scope="module")
def grow(model):
    """Jitted (key, states, until, leaves, first, allowed) -> tree: a fresh tree
    of CAPACITY whose roots take the moves ``allowed`` (as the engine passes its
    guard's; default: their own ``search_moves``), grown to ``first``
    simulations one leaf at a time, then to ``until`` with ``leaves`` a step
    (0: mctx's loop)."""
    searcher = search.Searcher(rules=model.rules, nets=model.nets,
                               settings=model.config.search, gamma=model.config.decay.gamma)

    @jax.jit
    def start(variables, key, states, first, allowed):
        tree = searcher.begin(variables, key, states, capacity=CAPACITY, moves=allowed)
        return searcher.grow(variables, key, tree, until=first)

    def run(key, states, until, leaves, first=0, allowed=None):
        tree = start(model.variables, key, states, jnp.int32(first), allowed)
        return _grow(searcher, leaves)(model.variables, jax.random.fold_in(key, 1), tree,
                                       jnp.int32(until))

    return run


_GROWN = {}


def _grow(searcher, leaves):
    if leaves not in _GROWN:
        _GROWN[leaves] = jax.jit(lambda v, k, t, u: searcher.grow(v, k, t, until=u,
                                                                  leaves=leaves))
    return _GROWN[leaves]


def test_one_leaf_a_step_is_mctxs_loop(model, grow):
    """K = 1 through the parallel loop: the same tree as mctx's loop, from a
    fresh tree and from one with visits already."""
    rules = model.rules
    states = stack(random_positions(3, 0), rules)
    key = jax.random.PRNGKey(11)
    for first, until in ((0, 40), (17, 60)):
        assert_same_tree(grow(key, states, until, 1, first), grow(key, states, until, 0, first))


@pytest.mark.parametrize("leaves", [pytest.param(4, marks=pytest.mark.long), 16])
def test_k_leaves_a_step_keep_the_budget_and_the_rules(model, grow, leaves):
    """Each root has exactly ``until`` simulations (root visits, nodes less one),
    whatever the collisions; every node's children are legal moves of its
    position, each listed once, and every node's visits are 1 + its children's.
    On the crowded board (5 empty points) most of a step's selections collide;
    the roots of the second search may take only a random third of their moves
    (the engine's guard restricts them so), and take no other."""
    rules = model.rules
    boards = random_positions(3, leaves) + [crowded_board(5, seed=leaves)]
    states = stack(boards, rules)
    rng = np.random.default_rng(leaves)
    allowed = np.stack([(b == 0) & (rng.random(A) < 1 / 3) for b in boards])
    allowed[np.arange(len(boards)), [np.flatnonzero(b == 0)[0] for b in boards]] = True
    for first, until, mask in ((0, 50, None), (9, CAPACITY, allowed)):
        tree = jax.tree.map(np.asarray, grow(jax.random.PRNGKey(leaves), states, until, leaves,
                                             first, None if mask is None else jnp.asarray(mask)))
        if mask is not None:
            assert np.all((tree.children_index[:, 0] != mctx.Tree.UNVISITED) <= mask)
        for row in range(len(boards)):
            nodes = int((tree.node_visits[row] > 0).sum())
            assert tree.children_visits[row, 0].sum() == until == nodes - 1
            for n in range(nodes):
                children = tree.children_index[row, n]
                expanded = np.flatnonzero(children != mctx.Tree.UNVISITED)
                board = tree.embeddings.board[row, n]
                if not tree.embeddings.done[row, n]:
                    assert np.all(board[expanded] == 0), (row, n)
                assert tree.node_visits[row, n] == 1 + tree.children_visits[row, n].sum()
                assert np.all(tree.parents[row, children[expanded]] == n)
            listed = tree.children_index[row, :nodes]
            listed = listed[listed != mctx.Tree.UNVISITED]
            assert sorted(listed.tolist()) == list(range(1, nodes))


@pytest.fixture(scope="module")
def parallel_engine(model):
    e = engine.Engine(model, max_simulations=CAPACITY, chunk=16, algorithm="puct",
                      reuse=True, leaves=8)
    e.warmup()
    return e


def test_the_engine_searches_k_leaves_a_step(parallel_engine):
    """The engine with ``leaves``: exact counts in chunks, then the carried
    subtree's visits counted towards the next budget."""
    e = parallel_engine
    rules = e.rules()
    e.forget()
    assert "8 leaves a step" in e.describe()
    board = crowded_board(10, seed=1)  # few moves: the visits pile up deep enough
    assert e.check_board(rules, board) == []
    a = e.analyse(rules, engine.make_state(rules, board, 0), simulations=37)
    assert a.reason == "search" and a.simulations == 37 and int(a.visits.sum()) == 37
    assert board[a.action] == 0
    # One move later (black played the engine's choice), the subtree under it goes on.
    board[a.action] = 1
    after = e.analyse(rules, engine.make_state(rules, board, 1, last_action=a.action),
                      simulations=60)
    assert after.carried > 0 and after.simulations > 0
    assert after.carried + after.simulations == 60 == int(after.visits.sum())
    with pytest.raises(ValueError, match="PUCT"):
        engine.Engine(e.model, algorithm="gumbel", leaves=4)


def test_parallel_search_finds_the_one_winning_move(grow):
    """Black's four with one open end: of some 70 moves one wins, and the
    search (8 leaves a step, no forced moves to point it out) gives it the most
    visits."""
    board = board_of([(2, 4), (3, 4), (4, 4), (5, 4)], [(1, 4), (0, 8), (8, 8), (8, 6)])
    win = 4 * SIZE + 6
    states = stack([board], engine.Rules(SIZE))
    tree = jax.tree.map(np.asarray, grow(jax.random.PRNGKey(3), states, CAPACITY, 8))
    visits = tree.children_visits[0, 0]
    assert int(np.argmax(visits)) == win, np.argsort(visits)[-4:]
