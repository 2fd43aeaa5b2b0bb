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
``agz_jax.mctx_loop``; the moves a node may take and the wins read from the
stones are ``agz_jax.tactics``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import mctx

from agz_jax.config import SearchConfig, SelfPlayConfig
from agz_jax.gomoku import Rules, State, stone
from agz_jax.mctx_loop import gumbel_policy, mask_logits, search_tree
from agz_jax.networks import Networks, cast_params
from agz_jax.tactics import search_moves, threat_value


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
            prior_logits=mask_logits(logits, legal), value=value, embedding=states
        )

    return root_fn


def make_recurrent_fn(rules: Rules, nets: Networks, gamma: float, forced: bool = False,
                      answer_threats: bool = False, answer_four_threes: bool = False,
                      threat_values: bool = False, dtype: str = "float32"):
    """mctx's ``recurrent_fn``: play ``action``, evaluate the child with the
    nets (computing in ``dtype``, as ``make_root_fn``), restrict its moves
    (``search_moves``). With ``threat_values`` (``SearchConfig.threat_values``)
    a child whose side to move has a win read from the stones
    (``threat_value``) takes that win's value instead of the net's."""
    def recurrent_fn(variables, key, action, states: State):
        del key
        children = jax.vmap(rules.step)(states, action)
        obs = nets.observe(rules, children)
        logits, value = nets.evaluate(variables, obs, children.to_play, dtype=dtype)
        if threat_values:
            known, read = jax.vmap(lambda b, p: threat_value(rules, b, stone(p), gamma))(
                children.board, children.to_play)
            value = jnp.where(known & ~children.done, read, value)
        legal = search_moves(rules, children, forced, answer_threats, answer_four_threes)
        backup = winning_value_decay(states, children, value, gamma)
        out = mctx.RecurrentFnOutput(
            reward=backup.reward,
            discount=backup.discount,
            prior_logits=mask_logits(logits, legal),
            value=backup.value,
        )
        return out, children

    return recurrent_fn


def raw_qvalues(tree: mctx.Tree, node_index) -> jax.Array:
    """The paper's Q: mean backed-up value in [-1, 1]; 0 for unvisited children."""
    q = tree.qvalues(node_index)
    return jnp.where(tree.children_visits[node_index] > 0, q, 0.0)


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
    """
    visits = tree.children_visits[node_index]
    prior = jax.nn.softmax(tree.children_prior_logits[node_index])
    u = c_puct * prior * jnp.sqrt(tree.node_visits[node_index]) / (visits + 1)
    score = qtransform(tree, node_index) + u
    score = score + 1e-7 * jax.random.uniform(key, score.shape)
    board = tree.embeddings.board[node_index]
    legal = (board == 0) & ~tree.embeddings.done[node_index]
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



def run_search(
    cfg: SearchConfig,
    rules: Rules,
    nets: Networks,
    gamma: float,
    variables,
    key: jax.Array,
    states: State,
    *,
    num_simulations: int | None = None,
    explore: bool = False,
) -> mctx.PolicyOutput:
    """Search from a batch of positions ``[B]``.

    Returns mctx's ``PolicyOutput``: ``action_weights`` float32[B, A] is the
    training target (visit distribution for PUCT, the improved policy for
    Gumbel) and ``search_tree`` the tree. ``explore`` adds root Dirichlet noise
    (PUCT) or Gumbel noise (Gumbel), as in self-play. The nets compute in
    ``cfg.dtype``; the tree and the outputs are float32 either way.
    """
    n_sims = cfg.num_simulations if num_simulations is None else num_simulations
    forced = (cfg.forced_moves, cfg.answer_threats, cfg.answer_four_threes)
    if cfg.dtype != "float32":
        # Cast once here: the recurrent function's own cast is then a no-op
        # inside the simulation loop.
        variables = cast_params(variables, cfg.dtype)
    legal = search_moves(rules, states, *forced)
    root = make_root_fn(rules, nets, *forced, dtype=cfg.dtype)(variables, states, legal)
    recurrent_fn = make_recurrent_fn(rules, nets, gamma, *forced,
                                     threat_values=cfg.threat_values, dtype=cfg.dtype)
    # Finished roots search anyway (their result is ignored) with every action
    # "valid" so that nothing divides by zero.
    invalid = ~legal & jnp.any(legal, axis=-1, keepdims=True)
    chex.assert_equal_shape([root.prior_logits, invalid])

    if cfg.algorithm == "gumbel":
        return gumbel_policy(
            params=variables,
            rng_key=key,
            root=root,
            recurrent_fn=recurrent_fn,
            num_simulations=n_sims,
            invalid_actions=invalid,
            max_num_considered_actions=cfg.max_considered_actions,
            gumbel_scale=1.0 if explore else 0.0,
        )

    noise_key, search_key = jax.random.split(key)
    if explore and cfg.dirichlet_fraction > 0:
        root = root.replace(prior_logits=add_dirichlet_noise(
            noise_key, root.prior_logits, ~invalid, cfg.dirichlet_fraction,
            cfg.dirichlet_alpha))

    qtransform = raw_qvalues if cfg.qtransform == "raw" else mctx.qtransform_by_parent_and_siblings
    select = functools.partial(puct_action_selection, c_puct=cfg.c_puct, qtransform=qtransform)
    tree = search_tree(
        params=variables,
        rng_key=search_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=functools.partial(select, depth=0),
        interior_action_selection_fn=select,
        num_simulations=n_sims,
        invalid_actions=invalid,
    )
    visits = tree.summary().visit_counts.astype(jnp.float32)
    weights = visits / jnp.maximum(visits.sum(-1, keepdims=True), 1.0)
    return mctx.PolicyOutput(action=jnp.argmax(visits, -1).astype(jnp.int32),
                             action_weights=weights, search_tree=tree)


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


def select_move(key: jax.Array, visits: jax.Array, legal: jax.Array,
                tau: jax.Array) -> jax.Array:
    """Sample a move with pi ~ N^(1/tau) among legal moves; argmax where tau == 0.

    Args: visits float32[B, A], legal bool[B, A], tau float32[B].
    Returns: int32[B].
    """
    visits = jnp.where(legal, visits, 0.0)
    greedy = jnp.argmax(jnp.where(legal, visits + 1e-6, -1.0), axis=-1)
    safe_tau = jnp.maximum(tau, 1e-3)[:, None]
    logits = jnp.where(visits > 0, jnp.log(jnp.maximum(visits, 1e-30)) / safe_tau, -jnp.inf)
    # A position whose legal moves got no visits (1-simulation corner cases)
    # falls back to uniform over legal moves.
    logits = jnp.where(jnp.any(visits > 0, -1, keepdims=True), logits,
                       jnp.where(legal, 0.0, -jnp.inf))
    sampled = jax.random.categorical(key, logits, axis=-1)
    return jnp.where(tau > 0, sampled, greedy).astype(jnp.int32)
