"""Tree search on mctx: PUCT and Gumbel, Winning Value Decay, move policies.

Value convention (mctx's): a node's value is from the perspective of the side
to move there; an edge carries ``reward`` for the side that moved and a
``discount`` applied to the child's value, so mctx's backward computes, per
edge, ``parent_return = reward + discount * child_return``.

Winning Value Decay (paper III.C) is ``winning_value_decay`` below, the one
place where backups are defined:

* an ordinary edge has ``reward = 0`` and ``discount = -gamma``: the value
  changes sign (the other side moves) and shrinks by ``gamma`` per ply;
* the edge of a winning move has ``reward = +1`` and ``discount = 0``: the mover
  has won; the finished position itself is worth ``-1`` to its side to move (a
  loss), ``0`` for a draw. Node values thus equal the decayed z labels of
  ``selfplay``: ``+1`` one ply before a win, ``-gamma`` two plies before, ...;
* a finished game is absorbing: any edge out of it has ``discount = 0`` and a
  ``reward`` equal to its own value, so extra visits leave it unchanged.

``gamma = 1`` is plain AlphaZero (discount -1).

Illegal moves are masked at every node: ``recurrent_fn`` gives them the lowest
finite logit (prior exactly 0) and the PUCT selection below never picks an
action that is illegal in the node's position. Gumbel's interior selection picks argmax of
``pi' - N/(1+sum N)``, which is strictly positive for some legal action and 0
for a zero-prior one, so it never picks an illegal move either (tested).

The loop itself (mctx's, with a batched backward pass, in chunks) is
``agz_jax.search.mctx_loop``; the moves a node may take and the wins read from the
stones are ``agz_jax.game.tactics``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import mctx

from agz_jax.config.sections import DecayConfig, SearchConfig, SelfPlayConfig
from agz_jax.game.gomoku import Rules, State, stone
from agz_jax.game.tactics import search_moves, threat_value
from agz_jax.nets.networks import Networks, cast_params, split
from agz_jax.search.mctx_loop import (
    continue_tree,
    gumbel_result,
    gumbel_selection,
    gumbel_tree,
    mask_logits,
    reuse,
    start_tree,
    with_root,
)
from agz_jax.search.packed import Packed, pack, unpack
from agz_jax.search.transpositions import Expansion, with_transpositions


class Backup(NamedTuple):
    reward: jax.Array
    discount: jax.Array
    value: jax.Array


def winning_value_decay(parent: State, child: State, net_value: jax.Array,
                        gamma: float) -> Backup:
    """Winning Value Decay: (reward, discount, value) of the edge parent -> child.

    Args:
      parent, child: batched states ``[B]`` before and after the move.
      net_value: float32[B], the net's value of ``child`` for its side to move.
      gamma: decay per ply, in (0, 1].
    """
    # Value of a finished position for its side to move: a decided game was
    # won by the previous mover.
    parent_final = jnp.where(parent.winner >= 0, -1.0, 0.0)
    child_final = jnp.where(child.winner >= 0, -1.0, 0.0)
    finished_now = child.done & ~parent.done

    reward = jnp.where(parent.done, parent_final, jnp.where(finished_now, -child_final, 0.0))
    discount = jnp.where(child.done, 0.0, -gamma)
    value = jnp.where(child.done, child_final, net_value)
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    return Backup(f32(reward), f32(jnp.broadcast_to(discount, reward.shape)), f32(value))



def make_root_fn(rules: Rules, nets: Networks, forced: bool = False,
                 answer_threats: bool = False, answer_four_threes: bool = False,
                 dtype: str = "float32"):
    """mctx's ``root_fn``: evaluate the roots with the nets, computing in
    ``dtype`` (``SearchConfig.dtype``; logits and values come back float32),
    and mask their priors to ``search_moves``."""
    def root_fn(variables, states: State, legal: jax.Array | None = None) -> mctx.RootFnOutput:
        """``legal``: the roots' ``search_moves`` when the caller has them."""
        obs = nets.observe(rules, states)
        logits, value = nets.evaluate(variables, obs, states.to_play, dtype=dtype)
        if legal is None:
            legal = search_moves(rules, states, forced, answer_threats, answer_four_threes)
        return mctx.RootFnOutput(
            prior_logits=mask_logits(logits, legal), value=value, embedding=pack(states)
        )

    return root_fn


def make_recurrent_fn(rules: Rules, nets: Networks, gamma: float, forced: bool = False,
                      answer_threats: bool = False, answer_four_threes: bool = False,
                      threat_values: bool = False, dtype: str = "float32") -> Expansion:
    """mctx's ``recurrent_fn``: play ``action``, evaluate the child with the
    nets (computing in ``dtype``, as ``make_root_fn``), restrict its moves
    (``search_moves``). With ``threat_values`` (``SearchConfig.threat_values``)
    a child whose side to move has a win read from the stones
    (``threat_value``) takes that win's value instead of the net's.

    It is a ``transpositions.Expansion``: the move, the evaluation (the nets, the
    tactics and the threat values, a function of the position alone while the
    nets' features do not read the order of the moves) and the backup's
    edge, so that a tree ``with_transpositions`` evaluates a position once."""

    def move(variables, key, action, states: Packed) -> Packed:
        del variables, key
        return pack(jax.vmap(rules.step)(unpack(states), action))

    def evaluate(variables, key, children: Packed):
        del key
        children = unpack(children)
        obs = nets.observe(rules, children)
        logits, value = nets.evaluate(variables, obs, children.to_play, dtype=dtype)
        if threat_values:
            known, read = jax.vmap(lambda b, p: threat_value(rules, b, stone(p), gamma))(
                children.board, children.to_play)
            value = jnp.where(known & ~children.done, read, value)
        legal = search_moves(rules, children, forced, answer_threats, answer_four_threes)
        return mask_logits(logits, legal), value

    def output(states: Packed, children: Packed, prior_logits, value):
        backup = winning_value_decay(unpack(states), unpack(children), value, gamma)
        return mctx.RecurrentFnOutput(reward=backup.reward, discount=backup.discount,
                                      prior_logits=prior_logits, value=backup.value)

    return Expansion(move, evaluate, output, lambda states: position_code(rules, unpack(states)))


def position_code(rules: Rules, states: State) -> jax.Array:
    """uint32[..., W]: each position of ``states`` (any batch shape) packed
    exactly: its stones two bits a point, 16 points a word, then one word of
    the last move, the side to move and the outcome, and one of the rank. Two
    states have equal codes exactly when the search sees one position in
    them (the paper's features read no more than this); ``W =
    code_words(rules)``."""
    board = states.board.astype(jnp.int32)
    points = (board == 1) | ((board == -1) << 1)  # 0 empty, 1 black, 2 white
    width = code_words(rules) - 2
    pad = width * 16 - rules.num_actions
    points = jnp.pad(points, [(0, 0)] * (points.ndim - 1) + [(0, pad)])
    points = points.reshape(points.shape[:-1] + (width, 16)).astype(jnp.uint32)
    shifts = jnp.arange(0, 32, 2, dtype=jnp.uint32)
    stones = jnp.sum(points << shifts, axis=-1, dtype=jnp.uint32)  # disjoint bits: an or
    state = ((states.last_action + 1).astype(jnp.uint32)
             | (states.to_play.astype(jnp.uint32) << 16)
             | (states.done.astype(jnp.uint32) << 17)
             | ((states.winner + 1).astype(jnp.uint32) << 18))
    return jnp.concatenate([stones, state[..., None], states.rank.astype(jnp.uint32)[..., None]],
                           axis=-1)


def code_words(rules: Rules) -> int:
    """The words of ``position_code`` for ``rules``' board."""
    return -(-rules.num_actions // 16) + 2


def raw_qvalues(tree: mctx.Tree, node_index) -> jax.Array:
    """The paper's Q: mean backed-up value in [-1, 1]; 0 for unvisited children."""
    q = tree.qvalues(node_index)
    return jnp.where(tree.children_visits[node_index] > 0, q, 0.0)


def parent_qvalues(tree: mctx.Tree, node_index, *, reduction: float) -> jax.Array:
    """Raw Q in [-1, 1]; an unvisited child gets its node's value less ``reduction``.

    The node's value and its children's Q are both for the node's side to move,
    so a node that is losing (value < 0) no longer finds every unvisited child
    (raw Q 0) better than the visited ones, and its visits follow the prior.
    """
    q = tree.qvalues(node_index)
    fpu = tree.node_values[node_index] - reduction
    return jnp.where(tree.children_visits[node_index] > 0, q, fpu)


def puct_action_selection(key, tree: mctx.Tree, node_index, depth, *, c_puct: float,
                          qtransform) -> jax.Array:
    """argmax_a Q(s,a) + c_puct P(s,a) sqrt(N(s)) / (1 + N(s,a)) over legal a of prior > 0.

    N(s) counts the node's own expansion visit (mctx's convention), i.e.
    ``1 + sum_b N(s,b)``, so the very first selection at a node follows the
    prior instead of tie-break noise. An action is excluded if its prior is 0
    (``recurrent_fn`` masks illegal moves that way) or if it is illegal in the
    node's own position (the tree's embedding): a second, independent guard.
    A finished position (no legal move) may take any action: its children are
    absorbing copies of it.

    Exact ties go to the lowest action. mctx's selection adds 1e-7 of uniform
    noise to break them, which changes a choice only between scores within
    about one float32 step of each other; drawing it at every step of every
    simulation cost a tenth of a one-position search's time, so ``key`` is
    not used.
    """
    del key
    visits = tree.children_visits[node_index]
    prior = jax.nn.softmax(tree.children_prior_logits[node_index])
    u = c_puct * prior * jnp.sqrt(tree.node_visits[node_index]) / (visits + 1)
    score = qtransform(tree, node_index) + u
    node = jax.tree.map(lambda x: x[node_index], tree.embeddings)  # then its fields
    legal = (node.board == 0) & ~node.done
    invalid = (prior <= 0) | (~legal & jnp.any(legal))
    invalid = invalid | (tree.root_invalid_actions * (depth == 0) > 0)
    return jnp.argmax(jnp.where(invalid, -jnp.inf, score)).astype(jnp.int32)


def add_dirichlet_noise(key: jax.Array, prior_logits: jax.Array, legal: jax.Array,
                        fraction: float, alpha: float) -> jax.Array:
    """AlphaZero's root noise: P = (1 - fraction) p + fraction eta, eta ~ Dir(alpha)
    over the legal moves.

    Args: prior_logits float32[B, A] (illegal moves already masked), legal bool[B, A].
    Returns: the noisy prior as masked logits, float32[B, A].
    """
    probs = jax.nn.softmax(prior_logits)
    noise = jax.random.dirichlet(key, jnp.full(probs.shape[-1:], alpha), probs.shape[:1])
    # Dir(alpha) over all points restricted to the legal ones and renormalised
    # is Dir(alpha) over the legal ones; without the renormalisation the noise
    # that fell on occupied points would be masked away, and the effective
    # fraction would shrink as the board fills.
    noise = jnp.where(legal, noise, 0.0)
    noise = noise / jnp.maximum(noise.sum(-1, keepdims=True), jnp.finfo(noise.dtype).tiny)
    probs = (1 - fraction) * probs + fraction * noise
    noisy = jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))
    return mask_logits(noisy, legal)



@dataclass(frozen=True)
class Searcher:
    """The one way to search and to choose a move: self-play, the arena, the
    engine and the tools all go through it.

    It holds what a search needs besides the weights: the rules, the nets, the
    search settings and Winning Value Decay's ``gamma``. ``run`` searches a
    batch of positions at once; ``begin``, ``grow`` and ``result`` are the same
    search in steps (the engine grows its tree in chunks until its time is up);
    ``choose`` picks the move from a search's output. With ``settings.reuse``
    a search can start from the subtree carried over from the last move
    (``carry``, then ``run(..., tree=...)``).
    """

    rules: Rules
    nets: Networks
    settings: SearchConfig
    gamma: float

    @classmethod
    def of(cls, rules: Rules, nets: Networks, *, search: SearchConfig,
           decay: DecayConfig) -> Searcher:
        """The searcher of a config's ``search`` and ``decay`` sections."""
        return cls(rules=rules, nets=nets, settings=search, gamma=decay.gamma)

    @property
    def forced(self) -> tuple[bool, bool, bool]:
        s = self.settings
        return s.forced_moves, s.answer_threats, s.answer_four_threes

    def cast(self, variables):
        """The variables in the search's dtype (a no-op for float32)."""
        dtype = self.settings.dtype
        return variables if dtype == "float32" else cast_params(variables, dtype)

    def roots(self, variables, states: State, legal: jax.Array | None = None
              ) -> tuple[mctx.RootFnOutput, jax.Array]:
        """The roots, evaluated and masked to ``search_moves`` (or to ``legal``
        bool[B, A], moves the caller has read already), and their invalid
        actions bool[B, A]. A finished root (no legal move) searches anyway, its
        result ignored, with every action "valid" so that nothing divides by zero."""
        if legal is None:
            legal = search_moves(self.rules, states, *self.forced)
        root = make_root_fn(self.rules, self.nets, *self.forced, dtype=self.settings.dtype)(
            self.cast(variables), states, legal)
        invalid = ~legal & jnp.any(legal, axis=-1, keepdims=True)
        chex.assert_equal_shape([root.prior_logits, invalid])
        return root, invalid

    def recurrent_fn(self):
        s = self.settings
        return make_recurrent_fn(self.rules, self.nets, self.gamma, *self.forced,
                                 threat_values=s.threat_values, dtype=s.dtype)

    def selection(self, num_simulations: int):
        """(root, interior) action selection functions."""
        s = self.settings
        if s.algorithm == "gumbel":
            return gumbel_selection(num_simulations, s.max_considered_actions)
        qtransform = {"raw": raw_qvalues, "minmax": mctx.qtransform_by_parent_and_siblings,
                      "parent": functools.partial(parent_qvalues,
                                                  reduction=s.fpu_reduction)}[s.qtransform]
        select = functools.partial(puct_action_selection, c_puct=s.c_puct, qtransform=qtransform)
        return functools.partial(select, depth=0), select

    def keys(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(begin's key, grow's key) from one search key, split in the order of
        mctx's own policies (so that ``run`` gives their trees, tested)."""
        first, second = jax.random.split(key)
        return (second, first) if self.settings.algorithm == "gumbel" else (first, second)

    def begin(self, variables, key: jax.Array, states: State, *, capacity: int,
              explore: bool | jax.Array = False, tree: mctx.Tree | None = None,
              moves: jax.Array | None = None, transpositions: bool = False) -> mctx.Tree:
        """A tree of room ``capacity`` simulations, rooted at ``states``.

        explore: root noise as in self-play (Dirichlet for PUCT, Gumbel for
          Gumbel), drawn from ``key``; a bool, or for Gumbel bool[B] (some rows only).
        tree: a carried tree (``carry``): its rows that hold a subtree keep it,
          under the fresh roots' prior (so the noise is drawn anew); the others
          start from the fresh root.
        moves: bool[B, A], the roots' moves when the caller has read them
          already (the engine: its guard's tiers of ``search_moves``, further
          restricted), used instead of the roots' own ``search_moves``, so that
          the tactics are not read twice; None: the roots' ``search_moves``.
        transpositions: evaluate each position of the tree once
          (``transpositions.with_transpositions``; ``grow`` one leaf a step). Only
          where the nets' features do not read the order of the moves
          (``features.history`` 0): else two orders of the same moves are two
          evaluations.
        """
        s = self.settings
        if tree is not None and not s.reuse:
            raise ValueError("a carried tree needs search.reuse (PUCT only)")
        if transpositions and self.nets.features.history:
            raise ValueError(
                f"transpositions: these nets read the order of the moves (features.history "
                f"{self.nets.features.history}), so a position reached by two orders is "
                f"two evaluations; search without them")
        tree = self._begin(variables, key, states, capacity, explore, tree, moves)
        return with_transpositions(tree, code_words(self.rules)) if transpositions else tree

    def _begin(self, variables, key, states, capacity, explore, tree, moves) -> mctx.Tree:
        s = self.settings
        root, invalid = self.roots(variables, states, moves)
        if s.algorithm == "gumbel":  # a scale of 1 (noise) or 0 per row
            scale = jnp.reshape(jnp.asarray(explore, jnp.float32), (-1, 1))
            return gumbel_tree(root, capacity, invalid, key, scale)
        if not isinstance(explore, bool):
            raise ValueError("PUCT's root noise is for every row or none: explore must be a bool")
        if explore and s.dirichlet_fraction > 0:
            root = root.replace(prior_logits=add_dirichlet_noise(
                key, root.prior_logits, ~invalid, s.dirichlet_fraction, s.dirichlet_alpha))
        if tree is not None:
            return with_root(tree, root, invalid)
        return start_tree(root, capacity, invalid)

    def grow(self, variables, key: jax.Array, tree: mctx.Tree, *, until,
             num_simulations: int | None = None, leaves: int = 0) -> mctx.Tree:
        """Simulate until each root has ``until`` simulations (``continue_tree``).
        ``num_simulations``: the whole search's budget, which Gumbel's
        sequential halving is scheduled for (default: the tree's capacity).
        ``leaves``: K >= 1 evaluates K leaves a step in one net call, with
        virtual loss (``mctx_loop.parallel_steps``; PUCT only); 0, one at a time."""
        if leaves and self.settings.algorithm == "gumbel":
            raise ValueError("leaf parallelism (leaves > 0) is for PUCT: virtual visits "
                             "would disturb Gumbel's sequential halving")
        capacity = tree.node_visits.shape[1] - 1
        root_selection, interior_selection = self.selection(num_simulations or capacity)
        return continue_tree(split(self.cast(variables)), key, tree,
                             recurrent_fn=self.recurrent_fn(),
                             root_action_selection_fn=root_selection,
                             interior_action_selection_fn=interior_selection, until=until,
                             leaves=leaves)

    def result(self, tree: mctx.Tree) -> mctx.PolicyOutput:
        """The search's output: ``action_weights`` float32[B, A] is the training
        target (PUCT: the root's visit distribution; Gumbel: the improved
        policy) and ``action`` the search's own choice (PUCT: the most visited
        move, ties to the higher prior; Gumbel: its sequential-halving winner)."""
        if self.settings.algorithm == "gumbel":
            action, weights = gumbel_result(tree)
        else:
            visits = tree.summary().visit_counts.astype(jnp.float32)
            weights = visits / jnp.maximum(visits.sum(-1, keepdims=True), 1.0)
            action = greedy(visits, ~tree.root_invalid_actions.astype(bool),
                            jax.nn.softmax(tree.children_prior_logits[:, mctx.Tree.ROOT_INDEX]))
        return mctx.PolicyOutput(action=action.astype(jnp.int32), action_weights=weights,
                                 search_tree=tree)

    def run(self, variables, key: jax.Array, states: State, *,
            num_simulations: int | None = None, explore: bool = False,
            tree: mctx.Tree | None = None) -> mctx.PolicyOutput:
        """Search from a batch of positions ``[B]`` (``begin``, ``grow``, ``result``).

        ``num_simulations`` defaults to the settings'. With a carried ``tree``
        its visits count towards it: each root ends with ``num_simulations``
        simulations, the carried ones included. The nets compute in
        ``settings.dtype``; the tree and the outputs are float32 either way.
        """
        n = self.settings.num_simulations if num_simulations is None else num_simulations
        begin_key, grow_key = self.keys(key)
        if tree is not None and tree.node_visits.shape[1] != n + 1:
            raise ValueError(f"the carried tree has room for {tree.node_visits.shape[1] - 1} "
                             f"simulations, not {n}")
        tree = self.begin(variables, begin_key, states, capacity=n, explore=explore, tree=tree)
        return self.result(self.grow(variables, grow_key, tree, until=n, num_simulations=n))

    def play(self, variables, key: jax.Array, states: State, *,
             move_cfg: SelfPlayConfig | None = None, explore: bool = False,
             num_simulations: int | None = None, tree: mctx.Tree | None = None
             ) -> tuple[jax.Array, mctx.PolicyOutput]:
        """Search and choose the move int32[B]: the one rule every player uses
        (self-play, gating, the arena). Returns (move, the search's output).

        ``explore``: self-play's root noise (Dirichlet for PUCT, Gumbel for
        Gumbel). ``move_cfg``: the move policy (``temperature`` by move
        number); None plays the search's own choice. PUCT draws its move from
        the root's visits at that temperature. Gumbel never applies a
        temperature: its moves vary by the root's Gumbel noise, as mctx's
        Gumbel MuZero intends, so a Gumbel player searches with that noise
        wherever the temperature is above 0 (or ``explore`` asks for it) and
        plays the search's choice.
        """
        search_key, move_key = jax.random.split(key)
        tau = None if move_cfg is None else temperature(move_cfg, states.num_moves)
        noise = explore
        if self.settings.algorithm == "gumbel" and tau is not None and not explore:
            noise = tau > 0
        out = self.run(variables, search_key, states, num_simulations=num_simulations,
                       explore=noise, tree=tree)
        return self.choose(move_key, out, states, tau=tau), out

    def choose(self, key: jax.Array, out: mctx.PolicyOutput, states: State, *,
               tau: jax.Array | None = None) -> jax.Array:
        """The move int32[B] to play after a search.

        PUCT: where ``tau`` float32[B] (``temperature``) is > 0, the move is
        drawn with probability proportional to N^(1/tau), N the root's visits;
        where it is 0, or with ``tau`` None, the search's own choice
        (``result``). Gumbel: always the search's own choice (``play`` says why).
        """
        if tau is None or self.settings.algorithm == "gumbel":
            return out.action
        legal = jax.vmap(self.rules.legal_mask)(states)
        weights = out.search_tree.summary().visit_counts.astype(jnp.float32)
        return jnp.where(tau > 0, sample_move(key, weights, legal, tau), out.action)

    def carry(self, out: mctx.PolicyOutput, action: jax.Array,
              restart: jax.Array | None = None) -> mctx.Tree:
        """The tree for the next search after ``action`` int32[B] is played: the
        subtree under it (``mctx_loop.reuse``), emptied where ``restart``
        bool[B] (a new game begins there)."""
        tree = reuse(out.search_tree, action)
        if restart is not None:
            tree = jax.tree.map(
                lambda x: jnp.where(restart.reshape((-1,) + (1,) * (x.ndim - 1)),
                                    jnp.zeros_like(x), x), tree)
            tree = tree.replace(
                parents=jnp.where(restart[:, None], mctx.Tree.NO_PARENT, tree.parents),
                action_from_parent=jnp.where(restart[:, None], mctx.Tree.NO_PARENT,
                                             tree.action_from_parent),
                children_index=jnp.where(restart[:, None, None], mctx.Tree.UNVISITED,
                                         tree.children_index))
        return tree

    def empty_tree(self, variables, states: State) -> mctx.Tree:
        """A carried tree with nothing in it (every row starts fresh)."""
        tree = self.begin(variables, jax.random.PRNGKey(0), states,
                          capacity=self.settings.num_simulations)
        return self.carry(self.result(tree), jnp.zeros(tree.node_visits.shape[0], jnp.int32),
                          restart=jnp.ones(tree.node_visits.shape[0], bool))


def temperature(cfg: SelfPlayConfig, move_number: jax.Array) -> jax.Array:
    """tau by move number; 0 means argmax.

    semi_stochastic (paper): tau = tau_base ** (move // 2), argmax once tau < tau_min.
    """
    move_number = jnp.asarray(move_number)
    if cfg.move_policy == "deterministic":
        return jnp.zeros(move_number.shape, jnp.float32)
    if cfg.move_policy == "stochastic":
        return jnp.ones(move_number.shape, jnp.float32)
    tau = jnp.power(jnp.float32(cfg.tau_base), (move_number // 2).astype(jnp.float32))
    return jnp.where(tau < cfg.tau_min, 0.0, tau)


def greedy(visits: jax.Array, legal: jax.Array, prior: jax.Array) -> jax.Array:
    """int32[B]: the most visited legal move, ties to the higher prior (then the
    lower index). Compared in two steps: folding the prior into the visits as a
    small addend would be lost to float32 rounding."""
    visits = jnp.where(legal, visits, -1.0)
    most = visits == jnp.max(visits, axis=-1, keepdims=True)
    return jnp.argmax(jnp.where(most, prior, -1.0), axis=-1).astype(jnp.int32)


def sample_move(key: jax.Array, visits: jax.Array, legal: jax.Array,
                tau: jax.Array) -> jax.Array:
    """Sample a move with pi ~ N^(1/tau) among legal moves (tau float32[B] > 0).

    Args: visits float32[B, A], legal bool[B, A], tau float32[B].
    Returns: int32[B].
    """
    visits = jnp.where(legal, visits, 0.0)
    safe_tau = jnp.maximum(tau, 1e-3)[:, None]
    logits = jnp.where(visits > 0, jnp.log(jnp.maximum(visits, 1e-30)) / safe_tau, -jnp.inf)
    # A position whose legal moves got no visits (1-simulation corner cases)
    # falls back to uniform over legal moves.
    logits = jnp.where(jnp.any(visits > 0, -1, keepdims=True), logits,
                       jnp.where(legal, 0.0, -jnp.inf))
    return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)
