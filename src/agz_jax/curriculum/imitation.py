"""Stage 2 of the curriculum: imitate the rule-based mentor (paper Section IV.C).

The mentor (``agz_jax.game.mentor``) plays itself from random short openings, so
its games differ; every position it moved in becomes a training example
(s, pi = one-hot on the mentor's move, z = the decayed game result for the side
to move, as self-play labels it). Whole games are held out, never single
positions, so the held-out accuracy measures generalisation to unseen games
(Maddison et al.'s top-n move-prediction accuracy).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from agz_jax.config.schema import FeaturesConfig
from agz_jax.game.gomoku import Rules
from agz_jax.game.mentor import Mentor
from agz_jax.match import arena
from agz_jax.nets import features as features_lib
from agz_jax.training.replay import Examples
from agz_jax.training.selfplay import decayed_z


class MentorGames(NamedTuple):
    """Positions [T * G] of G mentor games, flattened ply-major.

    examples: (obs, policy one-hot on the mentor's move, z, to_play, valid);
      ``valid`` is False for the random opening moves and after the game ended.
    action: int32[M], the move played (-1 when not valid).
    game: int32[M], the game each position belongs to (0..G-1).
    ply: int32[M], the move number (0-based).
    result: the match (winner, length, moves) of the games.
    """

    examples: Examples
    action: jax.Array
    game: jax.Array
    ply: jax.Array
    result: arena.MatchResult


def play_mentor_games(rules: Rules, level: int, key: jax.Array, num_games: int,
                      opening_plies: int, gamma: float,
                      features: FeaturesConfig = features_lib.DEFAULT) -> MentorGames:
    """``num_games`` mentor-vs-mentor games and their positions (jittable)."""
    mentor = Mentor(rules, level)
    result = arena.play_match(rules, mentor.act, mentor.act, key, num_games, opening_plies)
    return games_to_examples(rules, result, opening_plies, gamma, features)


def games_to_examples(rules: Rules, result: arena.MatchResult, skip_plies: int,
                      gamma: float, features: FeaturesConfig = features_lib.DEFAULT,
                      rank=0) -> MentorGames:
    """Replay a match's move lists into training positions, skipping the first
    ``skip_plies`` moves of every game (random openings are not the mentor's).

    The observations are ``features``'; ``rank`` (an int, or int32[G] per game)
    is the strength the rank planes give the players.
    """
    moves = result.moves  # [T, G]
    num_plies, num_games = moves.shape
    states = jax.vmap(lambda _: rules.init())(jnp.arange(num_games))
    states = features_lib.with_rank(states, rank)

    def body(states, xs):
        ply, action = xs
        obs = features_lib.observe_batch(features, rules, states).astype(jnp.int8)
        valid = (ply >= skip_plies) & (ply < result.length) & (action >= 0) & ~states.done
        record = (obs, states.to_play, valid)
        return jax.vmap(rules.step)(states, jnp.maximum(action, 0)), record

    _, (obs, to_play, valid) = jax.lax.scan(body, states, (jnp.arange(num_plies), moves))
    z = decayed_z(to_play, result.winner, result.length, gamma)
    policy = jax.nn.one_hot(jnp.maximum(moves, 0), rules.num_actions, dtype=jnp.float32)
    flat = lambda x: x.reshape((-1,) + x.shape[2:])
    examples = Examples(obs=flat(obs), policy=flat(policy), z=flat(z), to_play=flat(to_play),
                        valid=flat(valid))
    game = jnp.broadcast_to(jnp.arange(num_games, dtype=jnp.int32), (num_plies, num_games))
    ply = jnp.broadcast_to(jnp.arange(num_plies, dtype=jnp.int32)[:, None],
                           (num_plies, num_games))
    return MentorGames(examples, flat(jnp.where(valid, moves, -1)), flat(game), flat(ply),
                       result)


def mask_examples(examples: Examples, keep: jax.Array) -> Examples:
    """The same examples with ``valid`` narrowed to ``keep``."""
    return examples._replace(valid=examples.valid & keep)
