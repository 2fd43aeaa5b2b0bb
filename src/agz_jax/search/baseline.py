"""The slow reference: plain Python + NumPy MCTS, one leaf and one net call at a time.

This is the baseline ``experiments/bench.py`` compares the batched JAX search
against. It implements the SAME search as ``agz_jax.search.searcher`` with
``algorithm='puct'`` and ``qtransform='raw'``, written the way a sequential
implementation would be (the original AlphaGomoku code is of this kind):

* selection: argmax over actions of nonzero prior of
  ``Q(s,a) + c_puct * P(s,a) * sqrt(N(s)) / (1 + N(s,a))``, where
  ``N(s) = 1 + sum_b N(s,b)`` (the node's own expansion counts once) and ``Q`` is
  the raw mean backed-up value, 0 for an unvisited child;
* expansion: ONE leaf per simulation, evaluated by the network at batch size 1
  through a jitted function (the net of the colour to move with Double
  Networks); illegal moves get prior exactly 0;
* backup with Winning Value Decay, in ``search.py``'s convention: a node's value
  is for its side to move; an ordinary edge has reward 0 and discount
  ``-gamma``, the edge of a winning move reward +1 and discount 0, and a
  finished position is worth -1 (decided) or 0 (draw) to its side to move. Per
  edge on the way up, ``value = reward + discount * value``; a node's value is
  the mean of its own evaluation and everything backed up through it.

A finished node is never expanded: reaching it again backs up its final value
(mctx expands it into absorbing copies of itself, which back up the same value,
so the visit counts agree). The rules are a small NumPy copy of
``agz_jax.game.gomoku`` (freestyle or standard). Nothing here is jitted except the
network; it is deliberately simple, not fast.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.nets.networks import Networks

# (logits float[A], value float) of one observation float32[H, W, 3] for `net`.
NetFn = Callable[[np.ndarray, int], tuple[np.ndarray, float]]

_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


@dataclass(frozen=True)
class Position:
    """One game position (the fields of ``gomoku.State``, as NumPy / Python values).

    board: int8[A], 0 empty, +1 black, -1 white; to_play 0 black / 1 white.
    """

    size: int
    board: np.ndarray
    to_play: int = 0
    last_action: int = -1
    num_moves: int = 0
    winner: int = -1
    done: bool = False
    rule: str = "freestyle"

    @classmethod
    def initial(cls, size: int, rule: str = "freestyle") -> Position:
        return cls(size, np.zeros(size * size, np.int8), rule=rule)

    def legal(self) -> np.ndarray:
        """bool[A]: empty points; none once the game is over."""
        return (self.board == 0) & (not self.done)

    def _wins(self, board: np.ndarray, action: int) -> bool:
        r, c = divmod(action, self.size)
        me = board[action]
        grid = board.reshape(self.size, self.size)
        for dr, dc in _DIRECTIONS:
            length = 1
            for sign in (1, -1):
                rr, cc = r + sign * dr, c + sign * dc
                while 0 <= rr < self.size and 0 <= cc < self.size and grid[rr, cc] == me:
                    length += 1
                    rr, cc = rr + sign * dr, cc + sign * dc
            if length == 5 or (length > 5 and self.rule == "freestyle"):
                return True
        return False

    def play(self, action: int) -> Position:
        """The position after the side to move plays ``action`` (must be legal)."""
        if self.done or self.board[action] != 0:
            raise ValueError(f"illegal move {action}")
        board = self.board.copy()
        board[action] = 1 - 2 * self.to_play
        won = self._wins(board, action)
        num_moves = self.num_moves + 1
        return Position(self.size, board, 1 - self.to_play, int(action), num_moves,
                        self.to_play if won else -1, won or num_moves == board.size, self.rule)

    def observe(self) -> np.ndarray:
        """float32[H, W, 3]: own stones, opponent stones, opponent's last move."""
        me = 1 - 2 * self.to_play
        last = np.zeros(self.board.size, bool)
        if self.last_action >= 0:
            last[self.last_action] = True
        planes = np.stack([self.board == me, self.board == -me, last], axis=-1)
        return planes.astype(np.float32).reshape(self.size, self.size, 3)

    def final_value(self) -> float:
        """Value of a finished position for its side to move: -1 decided, 0 draw."""
        return -1.0 if self.winner >= 0 else 0.0


@dataclass
class Node:
    """A tree node; edge statistics are arrays over the A actions."""

    position: Position
    prior: np.ndarray | None = None  # float64[A], 0 for illegal moves
    value: float = 0.0  # mean backed-up value, for the side to move here
    visits: int = 0
    children: dict[int, Node] = field(default_factory=dict)
    child_visits: np.ndarray | None = None  # int[A]
    child_reward: np.ndarray | None = None  # float64[A]
    child_discount: np.ndarray | None = None  # float64[A]


def make_net_fn(nets: Networks, variables) -> NetFn:
    """The network at batch size 1, jitted once: ``(obs [H,W,3], net) -> (logits, value)``.

    ``net`` picks one of the stacked nets (0 single net; 0 black / 1 white with
    Double Networks); only that net runs. The per-net variables are split on
    the host once, so a call costs exactly one batch-1 forward pass.
    """
    per_net = [jax.tree.map(lambda v, i=i: jax.device_put(np.asarray(v)[i]), variables)
               for i in range(nets.num_nets)]

    @jax.jit
    def apply(one, obs):
        logits, value = nets.apply_one(one, obs[None])
        return logits[0], value[0]

    def net_fn(obs: np.ndarray, net: int) -> tuple[np.ndarray, float]:
        logits, value = jax.device_get(apply(per_net[net], jnp.asarray(obs)))
        return np.asarray(logits, np.float64), float(value)

    return net_fn


def _evaluate(node: Node, net_fn: NetFn, num_nets: int) -> float:
    """Expand ``node``: set its prior from the net and return the net's value."""
    pos = node.position
    logits, value = net_fn(pos.observe(), pos.to_play if num_nets == 2 else 0)
    legal = pos.legal()
    logits = np.where(legal, logits - logits[legal].max(), -np.inf)
    prior = np.exp(logits)
    node.prior = prior / prior.sum()
    a = pos.board.size
    node.child_visits = np.zeros(a, np.int64)
    node.child_reward = np.zeros(a)
    node.child_discount = np.zeros(a)
    return value


def _select(node: Node, c_puct: float) -> int:
    """PUCT over actions of nonzero prior (raw Q, 0 when unvisited)."""
    q = np.zeros(node.prior.shape)
    for a, child in node.children.items():
        q[a] = node.child_reward[a] + node.child_discount[a] * child.value
    u = c_puct * node.prior * math.sqrt(node.visits) / (1 + node.child_visits)
    score = np.where(node.prior > 0, q + u, -np.inf)
    return int(np.argmax(score))


def search(position: Position, net_fn: NetFn, *, num_simulations: int, c_puct: float = 5.0,
           gamma: float = 0.95, num_nets: int = 1, dirichlet_fraction: float = 0.0,
           dirichlet_alpha: float = 0.3, rng: np.random.Generator | None = None) -> np.ndarray:
    """Run ``num_simulations`` simulations from an unfinished ``position``.

    Returns the root visit counts int[A]. ``dirichlet_fraction > 0`` mixes
    Dirichlet(alpha) noise over the legal moves into the root prior (self-play
    exploration), ``P = (1 - fraction) p + fraction eta``.
    """
    if position.done:
        raise ValueError("search from a finished position")
    root = Node(position)
    root.value = _evaluate(root, net_fn, num_nets)
    root.visits = 1
    if dirichlet_fraction > 0:
        rng = rng or np.random.default_rng()
        legal = position.legal()
        noise = np.zeros(root.prior.size)
        noise[legal] = rng.dirichlet(np.full(legal.sum(), dirichlet_alpha))
        root.prior = (1 - dirichlet_fraction) * root.prior + dirichlet_fraction * noise

    for _ in range(num_simulations):
        node, path = root, []
        # Descend through expanded nodes; stop at a new child or a finished node.
        while True:
            a = _select(node, c_puct)
            path.append((node, a))
            child = node.children.get(a)
            if child is None:
                child_pos = node.position.play(a)
                child = node.children[a] = Node(child_pos)
                if child_pos.done:
                    # The game ends here: reward +1 to a winning mover (0 for a
                    # draw), no discount, the finished position worth -1 (or 0).
                    node.child_reward[a] = -child_pos.final_value()
                    node.child_discount[a] = 0.0
                    leaf_value = child_pos.final_value()
                else:
                    node.child_discount[a] = -gamma
                    leaf_value = _evaluate(child, net_fn, num_nets)
                child.value, child.visits = leaf_value, 1
                break
            if child.position.done:
                leaf_value = child.position.final_value()
                child.visits += 1  # its value stays its final value
                break
            node = child
        for parent, a in reversed(path):
            leaf_value = parent.child_reward[a] + parent.child_discount[a] * leaf_value
            parent.value = (parent.value * parent.visits + leaf_value) / (parent.visits + 1)
            parent.visits += 1
            parent.child_visits[a] += 1
    return root.child_visits


def temperature(num_moves: int, tau_base: float = 0.8, tau_min: float = 0.04) -> float:
    """The paper's semi-stochastic tau = tau_base ** (move // 2), 0 (argmax) below tau_min."""
    tau = tau_base ** (num_moves // 2)
    return 0.0 if tau < tau_min else tau


def select_move(visits: np.ndarray, tau: float, rng: np.random.Generator) -> int:
    """pi ~ N^(1/tau) over visited moves; argmax of N when tau == 0."""
    if tau <= 0:
        return int(np.argmax(visits))
    logits = np.where(visits > 0, np.log(np.maximum(visits, 1e-30)) / max(tau, 1e-3), -np.inf)
    p = np.exp(logits - logits.max())
    return int(rng.choice(visits.size, p=p / p.sum()))


def play(positions: list[Position], net_fn: NetFn, *, num_moves: int, num_simulations: int,
         c_puct: float = 5.0, gamma: float = 0.95, num_nets: int = 1,
         dirichlet_fraction: float = 0.25, dirichlet_alpha: float = 0.3,
         seed: int = 0) -> dict:
    """Self-play ``num_moves`` moves of each game, one game and one leaf at a time.

    Returns ``{'positions', 'simulations', 'moves', 'seconds'}``.
    """
    rng = np.random.default_rng(seed)
    positions = list(positions)
    sims = moves = 0
    start = time.perf_counter()
    for g, pos in enumerate(positions):
        for _ in range(num_moves):
            if pos.done:
                break
            visits = search(pos, net_fn, num_simulations=num_simulations, c_puct=c_puct,
                            gamma=gamma, num_nets=num_nets, dirichlet_fraction=dirichlet_fraction,
                            dirichlet_alpha=dirichlet_alpha, rng=rng)
            pos = pos.play(select_move(visits, temperature(pos.num_moves), rng))
            sims += num_simulations
            moves += 1
        positions[g] = pos
    return {"positions": positions, "simulations": sims, "moves": moves,
            "seconds": time.perf_counter() - start}
