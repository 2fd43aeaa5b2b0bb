"""Self-play: B games in one jitted ``lax.scan``, turned into (s, pi, z).

All games start together, so at scan step ``t`` every unfinished game has
``t`` stones and colour ``t % 2`` to move. Finished games stay finished (their
steps are no-ops and their rows are marked invalid); once every game is over
the remaining steps skip the search with ``lax.cond``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from agz_jax.config import Config
from agz_jax.gomoku import Rules, State
from agz_jax.networks import Networks
from agz_jax.search import run_search, select_move, temperature


class Trajectory(NamedTuple):
    """Time-major record of B games, T = board points.

    obs: int8[T, B, H, W, C] observations (0/1 planes).
    policy: float32[T, B, A] search policy (the training target pi).
    action: int32[T, B] move played (-1 after the game ended).
    to_play: int32[T, B] colour to move.
    valid: bool[T, B] the position occurred (the game was not over).
    """

    obs: jax.Array
    policy: jax.Array
    action: jax.Array
    to_play: jax.Array
    valid: jax.Array


class Examples(NamedTuple):
    """Flat training examples [N]: observation, pi, z, colour to move, valid."""

    obs: jax.Array
    policy: jax.Array
    z: jax.Array
    to_play: jax.Array
    valid: jax.Array


def decayed_z(to_play: jax.Array, winner: jax.Array, length: jax.Array,
              gamma: float) -> jax.Array:
    """Winning Value Decay labels: z_t = +-gamma^(T - t - 1), 0 for draws.

    Args:
      to_play: int32[T, B] colour to move at ply t.
      winner: int32[B] winning colour, -1 for a draw / unfinished game.
      length: int32[B] number of plies T of each game.
    Returns float32[T, B]; +1 at the winner's last (winning) move.
    """
    t = jnp.arange(to_play.shape[0])[:, None]
    dist = jnp.maximum(length[None, :] - t - 1, 0).astype(jnp.float32)
    sign = jnp.where(to_play == winner[None, :], 1.0, -1.0)
    return jnp.where(winner[None, :] >= 0, sign * jnp.power(jnp.float32(gamma), dist), 0.0)


def make_selfplay(config: Config, rules: Rules, nets: Networks, shard=None):
    """Returns ``play(variables, key) -> (Trajectory, final State [B], stats)``.

    ``shard(tree, axis)``, if given, constrains the game axis of the states and
    of the records to be split over devices (``parallel.Sharder.constrain``);
    it changes where the games are played, not the numbers.
    """
    num_games = config.selfplay.num_games
    num_steps = rules.num_actions
    shard = shard or (lambda tree, axis: tree)

    def play(variables, key):
        states = shard(jax.vmap(lambda _: rules.init())(jnp.arange(num_games)), 0)

        def move(states, key):
            search_key, move_key = jax.random.split(key)
            out = run_search(config.search, rules, nets, config.decay.gamma, variables,
                             search_key, states, explore=True)
            legal = jax.vmap(rules.legal_mask)(states)
            if config.search.algorithm == "gumbel":
                action = out.action.astype(jnp.int32)
            else:
                visits = out.search_tree.summary().visit_counts.astype(jnp.float32)
                tau = temperature(config.selfplay, states.num_moves)
                action = select_move(move_key, visits, legal, tau)
            return action, out.action_weights

        def body(states, key):
            states = shard(states, 0)
            active = ~states.done
            action, policy = jax.lax.cond(
                jnp.any(active),
                move,
                lambda s, k: (jnp.zeros(num_games, jnp.int32),
                              jnp.zeros((num_games, rules.num_actions), jnp.float32)),
                states, key,
            )
            record = Trajectory(
                obs=nets.observe(rules, states).astype(jnp.int8),
                policy=policy,
                action=jnp.where(active, action, -1),
                to_play=states.to_play,
                valid=active,
            )
            states = jax.vmap(rules.step)(states, action)
            return states, shard(record, 0)

        final, traj = jax.lax.scan(body, states, jax.random.split(key, num_steps))
        length = final.num_moves
        stats = {
            "games": jnp.int32(num_games),
            "moves": jnp.sum(length),
            "mean_length": jnp.mean(length.astype(jnp.float32)),
            "black_wins": jnp.mean((final.winner == 0).astype(jnp.float32)),
            "white_wins": jnp.mean((final.winner == 1).astype(jnp.float32)),
            "draws": jnp.mean((final.winner < 0).astype(jnp.float32)),
        }
        return traj, final, stats

    return play


def to_examples(traj: Trajectory, final: State, gamma: float) -> Examples:
    """Flatten a trajectory into [T*B] examples with decayed z labels."""
    z = decayed_z(traj.to_play, final.winner, final.num_moves, gamma)
    flat = lambda x: x.reshape((-1,) + x.shape[2:])
    return Examples(
        obs=flat(traj.obs),
        policy=flat(traj.policy),
        z=flat(z),
        to_play=flat(traj.to_play),
        valid=flat(traj.valid),
    )
