"""Tests of ``agz_jax.search.searcher``: Winning Value Decay backups, masking, known answers.

Every search here runs on 7x7 with ``SIMS`` simulations and a batch of
``BATCH`` positions through one of two jitted functions (PUCT, Gumbel), so the
file pays for two compiles. Tests that need a scripted "net" use the real
``Networks`` with hand-set variables: every parameter zero but the policy
Dense bias (the logits) and the value Dense bias (``tanh`` of it is the value;
Double Networks: one constant per colour to move).

Positions are written as text: ``X`` black, ``O`` white, ``.`` empty; the side
to move follows from the stone counts.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import unittest.mock

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from agz_jax.config.schema import SearchConfig, SelfPlayConfig
from agz_jax.game import tactics
from agz_jax.game.gomoku import BLACK, WHITE, Rules, State, played_at_from_last
from agz_jax.nets.networks import Networks, PolicyValueNet
from agz_jax.search import mctx_loop
from agz_jax.search import searcher as search
from agz_jax.search.packed import Packed, unpack
from tests.trees import assert_same_tree

SIZE = 7
A = SIZE * SIZE
SIMS = 256
BATCH = 4
RULES = Rules(SIZE)
NETS = Networks(PolicyValueNet(board_size=SIZE, filters=8, blocks=1, value_hidden=8), num_nets=2)
GAMMA = 0.9


# --------------------------------------------------------------------------
# Positions and a tiny plain-Python referee.
# --------------------------------------------------------------------------

def board_of(text: str) -> np.ndarray:
    rows = [r.split() for r in text.strip().splitlines()]
    assert len(rows) == SIZE and all(len(r) == SIZE for r in rows), text
    table = {".": 0, "X": 1, "O": -1}
    return np.array([table[v] for r in rows for v in r], np.int8)


def state_of(text: str) -> State:
    """An unfinished position; black to move iff the stone counts are equal."""
    return state_of_board(board_of(text))


def state_of_board(board: np.ndarray) -> State:
    nx, no = int((board == 1).sum()), int((board == -1).sum())
    assert nx in (no, no + 1), (nx, no)
    return State(
        board=jnp.asarray(board),
        to_play=jnp.int32(BLACK if nx == no else WHITE),
        last_action=jnp.int32(-1),
        num_moves=jnp.int32(nx + no),
        winner=jnp.int32(-1),
        done=jnp.bool_(False),
        illegal=jnp.bool_(False),
        played_at=played_at_from_last(SIZE * SIZE, -1, nx + no),
        rank=jnp.int32(0),
    )


def stack(states) -> State:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def _lines():
    out = []
    for r, c in itertools.product(range(SIZE), repeat=2):
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            cells = [(r + k * dr, c + k * dc) for k in range(5)]
            if all(0 <= i < SIZE and 0 <= j < SIZE for i, j in cells):
                out.append([i * SIZE + j for i, j in cells])
    return out


LINES = _lines()  # every window of 5 points in a row
LINES_THROUGH = [[w for w in LINES if a in w] for a in range(A)]


def has_five(board, stone: int) -> bool:
    return any(all(board[p] == stone for p in w) for w in LINES)


def winning_points(board, stone: int) -> set[int]:
    """Empty points where ``stone`` would complete five (or more). A stone
    removes no five, and a five it makes holds it: unless the board has a
    five already (then every empty point), only the windows through the
    point can become one."""
    empty = np.flatnonzero(np.asarray(board) == 0)
    if has_five(board, stone):
        return {int(a) for a in empty}
    return {int(a) for a in empty
            if any(all(p == a or board[p] == stone for p in w) for w in LINES_THROUGH[a])}


def can_ever_five(board, stone: int) -> bool:
    return any(all(board[p] in (0, stone) for p in w) for w in LINES)


# Open fours: the side to move wins on either end.
WIN_BLACK = """
O . . . . . O
. . . . . . .
. . . . . . .
. X X X X . .
. . . . . . .
. . . . . . .
O . . . . . O
"""
WIN_BLACK_MOVES = {21, 26}
WIN_WHITE = """
X . . . . . X
. . . O . . .
. . . O . . .
. . . O . . .
. . . O . . .
. . . . . . .
X . . . . X X
"""
WIN_WHITE_MOVES = {3, 38}
# The opponent has a four closed on one side; the side to move has no win and
# must block at (0, 4). After the block the opponent can never make five; every
# other move loses at once. Crowded so that search refutes every other
# move quickly even with a random net's priors.
BLOCK_BLACK = """
O O O O . O X
. O X O . X .
X O . . X X O
X O X X . O .
X X O X O X O
O X . X O O X
X O X O X X O
"""
BLOCK_WHITE = """
X X X X . O X
X O O X O X .
. O O X X . .
X X X O . O O
O O O O X X X
O O . O X X O
X . X O O O X
"""
BLOCK_MOVE = 4
# No window of five can ever be filled by one colour: every line ends in a draw.
DEAD_DRAW = """
X X O O X X .
O O X X O O X
X . O O X . O
O O X X . O X
X X O O X X O
O O X X O O X
X X O O . X O
"""
MID_BLACK = """
. . . . . . .
. . X O . . .
. . X X O . .
. O X O . . .
. . O X . . .
. . . . . . .
. . . . . . .
"""
# Black has an open diagonal four: white to move has lost.
MID_WHITE = """
. . . . . . X
. X . . . . .
. . X O . . .
. . O X O . .
. . . O X . .
. . . . . . .
. . . . . . .
"""
# Scripted lines (see ``scripted_variables``): black to move plays 10, white
# 17, black 25 and wins on row 3; in IMMEDIATE white to move wins on 10.
CHAIN = """
O . . . . . O
. . . . . . .
. . . . . . .
X X X X . . .
. . . . . . .
. . . . . . .
O . . . . . O
"""
IMMEDIATE = """
X . . . . . X
O O O . O . .
. . . . . . .
. . . . . . X
. . . . . . .
. . . . . . .
X . . X . . .
"""
CHAIN_MOVES = (10, 17, 25)


def test_positions_are_what_they_claim():
    b = board_of(WIN_BLACK)
    assert winning_points(b, 1) == WIN_BLACK_MOVES
    b = board_of(WIN_WHITE)
    assert winning_points(b, -1) == WIN_WHITE_MOVES
    for text, me in ((BLOCK_BLACK, 1), (BLOCK_WHITE, -1)):
        b = board_of(text)
        assert int(state_of(text).to_play) == (BLACK if me == 1 else WHITE)
        assert not has_five(b, 1) and not has_five(b, -1)
        assert winning_points(b, me) == set()
        assert winning_points(b, -me) == {BLOCK_MOVE}
        b[BLOCK_MOVE] = me
        assert not can_ever_five(b, -me)
    b = board_of(DEAD_DRAW)
    assert not can_ever_five(b, 1) and not can_ever_five(b, -1)
    assert winning_points(board_of(MID_WHITE), 1) == {0, 40}
    b = board_of(CHAIN)
    assert winning_points(b, 1) == {CHAIN_MOVES[2]}
    b[CHAIN_MOVES[0]], b[CHAIN_MOVES[1]] = 1, -1
    assert winning_points(b, 1) == {CHAIN_MOVES[2]} and winning_points(b, -1) == set()
    assert int(state_of(CHAIN).to_play) == BLACK and int(state_of(IMMEDIATE).to_play) == WHITE
    assert winning_points(board_of(IMMEDIATE), -1) == {CHAIN_MOVES[0]}


# --------------------------------------------------------------------------
# Variables, searches (compiled once per algorithm).
# --------------------------------------------------------------------------

_SHAPES = jax.eval_shape(NETS.init, jax.random.key(0))


def random_variables(seed: int):
    """A random-init net, drawn like flax's defaults (lecun-normal kernels, zero
    biases, identity BatchNorm) with numpy: jitting ``NETS.init`` would cost
    more compile time than all the searches of this file."""
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        name = jax.tree_util.keystr(path)
        if "kernel" in name:
            fan_in = int(np.prod(leaf.shape[1:-1]))
            x = rng.standard_normal(leaf.shape).clip(-2, 2) / np.sqrt(fan_in)
        elif "scale" in name or "var" in name:
            x = np.ones(leaf.shape)
        else:
            x = np.zeros(leaf.shape)
        return jnp.asarray(x, leaf.dtype)

    return jax.tree_util.tree_map_with_path(draw, _SHAPES)


def scripted_variables(order, black_value: float, white_value: float):
    """Every parameter zero but two biases: logits = policy bias, value =
    tanh(value bias), one value per colour to move (Double Networks).

    ``order`` lists preferred points; point ``order[i]`` gets logit ``-1000 i``
    and every other point ``-1000 len(order)``, so at every node the most
    preferred empty point has prior exactly 1 and all others exactly 0 (their
    softmax underflows); PUCT never selects a zero-prior action.
    """
    v = jax.tree.map(jnp.zeros_like, random_variables(0))
    bias = np.full(A, -1000.0 * len(order), np.float32)
    bias[list(order)] = -1000.0 * np.arange(len(order))
    # tanh(+-20) is exactly +-1 in float32.
    atanh = lambda x: 20.0 * x if abs(x) == 1 else float(np.arctanh(x))
    params = dict(v["params"])
    params["Dense_0"] = {"kernel": params["Dense_0"]["kernel"],
                         "bias": jnp.broadcast_to(jnp.asarray(bias), (2, A))}
    params["Dense_2"] = {"kernel": params["Dense_2"]["kernel"],
                         "bias": jnp.asarray([[atanh(black_value)], [atanh(white_value)]],
                                             jnp.float32)}
    return {"params": params, "batch_stats": v["batch_stats"]}


def search_config(algorithm: str) -> SearchConfig:
    # Gumbel considers every legal root move: with a random net's prior the
    # winning move need not be among the top 16.
    return SearchConfig(algorithm=algorithm, num_simulations=SIMS, c_puct=5.0,
                        qtransform="raw", max_considered_actions=A)


def run_search(cfg, gamma, variables, key, states, **kwargs):
    """``cfg``'s search (``search.Searcher``) from ``states``."""
    return search.Searcher(rules=RULES, nets=NETS, settings=cfg, gamma=gamma).run(
        variables, key, states, **kwargs)


@pytest.fixture(scope="module")
def searches():
    """algorithm -> jitted (variables, key, states [BATCH], gamma) -> PolicyOutput."""
    return make_searches()


def make_searches():
    out = {}
    for algorithm in ("puct", "gumbel"):
        cfg = search_config(algorithm)

        def run(variables, key, states, gamma, cfg=cfg):
            return run_search(cfg, gamma, variables, key, states)

        out[algorithm] = jax.jit(run)
    return out


def to_numpy(tree):
    return jax.tree.map(np.asarray, tree)


def root_q(tree) -> np.ndarray:
    """float[B, A]: mctx's q of the root's children (reward + discount * value)."""
    t = to_numpy(tree)
    return t.children_rewards[:, 0] + t.children_discounts[:, 0] * t.children_values[:, 0]


# --------------------------------------------------------------------------
# 1. Decayed backups.
# --------------------------------------------------------------------------

@pytest.mark.parametrize("gamma", [GAMMA, pytest.param(1.0, marks=pytest.mark.long)])
@pytest.mark.parametrize("true_values", [False, True])
def test_decayed_backup_hand_computed(searches, gamma, true_values):
    """A scripted line: root (black, value vb) -10-> n1 (white, vw) -17-> n2
    (black, vb) -25-> n3, black has won; then absorbing visits below n3.

    With K simulations: N(n3) = K-2, N(n2) = K-1, N(n1) = K, N(root) = K+1 and
      W(n3) = -(K-2)
      W(n2) = vb + (K-2) * (+1 + 0 * ...)
      W(n1) = vw - gamma W(n2)
      W(root) = vb - gamma W(n1) = vb - gamma vw + gamma^2 vb + gamma^2 (K-2)
    In IMMEDIATE (white to move wins on 10): W(root) = vw + K, the won node -1.
    With the true values (vb = 1 for a black to move about to win, vw = -gamma)
    every node value is the decayed label: -1, +1, -gamma, and the root's q
    is gamma^2; gamma = 1 is the undecayed AlphaZero backup.
    """
    vb, vw = (1.0, -gamma) if true_values else (0.3, -0.2)
    variables = scripted_variables(CHAIN_MOVES, vb, vw)
    vb_f32, vw_f32 = (float(jnp.tanh(variables["params"]["Dense_2"]["bias"][i, 0]))
                      for i in (0, 1))
    assert vb_f32 == pytest.approx(vb, abs=1e-6) and vw_f32 == pytest.approx(vw, abs=1e-6)
    vb, vw = vb_f32, vw_f32
    states = stack([state_of(CHAIN), state_of(IMMEDIATE)] * 2)
    out = searches["puct"](variables, jax.random.key(0), states, gamma)
    t = to_numpy(out.search_tree)
    K = SIMS
    g = gamma
    q = t.children_rewards + t.children_discounts * t.children_values  # mctx's q

    for b in (0, 2):  # CHAIN
        e1, e2, win = CHAIN_MOVES
        assert t.children_index[b, 0, e1] == 1
        assert t.children_index[b, 1, e2] == 2
        assert t.children_index[b, 2, win] == 3
        # Nothing else was expanded above the finished node.
        assert (t.children_index[b, :3] >= 0).sum() == 3
        assert list(t.node_visits[b, :4]) == [K + 1, K, K - 1, K - 2]
        w_n2 = vb + (K - 2)
        w_n1 = vw - g * w_n2
        w_root = vb - g * w_n1
        assert w_root == pytest.approx(vb - g * vw + g * g * vb + g * g * (K - 2))
        expect = np.array([w_root / (K + 1), w_n1 / K, w_n2 / (K - 1), -1.0])
        np.testing.assert_allclose(t.node_values[b, :4], expect, rtol=1e-5, atol=1e-6)
        # Edges: ordinary, ordinary, winning; the finished node is absorbing.
        np.testing.assert_allclose(
            [t.children_discounts[b, 0, e1], t.children_discounts[b, 1, e2],
             t.children_discounts[b, 2, win]], [-g, -g, 0.0], rtol=1e-6)
        np.testing.assert_array_equal(
            [t.children_rewards[b, 0, e1], t.children_rewards[b, 1, e2],
             t.children_rewards[b, 2, win]], [0.0, 0.0, 1.0])
        below = t.children_index[b, 3] >= 0
        assert below.sum() > 1
        np.testing.assert_array_equal(t.children_rewards[b, 3][below], -1.0)
        np.testing.assert_array_equal(t.children_discounts[b, 3][below], 0.0)
        # The finished node and all its absorbing copies stay at exactly -1.
        np.testing.assert_array_equal(t.node_values[b, 3:], -1.0)
        # q values: +1 at the win, then decayed and alternating in sign.
        assert q[b, 2, win] == 1.0
        np.testing.assert_allclose(q[b, 1, e2], -g * w_n2 / (K - 1), rtol=1e-5)
        np.testing.assert_allclose(q[b, 0, e1], -g * w_n1 / K, rtol=1e-5)
        if true_values:  # node values are the decayed z labels
            np.testing.assert_allclose(t.node_values[b, 1:4], [-g, 1.0, -1.0], rtol=1e-5)
            np.testing.assert_allclose([q[b, 1, e2], q[b, 0, e1]], [-g, g * g], rtol=1e-5)

    for b in (1, 3):  # IMMEDIATE: white to move wins on 10
        win = CHAIN_MOVES[0]
        assert t.children_index[b, 0, win] == 1 and (t.children_index[b, 0] >= 0).sum() == 1
        assert t.node_visits[b, 1] == K
        assert t.children_rewards[b, 0, win] == 1.0 and t.children_discounts[b, 0, win] == 0.0
        assert q[b, 0, win] == 1.0
        np.testing.assert_allclose(t.node_values[b, 0], (vw + K) / (K + 1), rtol=1e-5)
        np.testing.assert_array_equal(t.node_values[b, 1:], -1.0)
        assert int(out.action[b]) == win


@jax.jit
def _node_values(variables, emb: State):
    """float32[B, N]: the net's value of every node state [B, N]."""
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), emb)
    _, value = NETS.evaluate(variables, jax.vmap(RULES.observe)(flat), flat.to_play)
    return value.reshape(emb.to_play.shape)


def recompute_and_check(t, gamma: float, variables):
    """Recompute every node's value from the tree arrays, and each edge's
    (reward, discount, initial value) from the two states, in plain numpy.

    W(n) = v_init(n) + sum_c [N_c r_c + d_c W(c)],  value(n) = W(n) / N(n).
    Returns a count of edges by kind.
    """
    emb = t.embeddings
    kinds = dict(ordinary=0, win=0, draw=0, absorbing_win=0, absorbing_draw=0)
    batch, num_nodes = t.node_visits.shape
    # The net's value of every node, to compare with the raw values.
    net_v = np.asarray(_node_values(variables, jax.tree.map(jnp.asarray, emb)))
    for b in range(batch):
        expanded = t.node_visits[b] > 0
        assert expanded.all()  # every simulation expands a new node (no max_depth)
        w = np.zeros(num_nodes, np.float64)
        for n in reversed(range(num_nodes)):  # children have larger indices
            total = float(t.raw_values[b, n])
            child_visits = 0
            for a in np.flatnonzero(t.children_index[b, n] >= 0):
                c = t.children_index[b, n, a]
                assert c > n and t.parents[b, c] == n and t.action_from_parent[b, c] == a
                r, d = float(t.children_rewards[b, n, a]), float(t.children_discounts[b, n, a])
                nc = int(t.children_visits[b, n, a])
                assert nc == t.node_visits[b, c]
                assert t.children_values[b, n, a] == t.node_values[b, c]
                total += nc * r + d * w[c]
                child_visits += nc

                # The edge, independently of winning_value_decay.
                pb, cb = emb.board[b, n], emb.board[b, c]
                if emb.done[b, n]:
                    np.testing.assert_array_equal(cb, pb)
                    final = -1.0 if emb.winner[b, n] >= 0 else 0.0
                    expect = (final, 0.0, final)
                    kinds["absorbing_win" if final else "absorbing_draw"] += 1
                else:
                    mover = 1 if emb.to_play[b, n] == BLACK else -1
                    assert pb[a] == 0
                    after = pb.copy()
                    after[a] = mover
                    np.testing.assert_array_equal(cb, after)
                    won = has_five(after, mover)
                    full = not (after == 0).any()
                    assert bool(emb.done[b, c]) == (won or full)
                    assert int(emb.winner[b, c]) == (int(emb.to_play[b, n]) if won else -1)
                    if won:
                        expect = (1.0, 0.0, -1.0)
                        kinds["win"] += 1
                    elif full:
                        expect = (0.0, 0.0, 0.0)
                        kinds["draw"] += 1
                    else:
                        expect = (0.0, -gamma, net_v[b, c])
                        kinds["ordinary"] += 1
                np.testing.assert_allclose((r, d, t.raw_values[b, c]), expect,
                                           rtol=1e-5, atol=1e-6)
            w[n] = total
            assert t.node_visits[b, n] == 1 + child_visits
            np.testing.assert_allclose(t.node_values[b, n], w[n] / t.node_visits[b, n],
                                       rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(t.raw_values[b, 0], net_v[b, 0], rtol=1e-5, atol=1e-6)
    return kinds


@pytest.mark.parametrize("algorithm, gamma", [("puct", GAMMA), ("gumbel", GAMMA),
                                              pytest.param("puct", 1.0, marks=pytest.mark.long)])
def test_decayed_backup_recomputed_on_random_trees(searches, algorithm, gamma):
    variables = random_variables(1)
    states = stack([state_of(p) for p in (MID_BLACK, MID_WHITE, DEAD_DRAW, BLOCK_BLACK)])
    out = searches[algorithm](variables, jax.random.key(3), states, gamma)
    kinds = recompute_and_check(to_numpy(out.search_tree), gamma, variables)
    # Every kind of edge occurs, so each branch above was exercised.
    assert all(v > 0 for v in kinds.values()), kinds


# --------------------------------------------------------------------------
# 2. winning_value_decay on hand-made edges.
# --------------------------------------------------------------------------

_step = jax.jit(RULES.step)


def test_winning_value_decay_edges():
    ordinary_p = state_of(CHAIN)
    ordinary_c = _step(ordinary_p, 10)
    win_p = state_of(WIN_BLACK)
    win_c = _step(win_p, 21)
    assert bool(win_c.done) and int(win_c.winner) == BLACK
    # DEAD_DRAW filled up but for its last empty point.
    *first, last = np.flatnonzero(board_of(DEAD_DRAW) == 0)
    draw_p = state_of(DEAD_DRAW)
    for a in first:
        draw_p = _step(draw_p, int(a))
    assert int(draw_p.num_moves) == A - 1 and not bool(draw_p.done)
    draw_c = _step(draw_p, int(last))
    assert bool(draw_c.done) and int(draw_c.winner) == -1
    parents = stack([ordinary_p, win_p, draw_p, win_c, draw_c])
    children = stack([ordinary_c, win_c, draw_c, _step(win_c, 10), _step(draw_c, 3)])
    net_value = jnp.array([0.37, 0.5, 0.5, 0.5, 0.5], jnp.float32)
    decay = jax.jit(search.winning_value_decay)
    for gamma in (0.95, 1.0):
        out = decay(parents, children, net_value, gamma)
        expect = np.array([
            [0.0, -gamma, 0.37],  # ordinary: sign flips, decays by gamma
            [1.0, 0.0, -1.0],  # the mover has won; the won position is -1
            [0.0, 0.0, 0.0],  # full board: a draw
            [-1.0, 0.0, -1.0],  # absorbing: a lost game stays -1 for its side to move
            [0.0, 0.0, 0.0],  # absorbing: a drawn game stays 0
        ], np.float32)
        got = np.stack([np.asarray(out.reward), np.asarray(out.discount), np.asarray(out.value)],
                       -1)
        np.testing.assert_allclose(got, expect, rtol=1e-7)
        assert all(x.dtype == jnp.float32 and x.shape == (5,) for x in out)


# --------------------------------------------------------------------------
# 3. Masking at every node.
# --------------------------------------------------------------------------

MASKING_POSITIONS = (MID_BLACK, MID_WHITE, BLOCK_BLACK, BLOCK_WHITE)


def adversarial_variables(seed: int):
    """A random net whose logits are +30 on every point occupied in any of the
    masking positions: at every node of their trees the occupied points would
    hold almost all of the prior if it were not masked."""
    v = random_variables(seed)
    occupied = np.zeros(A, np.float32)
    for p in MASKING_POSITIONS:
        occupied += board_of(p) != 0
    boost = 30.0 * (occupied > 0)
    params = dict(v["params"])
    params["Dense_0"] = dict(params["Dense_0"], bias=params["Dense_0"]["bias"] + boost)
    return {"params": params, "batch_stats": v["batch_stats"]}


@pytest.mark.parametrize("algorithm", ["puct", "gumbel"])
def test_no_illegal_move_anywhere_in_the_tree(searches, algorithm):
    states = stack([state_of(p) for p in MASKING_POSITIONS])
    variables = adversarial_variables(2)
    out = searches[algorithm](variables, jax.random.key(4), states, GAMMA)
    t = to_numpy(out.search_tree)
    emb = t.embeddings
    assert not emb.illegal.any(), "a node was reached through an occupied point"
    n_edges = 0
    for b, n, a in zip(*np.nonzero(t.children_index >= 0), strict=True):
        if not emb.done[b, n]:
            assert emb.board[b, n, a] == 0, (b, n, a)
            n_edges += 1
    assert n_edges > BATCH * SIMS // 2
    # The prior of every unfinished node is exactly 0 on occupied points.
    prior = np.asarray(jax.nn.softmax(jnp.asarray(t.children_prior_logits)))
    live = ~emb.done
    assert (prior[live] * (emb.board[live] != 0)).max() == 0.0
    # Root: no visits, no weight and no chosen action on occupied points.
    legal = np.asarray(jax.vmap(RULES.legal_mask)(states))
    assert (t.children_visits[:, 0][~legal] == 0).all()
    assert (np.asarray(out.action_weights)[~legal] == 0).all()
    assert legal[np.arange(BATCH), np.asarray(out.action)].all()
    # Each expanded node's position (packed in the tree) is its parent's after
    # its edge's move.
    tree = out.search_tree
    assert isinstance(tree.embeddings, Packed)
    rows, nodes = np.nonzero(t.node_visits > 0)
    rows, nodes = rows[nodes > 0], nodes[nodes > 0]
    at = lambda n: jax.tree.map(lambda x: x[rows, n], tree.embeddings)  # noqa: E731
    want = jax.jit(jax.vmap(RULES.step))(unpack(at(t.parents[rows, nodes])),
                                         jnp.asarray(t.action_from_parent[rows, nodes]))
    got = unpack(at(nodes))
    for name, w in want._asdict().items():
        np.testing.assert_array_equal(np.asarray(getattr(got, name)), np.asarray(w),
                                      err_msg=name)


# --------------------------------------------------------------------------
# 4. Known answers with a random-init net: take a win, block a four.
# --------------------------------------------------------------------------

KNOWN_ANSWER_POSITIONS = (WIN_BLACK, WIN_WHITE, BLOCK_BLACK, BLOCK_WHITE)


@pytest.mark.parametrize("algorithm", ["puct", "gumbel"])
def test_search_takes_a_one_move_win(searches, algorithm):
    states = stack([state_of(p) for p in KNOWN_ANSWER_POSITIONS])
    for seed in range(3):
        out = searches[algorithm](random_variables(seed), jax.random.key(10 + seed), states,
                                  0.95)
        action = np.asarray(out.action)
        assert action[0] in WIN_BLACK_MOVES, (seed, action)
        assert action[1] in WIN_WHITE_MOVES, (seed, action)
        q = root_q(out.search_tree)
        assert q[0, action[0]] == 1.0 and q[1, action[1]] == 1.0


def test_puct_blocks_a_four(searches):
    """Every move but the block loses at once; PUCT finds the refutations
    (with 30 of 30 random nets when this was written).

    Gumbel MuZero is not asked to: its deterministic interior selection visits
    moves in proportion to softmax(prior + completed Q) and, with a random
    net, often never tries the opponent's winning reply below a root move, so
    it missed the block with 20 of those 30 nets.
    """
    states = stack([state_of(p) for p in KNOWN_ANSWER_POSITIONS])
    for seed in range(3):
        out = searches["puct"](random_variables(seed), jax.random.key(10 + seed), states, 0.95)
        action = np.asarray(out.action)
        assert action[2] == BLOCK_MOVE and action[3] == BLOCK_MOVE, (seed, action)
        # The other moves' q are close to the loss they are: -gamma * (~1).
        q = root_q(out.search_tree)
        visits = np.asarray(out.search_tree.children_visits[:, 0])
        for b in (2, 3):
            others = (visits[b] > 0) & (np.arange(A) != BLOCK_MOVE)
            assert q[b, BLOCK_MOVE] > q[b, others].max()


# --------------------------------------------------------------------------
# 4b. Forced moves (SearchConfig.forced_moves).
# --------------------------------------------------------------------------

def double_points(board, stone: int) -> set[int]:
    """Empty points where ``stone`` would have two or more winning points."""
    out = set()
    for a in np.flatnonzero(np.asarray(board) == 0):
        b = np.array(board)
        b[a] = stone
        if len(winning_points(b, stone)) >= 2:
            out.add(int(a))
    return out


def forced_reference(board, stone: int) -> set[int]:
    """The mover's own fives, else the blocks of the opponent's fives, else
    the mover's open fours and double fours, else every empty point."""
    return (winning_points(board, stone) or winning_points(board, -stone)
            or double_points(board, stone)
            or {int(a) for a in np.flatnonzero(np.asarray(board) == 0)})


def test_search_moves_are_the_forced_ones():
    rng = np.random.default_rng(3)
    boards = []
    while len(boards) < 100:
        n = int(rng.integers(6, 18))
        board = np.zeros(A, np.int8)
        cells = rng.permutation(A)[: 2 * n + int(rng.integers(0, 2))]
        board[cells[0::2]], board[cells[1::2]] = 1, -1
        if not has_five(board, 1) and not has_five(board, -1):
            boards.append(board)
    boards += [board_of(p) for p in KNOWN_ANSWER_POSITIONS + (MID_BLACK, MID_WHITE)]
    states = stack([state_of_board(b) for b in boards])
    legal = np.asarray(jax.vmap(RULES.legal_mask)(states))
    np.testing.assert_array_equal(np.asarray(tactics.search_moves(RULES, states)), legal)
    got = np.asarray(jax.jit(tactics.search_moves, static_argnums=(0, 2))(RULES, states, True))
    kinds = collections.Counter()
    for b, board in enumerate(boards):
        me = 1 if int(states.to_play[b]) == BLACK else -1
        want = forced_reference(board, me)
        assert set(np.flatnonzero(got[b]).tolist()) == want, (b, board.reshape(SIZE, SIZE))
        kinds["win" if winning_points(board, me) else
              "block" if winning_points(board, -me) else
              "double" if double_points(board, me) else "free"] += 1
    assert min(kinds["win"], kinds["block"], kinds["double"], kinds["free"]) >= 3, kinds


LINE_ARRAY = np.asarray(LINES)


def fives_points_np(board, stone: int) -> np.ndarray:
    """bool[A]: ``winning_points`` as a mask: every empty point if the board
    holds a five of ``stone`` already, else the empty point of each window
    of five that holds four of ``stone``."""
    board = np.asarray(board)
    windows = board[LINE_ARRAY]  # [W, 5]
    if (windows == stone).all(-1).any():
        return board == 0
    hit = ((windows == stone).sum(-1) == 4) & ((windows == 0).sum(-1) == 1)
    out = np.zeros(A, bool)
    out[LINE_ARRAY[hit][windows[hit] == 0]] = True
    return out


def threat_answers_reference(board, stone: int) -> set[int]:
    """When the opponent has open-four / double-four points: the mover's fours
    and the points after which the opponent has none, found by playing every
    empty point and then every reply."""
    out = set()
    for p in np.flatnonzero(np.asarray(board) == 0):
        after = np.array(board)
        after[p] = stone
        if fives_points_np(after, stone).any() or not has_doubles(after, -stone):
            out.add(int(p))
    return out


def has_doubles(board, stone: int) -> bool:
    """``double_points`` is not empty (numpy)."""
    return any(fives_points_np(np.where(np.arange(A) == a, stone, board), stone).sum() >= 2
               for a in np.flatnonzero(np.asarray(board) == 0))


def random_board(rng, low: int, high: int) -> np.ndarray:
    """k black and k white stones on random points, k drawn from [low, high)."""
    k = int(rng.integers(low, high))
    board = np.zeros(A, np.int8)
    cells = rng.permutation(A)[: 2 * k]
    board[cells[0::2]], board[cells[1::2]] = 1, -1
    return board


def random_threat_boards(n: int, seed: int) -> list[np.ndarray]:
    """Boards without fives where the mover has no five, no five to block and
    no open four to make, but the opponent has an open-four point."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        board = random_board(rng, 4, 12)
        if has_five(board, 1) or has_five(board, -1):
            continue
        if (not fives_points_np(board, 1).any() and not fives_points_np(board, -1).any()
                and not has_doubles(board, 1) and has_doubles(board, -1)):
            out.append(board)
    return out


def check_answers(boards, answers, options: tuple, checked: str, min_restricted: int):
    """``search_moves(..., *options)`` on ``boards`` against the reference
    ``answers``: exact when every candidate is checked against every threat
    (``checked`` names the module's limit on threats); with few checked, never
    fewer moves; without the last option, every move."""
    states = stack([state_of_board(b) for b in boards])
    # No answer at all (threats that no stone stops): every move searched.
    want = [a or set(np.flatnonzero(b == 0).tolist()) for a, b in zip(answers, boards, strict=True)]
    assert sum(0 < len(a) < int((b == 0).sum())
               for a, b in zip(answers, boards, strict=True)) >= min_restricted
    fn = lambda s: tactics.search_moves(RULES, s, *options)  # noqa: E731
    with unittest.mock.patch.multiple(tactics, ANSWER_CANDIDATES=A, **{checked: A}):
        exact = np.asarray(jax.jit(fn)(states))
    for b in range(len(boards)):
        assert set(np.flatnonzero(exact[b]).tolist()) == want[b], (b, boards[b].reshape(7, 7))
    with unittest.mock.patch.multiple(tactics, ANSWER_CANDIDATES=2, **{checked: 1}):
        loose = np.asarray(jax.jit(lambda s: fn(s))(states))
    some = np.array([bool(a) for a in answers])  # (with none, loose may skip the fallback)
    assert (loose[some] >= exact[some]).all() and (loose[some] > exact[some]).any()
    fewer = options[:-1]
    plain = np.asarray(jax.jit(lambda s: tactics.search_moves(RULES, s, *fewer))(states))
    np.testing.assert_array_equal(plain, np.asarray(jax.vmap(RULES.legal_mask)(states)))


def test_threat_answers_are_the_moves_that_do_not_lose():
    """Tier 4 (``answer_threats``) against the brute-force reference."""
    boards = random_threat_boards(24, seed=5)
    check_answers(boards, [threat_answers_reference(b, 1) for b in boards], (True, True),
                  "THREATS_CHECKED", 20)


def test_answer_threats_needs_forced_moves():
    with pytest.raises(ValueError, match="search.answer_threats.*forced_moves"):
        SearchConfig(answer_threats=True)
    assert SearchConfig(forced_moves=True, answer_threats=True).answer_threats


DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


def on_line(q: int, d: int, k: int) -> int | None:
    """The point ``k`` steps from ``q`` along direction ``d`` (None off the board)."""
    r, c = divmod(q, SIZE)
    rr, cc = r + k * DIRECTIONS[d][0], c + k * DIRECTIONS[d][1]
    return rr * SIZE + cc if 0 <= rr < SIZE and 0 <= cc < SIZE else None


@functools.cache
def line_through(q: int, d: int) -> dict[int, int]:
    """The points of line ``d`` through ``q``, by their steps from ``q``."""
    return {k: p for k in range(-SIZE, SIZE + 1) if (p := on_line(q, d, k)) is not None}


def line_fives(board, q: int, d: int, stone: int) -> int:
    """With ``stone`` on ``q``: the empty points within 4 of it on line ``d``
    where a second stone makes a run of five or more through both."""
    line = line_through(q, d)
    count = 0
    for k in (-4, -3, -2, -1, 1, 2, 3, 4):
        f = line.get(k)
        if f is None or board[f] != 0:
            continue

        def cell(j, k=k):  # the board with stones on q and f; None off the board
            return stone if j in (0, k) else board[line[j]] if j in line else None
        lo, hi = min(0, k), max(0, k)
        while cell(lo - 1) == stone:
            lo -= 1
        while cell(hi + 1) == stone:
            hi += 1
        inside = all(cell(j) == stone for j in range(min(0, k), max(0, k) + 1))
        count += inside and hi - lo + 1 >= 5
    return count


def is_four_three(board, q: int, stone: int) -> bool:
    """A stone on empty ``q`` makes a four on one line and, on another, a point
    within 4 where a second stone makes two five points on that line."""
    b = np.asarray(board).tolist()
    b[q] = stone
    fours = [line_fives(b, q, d, stone) >= 1 for d in range(4)]
    if not any(fours):
        return False

    def three(e: int) -> bool:
        line = line_through(q, e)
        rs = [line.get(k) for k in (-4, -3, -2, -1, 1, 2, 3, 4)]
        return any(r is not None and b[r] == 0 and line_fives(b, r, e, stone) >= 2 for r in rs)

    return any(three(e) for e in range(4) if any(fours[d] for d in range(4) if d != e))


def four_three_reference(board, stone: int) -> set[int]:
    return {int(q) for q in np.flatnonzero(np.asarray(board) == 0)
            if is_four_three(board, q, stone)}


def four_three_answers_reference(board, stone: int) -> set[int]:
    """The mover's fours and the points after which none of the opponent's
    four-three points is left (a mover's stone makes the opponent no new one)."""
    threats = four_three_reference(board, -stone)
    out = set()
    for p in np.flatnonzero(np.asarray(board) == 0):
        after = np.array(board)
        after[p] = stone
        if fives_points_np(after, stone).any() or not any(
                after[q] == 0 and is_four_three(after, q, -stone) for q in threats):
            out.add(int(p))
    return out


def planted_board(rng, stone: int = -1) -> np.ndarray:
    """A near four-three of ``stone`` around a random empty point q off the
    edges: three
    stones in a 5-point window through q on one line, two in a 4-point window
    on another (some cut off by the board's edge); then as many stones of the
    other colour and a few of each at random, black and white equal in number."""
    board = np.zeros(A, np.int8)
    q = int(rng.integers(2, SIZE - 2)) * SIZE + int(rng.integers(2, SIZE - 2))
    d, e = rng.choice(4, size=2, replace=False)
    for line, stones, width in ((d, 3, 5), (e, 2, 4)):
        start = int(rng.integers(-width + 1, 1))
        offsets = [k for k in range(start, start + width) if k != 0]
        for k in rng.choice(offsets, size=stones, replace=False):
            p = on_line(q, int(line), int(k))
            if p is not None:
                board[p] = stone
    empty = [p for p in rng.permutation(A) if board[p] == 0 and p != q]
    extra = int(rng.integers(0, 4))
    for colour, count in ((stone, extra), (-stone, extra + int((board == stone).sum()))):
        for _ in range(count):
            board[empty.pop()] = colour
    return board


def random_four_three_boards(n: int, seed: int) -> list[np.ndarray]:
    """Boards without fives where neither side has a five point, an open-four
    or double-four point, and the opponent of the mover has a four-three point."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        board = planted_board(rng)
        if (has_five(board, 1) or has_five(board, -1) or fives_points_np(board, 1).any()
                or fives_points_np(board, -1).any()):
            continue
        if not has_doubles(board, 1) and not has_doubles(board, -1) \
                and four_three_reference(board, -1):
            out.append(board)
    return out


def test_four_three_points_match_the_reference():
    rng = np.random.default_rng(11)
    boards = [planted_board(rng, 1 if i % 2 else -1) for i in range(60)]
    fn = jax.jit(jax.vmap(lambda b, who: tactics.four_three_points(RULES, b, who)))
    found = 0
    for who in (1, -1):
        got = np.asarray(fn(jnp.asarray(np.stack(boards)), jnp.full(len(boards), who)))
        for b, board in enumerate(boards):
            want = four_three_reference(board, who)
            assert set(np.flatnonzero(got[b]).tolist()) == want, (who, board.reshape(7, 7))
            found += len(want)
    assert found >= 12, found


def test_four_three_answers_are_the_reference():
    """Tier 5 (``answer_four_threes``) against the plain-Python reference."""
    boards = random_four_three_boards(16, seed=7)
    check_answers(boards, [four_three_answers_reference(b, 1) for b in boards],
                  (True, True, True), "FOUR_THREES_CHECKED", 12)


def test_both_threats_are_answered_together():
    """Facing open-four and four-three points at once: the moves that answer
    both when there are any (else those of the open fours), and without
    ``answer_four_threes`` the open fours' answers alone."""
    rng = np.random.default_rng(3)
    boards = []
    while len(boards) < 12:
        board = planted_board(rng)
        if (not has_five(board, 1) and not has_five(board, -1)
                and not fives_points_np(board, 1).any() and not fives_points_np(board, -1).any()
                and not has_doubles(board, 1) and has_doubles(board, -1)
                and four_three_reference(board, -1)):
            boards.append(board)
    states = stack([state_of_board(b) for b in boards])
    fn = lambda s, *o: tactics.search_moves(RULES, s, True, True, *o)  # noqa: E731
    with unittest.mock.patch.multiple(tactics, ANSWER_CANDIDATES=A, THREATS_CHECKED=A,
                                      FOUR_THREES_CHECKED=A):
        with_43 = np.asarray(jax.jit(lambda s: fn(s, True))(states))
        without = np.asarray(jax.jit(fn)(states))
    narrowed = 0
    for b, board in enumerate(boards):
        empty = set(np.flatnonzero(board == 0).tolist())
        open_fours = threat_answers_reference(board, 1) or empty
        both = open_fours & four_three_answers_reference(board, 1)
        assert set(np.flatnonzero(without[b]).tolist()) == open_fours, b
        assert set(np.flatnonzero(with_43[b]).tolist()) == (both or open_fours), b
        narrowed += bool(both) and both != open_fours
    assert narrowed >= 3, narrowed


def test_answer_four_threes_needs_answer_threats():
    with pytest.raises(ValueError, match="search.answer_four_threes.*answer_threats"):
        SearchConfig(forced_moves=True, answer_four_threes=True)
    assert SearchConfig(forced_moves=True, answer_threats=True,
                        answer_four_threes=True).answer_four_threes


def threat_value_reference(board, stone: int, gamma: float) -> float | None:
    """``tactics.threat_value`` by playing it out: the mover's five; nothing if
    it must block; its open or double four; its four-three; else a four
    (exactly one five point) whose block leaves the opponent no five point
    and the mover one of those two."""
    if fives_points_np(board, stone).any():
        return 1.0
    if fives_points_np(board, -stone).any():
        return None
    if has_doubles(board, stone):
        return gamma ** 2
    if four_three_reference(board, stone):
        return gamma ** 4
    for f in np.flatnonzero(np.asarray(board) == 0):
        after = np.array(board)
        after[f] = stone
        fives = fives_points_np(after, stone)
        if fives.sum() != 1:
            continue
        after[int(np.argmax(fives))] = -stone
        if not fives_points_np(after, -stone).any() and (
                has_doubles(after, stone) or four_three_reference(after, stone)):
            return gamma ** 6
    return None


def threat_boards(per_kind: int, seed: int):
    """Random and planted boards without fives, for black to read, until each
    of ``threat_value``'s outcomes has ``per_kind`` of them (the kinds with a
    value, and "nothing read" for a five to block and for no win)."""
    rng = np.random.default_rng(seed)
    kinds: dict = collections.defaultdict(list)
    while min(len(kinds[k]) for k in (1.0, "block", GAMMA ** 2, GAMMA ** 4, GAMMA ** 6,
                                      None)) < per_kind:
        board = planted_board(rng, 1) if rng.random() < 0.5 else random_board(rng, 4, 10)
        if has_five(board, 1) or has_five(board, -1):
            continue
        value = threat_value_reference(board, 1, GAMMA)
        kind = "block" if value is None and fives_points_np(board, -1).any() else value
        if len(kinds[kind]) < per_kind:
            kinds[kind].append(board)
    return [(b, k) for k, boards in kinds.items() for b in boards]


def test_threat_value_is_the_reference():
    cases = threat_boards(6, seed=5)
    boards = jnp.asarray(np.stack([b for b, _ in cases]))
    fn = jax.jit(jax.vmap(lambda b: tactics.threat_value(RULES, b, jnp.int8(1), GAMMA)))
    with unittest.mock.patch.object(tactics, "FOURS_READ", A):
        known, value = map(np.asarray, fn(boards))
    for (board, kind), k, v in zip(cases, known, value, strict=True):
        want = None if kind == "block" else kind
        assert k == (want is not None), (kind, board.reshape(SIZE, SIZE))
        if want is not None:
            assert v == pytest.approx(want, abs=1e-6), (kind, board.reshape(SIZE, SIZE))


def test_a_four_whose_block_makes_a_four_is_not_read_as_a_win():
    """Black's four at (row 3, column 3) forces the block at (3, 4), after
    which (4, 3) is a four-three; with white's three above (3, 4) that block
    makes white a four, which black must answer, and nothing is read."""
    countered = board_of("""
        O . . . O . O
        . . . . O . O
        . . . . O . .
        X X X . . . .
        . X X . . . .
        . . . X . . .
        . . . X . . O
    """)
    free = board_of("""
        O O . . . . O
        . . . . . . O
        . . . . . O .
        X X X . . . .
        . X X . . . .
        . . . X . . O
        . . . X . . O
    """)
    fn = jax.jit(jax.vmap(lambda b: tactics.threat_value(RULES, b, jnp.int8(1), GAMMA)))
    known, value = map(np.asarray, fn(jnp.asarray(np.stack([countered, free]))))
    assert threat_value_reference(countered, 1, GAMMA) is None
    assert threat_value_reference(free, 1, GAMMA) == pytest.approx(GAMMA ** 6)
    assert not known[0]
    assert known[1] and value[1] == pytest.approx(GAMMA ** 6)


def test_threat_values_replace_the_nets_value_of_the_children():
    """``recurrent_fn`` with ``threat_values``: each child whose side to move
    has a win read takes its value; the others keep the net's; the rest of the
    output is the same as without."""
    cases = threat_boards(3, seed=6)
    # The mover is white: the last white stone is taken back and replayed.
    parents, actions, want = [], [], []
    for board, _ in cases:
        whites = np.flatnonzero(board == -1)
        if len(whites) == 0:
            continue
        a = int(whites[-1])
        parent = board.copy()
        parent[a] = 0
        parents.append(state_of_board(parent))
        actions.append(a)
        want.append(threat_value_reference(board, 1, GAMMA))
    variables = random_variables(3)
    states, actions = stack(parents), jnp.asarray(actions, jnp.int32)
    outs = {}
    for on in (False, True):
        fn = search.make_recurrent_fn(RULES, NETS, GAMMA, threat_values=on)
        with unittest.mock.patch.object(tactics, "FOURS_READ", A):
            outs[on] = jax.jit(fn)(variables, jax.random.PRNGKey(0), actions, states)[0]
    plain, read = outs[False], outs[True]
    np.testing.assert_array_equal(plain.prior_logits, read.prior_logits)
    np.testing.assert_array_equal(plain.reward, read.reward)
    replaced = 0
    for i, w in enumerate(want):
        expected = float(plain.value[i]) if w is None else w
        assert float(read.value[i]) == pytest.approx(expected, abs=1e-6), i
        replaced += w is not None
    assert replaced >= 8 and replaced < len(want), (replaced, len(want))


def test_threat_values_must_be_a_bool():
    with pytest.raises(ValueError, match="search.threat_values"):
        SearchConfig(threat_values=1)


@pytest.fixture(scope="module")
def forced_searches():
    out = {}
    for algorithm in ("puct", "gumbel"):
        cfg = dataclasses.replace(search_config(algorithm), forced_moves=True)

        def run(variables, key, states, gamma, cfg=cfg):
            return run_search(cfg, gamma, variables, key, states)

        out[algorithm] = jax.jit(run)
    return out


@pytest.mark.parametrize("algorithm", [pytest.param("puct", marks=pytest.mark.long), "gumbel"])
def test_forced_search_expands_only_forced_moves(forced_searches, algorithm):
    """Every expanded edge of every node is one of that node's forced moves
    when it has any, and the root plays them: Gumbel, which misses the block
    with plain search (``test_puct_blocks_a_four``), blocks."""
    states = stack([state_of(p) for p in (MID_BLACK, MID_WHITE, BLOCK_BLACK, BLOCK_WHITE)])
    restricted = 0
    for seed in range(2):
        out = forced_searches[algorithm](adversarial_variables(seed), jax.random.key(seed),
                                         states, GAMMA)
        action = np.asarray(out.action)
        assert action[1] in {0, 40} and action[2] == BLOCK_MOVE and action[3] == BLOCK_MOVE
        t = to_numpy(out.search_tree)
        emb = t.embeddings
        for b, n in zip(*np.nonzero((t.children_index >= 0).any(-1)), strict=True):
            if emb.done[b, n]:
                continue
            board = emb.board[b, n]
            allowed = forced_reference(board, 1 if emb.to_play[b, n] == BLACK else -1)
            expanded = set(np.flatnonzero(t.children_index[b, n] >= 0).tolist())
            assert expanded <= allowed, (b, n, expanded - allowed)
            restricted += len(allowed) < int((board == 0).sum())
    assert restricted >= 20, restricted


# --------------------------------------------------------------------------
# 5. Move policies.
# --------------------------------------------------------------------------

def test_temperature_schedules():
    moves = jnp.arange(60)
    semi = np.asarray(search.temperature(SelfPlayConfig(move_policy="semi_stochastic"), moves))
    # 0.8 ** 14 = 0.044 >= 0.04 > 0.8 ** 15: moves 0..29 sample, argmax from move 30.
    expect = np.array([0.8 ** (m // 2) if m < 30 else 0.0 for m in range(60)], np.float32)
    np.testing.assert_allclose(semi, expect, rtol=1e-5)
    assert semi[29] > 0 and semi[30] == 0 and semi[0] == 1.0
    assert (np.asarray(search.temperature(SelfPlayConfig(move_policy="stochastic"), moves))
            == 1.0).all()
    assert (np.asarray(search.temperature(SelfPlayConfig(move_policy="deterministic"), moves))
            == 0.0).all()
    custom = SelfPlayConfig(tau_base=0.5, tau_min=0.1)
    np.testing.assert_allclose(np.asarray(search.temperature(custom, jnp.arange(10))),
                               [1, 1, .5, .5, .25, .25, .125, .125, 0, 0])


def test_gating_and_selfplay_choose_gumbel_moves_by_one_rule():
    """``Searcher.play`` is the one rule: a Gumbel player never samples its move
    from the improved policy at a temperature; its moves vary by the root's
    Gumbel noise. So a gating player (``arena.mcts_player`` with the self-play
    move policy) plays self-play's move (``selfplay.make_move``) from the same
    key where the temperature is above 0, and the noise-free search's choice
    where it is 0."""
    from agz_jax.config.schema import Config, GameConfig, NetConfig
    from agz_jax.match import arena
    from agz_jax.training import run, selfplay

    rules = Rules(SIZE)
    empty = stack([state_of_board(np.zeros(A, np.int8))] * 8)
    for policy in ("stochastic", "deterministic"):
        cfg = Config(game=GameConfig(size=SIZE),
                     net=NetConfig(filters=8, blocks=1, value_hidden=8, double=True),
                     search=SearchConfig(algorithm="gumbel", num_simulations=8,
                                         max_considered_actions=4),
                     selfplay=SelfPlayConfig(num_games=8, move_policy=policy))
        nets = run.make_networks(cfg.net, board_size=cfg.game.size, features=cfg.features)
        variables = nets.init(jax.random.PRNGKey(0))
        searcher = search.Searcher.of(rules, nets, search=cfg.search, decay=cfg.decay)
        gate = arena.mcts_player(searcher, variables, num_simulations=8, move_cfg=cfg.selfplay)
        key = jax.random.PRNGKey(5)
        gated = np.asarray(jax.jit(gate)(key, empty))
        if policy == "stochastic":
            move = selfplay.make_move(rules, nets, search=cfg.search, decay=cfg.decay,
                                      selfplay=cfg.selfplay)
            played, _, _ = jax.jit(move)(variables, empty, key)
            np.testing.assert_array_equal(gated, np.asarray(played))
            assert len(set(gated.tolist())) > 1  # the noise varies the 8 games' moves
        else:
            run_8 = jax.jit(functools.partial(searcher.run, num_simulations=8))
            plain = run_8(variables, jax.random.split(key)[0], empty)
            np.testing.assert_array_equal(gated, np.asarray(plain.action))
            assert len(set(gated.tolist())) == 1


N_SAMPLES = 20_000
@jax.jit
def _select(key, visits, legal, tau):
    """The move rule of ``Searcher.choose``: sampled where tau > 0, else greedy."""
    greedy = search.greedy(visits, legal, jnp.zeros_like(visits))
    return jnp.where(tau > 0, search.sample_move(key, visits, legal, tau), greedy)


def sample_frequencies(visits, legal, tau, seed=0):
    """Frequencies of N_SAMPLES moves drawn from one row (one key, N_SAMPLES rows)."""
    visits = jnp.broadcast_to(jnp.asarray(visits, jnp.float32), (N_SAMPLES, len(visits)))
    legal = jnp.broadcast_to(jnp.asarray(legal), visits.shape)
    tau = jnp.broadcast_to(jnp.asarray(tau, jnp.float32), (N_SAMPLES,))
    moves = _select(jax.random.key(seed), visits, legal, tau)
    assert moves.dtype == jnp.int32 and moves.shape == (N_SAMPLES,)
    return np.bincount(np.asarray(moves), minlength=visits.shape[1]) / N_SAMPLES


def test_greedy_breaks_ties_by_the_prior():
    visits = jnp.array([[5.0, 5.0, 1.0, 9.0], [0.0, 0.0, 0.0, 3.0]])
    legal = jnp.array([[True, True, True, False], [True, True, False, False]])
    prior = jnp.array([[0.1, 0.6, 0.3, 0.0], [0.2, 0.7, 0.1, 0.0]])
    assert search.greedy(visits, legal, prior).tolist() == [1, 1]


def test_select_move():
    visits = np.array([50, 10, 0, 30, 100, 10], np.float32)
    legal = np.array([True, True, True, True, False, True])
    # tau 0: argmax among legal moves, the illegal 100 ignored.
    freq = sample_frequencies(visits, legal, 0.0)
    assert freq[0] == 1.0
    # tau 1: proportional to visits of legal moves.
    p = np.where(legal, visits, 0) / np.where(legal, visits, 0).sum()
    np.testing.assert_allclose(sample_frequencies(visits, legal, 1.0), p, atol=0.015)
    # tau 0.5: proportional to N^2.
    p2 = np.where(legal, visits, 0) ** 2 / (np.where(legal, visits, 0) ** 2).sum()
    np.testing.assert_allclose(sample_frequencies(visits, legal, 0.5, seed=1), p2, atol=0.015)
    # small tau concentrates on the most visited legal move.
    assert sample_frequencies(visits, legal, 0.05, seed=2)[0] > 0.999
    # no visits on any legal move: uniform over the legal moves.
    freq = sample_frequencies([0, 0, 0, 0, 100, 0], legal, 1.0, seed=3)
    assert freq[4] == 0.0
    np.testing.assert_allclose(freq[legal], 0.2, atol=0.015)
    # tau 0 with no visits on legal moves: still a legal move.
    assert sample_frequencies([0, 0, 0, 0, 100, 0], legal, 0.0)[4] == 0.0
    # tau per row: half the rows greedy, half sampled.
    tau = np.where(np.arange(N_SAMPLES) % 2 == 0, 0.0, 1.0)
    freq = sample_frequencies(visits, legal, tau, seed=4)
    np.testing.assert_allclose(freq, 0.5 * np.eye(6)[0] + 0.5 * p, atol=0.015)


def test_dirichlet_noise_mixes_in_exactly_its_fraction():
    """P = 0.75 p + 0.25 eta with eta ~ Dir(alpha) over the legal moves only:
    no mass on occupied points, and E[P] = 0.75 p + 0.25 / num_legal however
    many points are occupied."""
    n, fraction = 4000, 0.25
    rng = np.random.default_rng(0)
    legal = np.zeros(A, bool)
    legal[rng.choice(A, 10, replace=False)] = True
    logits = search.mask_logits(jnp.asarray(rng.normal(size=(1, A)), jnp.float32),
                                jnp.asarray(legal[None]))
    p = np.asarray(jax.nn.softmax(logits))[0]
    noisy = jax.jit(search.add_dirichlet_noise, static_argnums=(3, 4))(
        jax.random.key(0), jnp.broadcast_to(logits, (n, A)),
        jnp.broadcast_to(jnp.asarray(legal), (n, A)), fraction, 0.3)
    mixed = np.asarray(jax.nn.softmax(noisy))
    assert (mixed[:, ~legal] == 0).all()
    np.testing.assert_allclose(mixed.sum(-1), 1.0, rtol=1e-5)
    assert (mixed >= (1 - fraction) * p - 1e-6).all()
    np.testing.assert_allclose(mixed.mean(0)[legal], (1 - fraction) * p[legal] + fraction / 10,
                               atol=0.01)


# --------------------------------------------------------------------------
# 6. mask_logits.
# --------------------------------------------------------------------------

def test_mask_logits():
    logits = jnp.array([[1.0, 50.0, -3.0, 2.0], [5.0, 1.0, 2.0, 3.0]], jnp.float32)
    legal = jnp.array([[True, False, True, True], [False, False, False, False]])
    masked = search.mask_logits(logits, legal)
    assert bool(jnp.isfinite(masked).all())
    assert float(masked[0, 1]) == float(jnp.finfo(jnp.float32).min)
    p = np.asarray(jax.nn.softmax(masked))
    assert p[0, 1] == 0.0
    expect = np.asarray(jax.nn.softmax(jnp.array([1.0, -3.0, 2.0])))
    np.testing.assert_allclose(p[0, [0, 2, 3]], expect, rtol=1e-6)
    # No legal move (a finished game): uniform, no NaN.
    np.testing.assert_array_equal(p[1], 0.25)
    assert not np.isnan(p).any()


# --------------------------------------------------------------------------
# 7. Our search loop (batched backward) against mctx's: the same tree.
# --------------------------------------------------------------------------

EQUIVALENCE_POSITIONS = (MID_BLACK, MID_WHITE, DEAD_DRAW, BLOCK_BLACK)


def mctx_puct():
    """The PUCT search of ``searches`` on ``mctx.search`` itself: the Searcher's
    roots, recurrent function, selection and keys, and mctx's loop."""
    cfg = search_config("puct")

    @jax.jit
    def run(variables, key, states, gamma):
        s = search.Searcher(rules=RULES, nets=NETS, settings=cfg, gamma=gamma)
        _, grow_key = s.keys(key)
        root, invalid = s.roots(variables, states)
        root_selection, interior_selection = s.selection(cfg.num_simulations)
        tree = mctx.search(variables, grow_key, root=root, recurrent_fn=s.recurrent_fn(),
                           root_action_selection_fn=root_selection,
                           interior_action_selection_fn=interior_selection,
                           num_simulations=cfg.num_simulations, invalid_actions=invalid)
        return s.result(tree)

    return run


@pytest.mark.routed
@pytest.mark.parametrize("gamma", [GAMMA, pytest.param(1.0, marks=pytest.mark.long)])
def test_search_tree_matches_mctx_search_puct(gamma):
    """The same tree, with the shipped (routed) nets and programs of its own:
    evaluated plainly (tests/conftest.py), the net's ops fuse with each loop's
    own and the two programs' values part in the last bit."""
    states = stack([state_of(p) for p in EQUIVALENCE_POSITIONS])
    ours, theirs = make_searches()["puct"], mctx_puct()
    for seed in (1, 2):
        variables, key = random_variables(seed), jax.random.key(20 + seed)
        got = ours(variables, key, states, gamma)
        want = theirs(variables, key, states, gamma)
        # Rows reach different depths, so the batched loop runs on after some
        # rows are back at their roots.
        t = to_numpy(got.search_tree)
        depth = np.zeros(t.parents.shape, int)
        for n in range(1, SIMS + 1):
            depth[:, n] = depth[np.arange(BATCH), t.parents[:, n]] + 1
        assert len(set(depth.max(1))) > 1, depth.max(1)
        assert_same_tree(got.search_tree, want.search_tree)
        np.testing.assert_array_equal(got.action, want.action)
        np.testing.assert_array_equal(got.action_weights, want.action_weights)


def search_inputs(variables, states, gamma):
    """(root, recurrent_fn, invalid_actions) as ``run_search`` builds them."""
    root = search.make_root_fn(RULES, NETS)(variables, states)
    legal = jax.vmap(RULES.legal_mask)(states)
    invalid = ~legal & jnp.any(legal, axis=-1, keepdims=True)
    return root, search.make_recurrent_fn(RULES, NETS, gamma), invalid


@pytest.fixture(scope="module")
def gumbel_policies():
    """'ours' (mctx_loop.gumbel_policy), 'mctx' (mctx.gumbel_muzero_policy): jitted
    (variables, key, states, gamma, gumbel_scale) -> PolicyOutput, every legal
    root move considered as in ``searches``."""

    def make(policy):
        def run(variables, key, states, gamma, gumbel_scale):
            root, recurrent_fn, invalid = search_inputs(variables, states, gamma)
            return policy(params=variables, rng_key=key, root=root, recurrent_fn=recurrent_fn,
                          num_simulations=SIMS, invalid_actions=invalid,
                          max_num_considered_actions=A, gumbel_scale=gumbel_scale)

        return jax.jit(run)

    return {"ours": make(mctx_loop.gumbel_policy), "mctx": make(mctx.gumbel_muzero_policy)}


def test_gumbel_policy_matches_mctx(searches, gumbel_policies):
    states = stack([state_of(p) for p in EQUIVALENCE_POSITIONS])
    for seed in (1, 2):
        variables, key = random_variables(seed), jax.random.key(30 + seed)
        want = gumbel_policies["mctx"](variables, key, states, GAMMA, 1.0)
        got = gumbel_policies["ours"](variables, key, states, GAMMA, 1.0)
        assert_same_tree(got.search_tree, want.search_tree)
        np.testing.assert_array_equal(got.action, want.action)
        np.testing.assert_allclose(got.action_weights, want.action_weights, rtol=1e-5, atol=1e-6)
        assert np.asarray(want.search_tree.extra_data.root_gumbel).std() > 0.5
    # run_search (no noise) is gumbel_muzero_policy with gumbel_scale 0.
    got = searches["gumbel"](variables, key, states, GAMMA)
    want = gumbel_policies["mctx"](variables, key, states, GAMMA, 0.0)
    assert_same_tree(got.search_tree, want.search_tree)
    np.testing.assert_array_equal(got.action, want.action)
    np.testing.assert_allclose(got.action_weights, want.action_weights, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------
# 8. bfloat16 inference (search.dtype).
# --------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ["puct", pytest.param("gumbel", marks=pytest.mark.long)])
def test_bfloat16_search_runs_with_float32_outputs(algorithm):
    """Double Networks computing in bfloat16 (``search.dtype``), under jit and
    vmap (over two sets of nets): the search's outputs and tree are float32 and
    finite, only legal moves are weighted, the one-move wins are still found,
    and the nets did compute in bfloat16 (the tree's values differ from a
    float32 search's)."""
    cfg = dataclasses.replace(search_config(algorithm), num_simulations=64)
    positions = (MID_BLACK, MID_WHITE, WIN_BLACK, WIN_WHITE)
    states = stack([state_of(p) for p in positions])

    @jax.jit
    def run(variables, key):
        outs = {}
        for dtype in ("float32", "bfloat16"):
            c = dataclasses.replace(cfg, dtype=dtype)
            outs[dtype] = jax.vmap(lambda v, c=c: run_search(c, GAMMA, v, key, states))(
                variables)
        return outs

    variables = jax.tree.map(lambda *xs: jnp.stack(xs), random_variables(5), random_variables(6))
    outs = to_numpy(run(variables, jax.random.key(3)))
    f32, bf16 = outs["float32"], outs["bfloat16"]
    for x in [*jax.tree.leaves(bf16.search_tree), bf16.action_weights]:
        if np.issubdtype(x.dtype, np.floating):
            assert x.dtype == np.float32 and np.isfinite(x).all()
    legal = np.asarray(jax.vmap(RULES.legal_mask)(states))  # [B, A]
    weights = bf16.action_weights  # [2 nets, B, A]
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    assert (weights[:, ~legal] == 0).all()
    assert legal[np.arange(len(positions)), bf16.action].all()
    assert set(bf16.action[:, 2]) <= WIN_BLACK_MOVES and set(bf16.action[:, 3]) <= WIN_WHITE_MOVES
    assert not np.array_equal(bf16.search_tree.node_values, f32.search_tree.node_values)


def test_greedy_ties_survive_float32_rounding():
    """Priors that differ by less than float32's spacing at the visit count."""
    visits = jnp.full((1, 3), 1.0)
    prior = jnp.array([[0.0150, 0.0151, 0.0149]])
    assert search.greedy(visits, jnp.ones((1, 3), bool), prior).tolist() == [1]


def test_puct_selection_breaks_exact_ties_to_the_lowest_action_whatever_the_key():
    """PUCT draws no tie-break noise: with equal priors at a fresh node every
    score ties and the lowest legal action is taken, for any key; a stone on it
    moves the choice to the next point."""
    rules = Rules(5)
    state = jax.tree.map(lambda x: x[None], rules.init())
    root = mctx.RootFnOutput(prior_logits=jnp.zeros((1, 25)), value=jnp.zeros(1),
                             embedding=state)
    tree = mctx_loop.start_tree(root, 4)
    select = jax.jit(lambda key, tree: search.puct_action_selection(
        key, jax.tree.map(lambda x: x[0], tree), 0, 0, c_puct=1.5,
        qtransform=search.raw_qvalues))
    picks = {int(select(jax.random.PRNGKey(k), tree)) for k in range(8)}
    assert picks == {0}
    taken = state._replace(board=state.board.at[0, 0].set(1))
    tree = mctx_loop.start_tree(root.replace(embedding=taken), 4)
    assert int(select(jax.random.PRNGKey(0), tree)) == 1
