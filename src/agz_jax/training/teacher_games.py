"""The teacher's games that a distillation (``training.distill``) trains and
measures its student on.

The teacher plays itself from its config's openings (``openings``: the
balanced set, moved by up to ``openings.shift`` points, a fraction from the
empty board): by its raw policy, each move drawn from its move probabilities
at a temperature (``make_policy_games``), or by the main job's lockstep
self-play, its search at some simulations a move (``make_search_games``, the
search's policies kept). ``play_games`` plays them a batch at a time and
brings their positions to the host (``Games``); ``game_stats`` sums them up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.config.schema import Config
from agz_jax.game import openings as opening_sets
from agz_jax.game.gomoku import Rules
from agz_jax.nets.networks import Networks


def make_policy_games(config: Config, rules: Rules, nets: Networks, num_games: int,
                      temperature: float, openings: np.ndarray | None):
    """``play(variables, key) -> (obs int8[T, B, H, W, P], to_play int32[T, B],
    valid bool[T, B], winner int32[B])``: ``num_games`` games of the raw policy
    against itself from ``openings`` (``config.openings.empty_fraction`` of
    them from the empty board), each move drawn from the policy's softmax over
    the empty points at ``temperature``."""
    empty = config.openings.empty_fraction
    num_steps = rules.num_actions - (0 if openings is None or empty else openings.shape[1])

    def play(variables, key):
        key, k_open = jax.random.split(key)
        states = opening_sets.sample_states(rules, openings, k_open, num_games, empty)

        def moves(states, key):
            obs = nets.observe(rules, states)
            logits, _ = nets.evaluate(variables, obs, states.to_play)
            legal = jax.vmap(rules.legal_mask)(states)
            logits = jnp.where(legal, logits / temperature, -jnp.inf)
            return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)

        def body(states, key):
            active = ~states.done
            # Once every game is over the net is not asked: stepping a finished
            # game is a no-op whatever the action.
            action = jax.lax.cond(jnp.any(active), moves,
                                  lambda s, k: jnp.zeros(num_games, jnp.int32), states, key)
            record = (nets.observe(rules, states).astype(jnp.int8), states.to_play, active)
            return jax.vmap(rules.step)(states, action), record

        final, (obs, to_play, valid) = jax.lax.scan(body, states,
                                                    jax.random.split(key, num_steps))
        return obs, to_play, valid, final.winner

    return play


def make_search_games(config: Config, rules: Rules, nets: Networks, num_games: int,
                      simulations: int):
    """``play(variables, key)`` as ``make_policy_games``'s, by the main job's
    lockstep self-play (the teacher's search, ``simulations`` a move), and the
    search's policies float32[T, B, A] last."""
    from agz_jax.training.selfplay import make_selfplay

    cfg = config.replace(**{"search.num_simulations": simulations,
                            "selfplay.num_games": num_games})
    play_games = make_selfplay(rules, nets, search=cfg.search, decay=cfg.decay,
                               selfplay=cfg.selfplay, openings=cfg.openings)

    def play(variables, key):
        traj, final, _ = play_games(variables, key)
        return traj.obs, traj.to_play, traj.valid, final.winner, traj.policy

    return play


class Games(NamedTuple):
    """Positions of the teacher's games, flat: obs int8[M, H, W, P], to_play
    int32[M], search policy float32[M, A] (or None); and per game, its plies
    (int[G]) and winner (int[G], -1 a draw or unfinished)."""

    obs: np.ndarray
    to_play: np.ndarray
    search_policy: np.ndarray | None
    plies: np.ndarray
    winner: np.ndarray


def play_games(play: Callable, variables, key: jax.Array, games: int, per_batch: int,
               search: bool) -> Games:
    """``games`` games of ``play`` (``per_batch`` a call, the last call's extra
    games dropped), their positions on the host."""
    obs, to_play, policy, plies, winner = [], [], [], [], []
    for i in range(-(-games // per_batch)):
        out = jax.device_get(play(variables, jax.random.fold_in(key, i)))
        keep = min(per_batch, games - i * per_batch)
        o, t, v, w = (np.asarray(x) for x in out[:4])
        # Game-major: a game's positions together, in the order played.
        o, t, v = (np.swapaxes(x, 0, 1)[:keep] for x in (o, t, v))
        mask = v.reshape(-1)
        obs.append(o.reshape(-1, *o.shape[2:])[mask])
        to_play.append(t.reshape(-1)[mask])
        if search:
            p = np.swapaxes(np.asarray(out[4]), 0, 1)[:keep]
            policy.append(p.reshape(-1, p.shape[-1])[mask])
        plies.append(v.sum(axis=1))
        winner.append(w[:keep])
    return Games(np.concatenate(obs), np.concatenate(to_play).astype(np.int32),
                 np.concatenate(policy) if search else None, np.concatenate(plies),
                 np.concatenate(winner))


def game_stats(games: Games) -> dict:
    """Games, positions and results of ``games`` (plain numbers)."""
    n = len(games.plies)
    return {"games": n, "positions": int(len(games.to_play)),
            "mean_plies": float(np.mean(games.plies)),
            "black_wins": float(np.mean(games.winner == 0)),
            "white_wins": float(np.mean(games.winner == 1)),
            "draws": float(np.mean(games.winner < 0))}


__all__ = ["Games", "game_stats", "make_policy_games", "make_search_games", "play_games"]
