"""Input features: a position as the planes a net reads.

The layer between the rules and the nets. ``observe(cfg, rules, state)`` is
the one encoding every part of the pipeline uses (search, self-play, the
curriculum, the arena, the engine), so a net trained on some features is
searched and played with the same ones. Planes, channels-last, in order:

  0 X: stones of the side to move          (the paper's s = [X, Y, L],
  1 Y: stones of the opponent               ``Rules.observe``)
  2 L: one-hot of the opponent's last move
  then, each only if its ``FeaturesConfig`` switch is on (Maddison et al.,
  Table 1):
  history k planes, "turns since": plane i (i = 1..k) marks the stone played
          i plies ago (plane 1 repeats L), from ``State.played_at``; stones of
          unknown age (positions set up from a board) are in none of them
  colour  ones when black is to move, zeros when white is
  constant ones: the net finds the board's edge where the zero padding starts
  ranks   k planes, one-hot of ``State.rank`` (all zeros when it is outside
          0..k-1): the strength of the player whose move is predicted

Every plane is a function of the board point or constant over the board, so
a dihedral map of the whole stack (``symmetry.transform_planes``) is the
observation of the mapped position.

The rank is part of the state (``State.rank``, carried unchanged by
``Rules.step``), so a rank set on a search root reaches every leaf the net
evaluates; ``with_rank`` sets it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from agz_jax.config.schema import FeaturesConfig
from agz_jax.game.gomoku import BLACK, Rules, State

DEFAULT = FeaturesConfig()


def observe(cfg: FeaturesConfig, rules: Rules, state: State) -> jax.Array:
    """float32[H, W, cfg.channels]: the planes of one position (see the module)."""
    base = rules.observe(state)
    if cfg == DEFAULT:
        return base
    ones = jnp.ones(rules.num_actions, jnp.float32)
    extra = []
    if cfg.history:
        age = state.num_moves - state.played_at.astype(jnp.int32)  # 1 = the last move
        known = state.played_at >= 0
        extra += [(known & (age == i)).astype(jnp.float32) for i in range(1, cfg.history + 1)]
    if cfg.colour:
        extra.append(ones * (state.to_play == BLACK))
    if cfg.constant:
        extra.append(ones)
    if cfg.ranks:
        extra += [ones * (state.rank == r) for r in range(cfg.ranks)]
    planes = jnp.stack(extra, axis=-1).reshape(rules.size, rules.size, len(extra))
    return jnp.concatenate([base, planes], axis=-1)


def observe_batch(cfg: FeaturesConfig, rules: Rules, states: State) -> jax.Array:
    """float32[B, H, W, C]: ``observe`` of a batch of states ``[B]``."""
    return jax.vmap(lambda s: observe(cfg, rules, s))(states)


def with_rank(states: State, rank) -> State:
    """``states`` (any batch shape) asked to play at ``rank`` (an int or int32[])."""
    return states._replace(rank=jnp.broadcast_to(jnp.asarray(rank, jnp.int32),
                                                 states.rank.shape))
