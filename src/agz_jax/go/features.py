"""The input planes of Maddison, Huang, Sutskever & Silver (ICLR 2015), Table 1.

``features(rules, state)`` is a pure function of one position (jit- and
vmap-able) giving float32[H, W, C], channels-last, in this order (C = 36 with
the paper's 9 rank planes):

  channel  planes  feature (Table 1)
  0-2        3     stone colour: black, white, empty
  3-6        4     liberties of the chain on the point: 1, 2, 3, >= 4
  7-12       6     liberties after the move (legal moves of the side to move):
                   1, 2, 3, 4, 5, >= 6, counted after its captures
  13         1     legality for the side to move (``Rules.legal_mask``: suicide,
                   and the ``Rules``'s ko rule)
  14-18      5     turns since the stone was played: 1 (the last move), 2, 3, 4,
                   >= 5; stones of unknown age (set-up positions, handicap) are
                   in the >= 5 plane
  19-25      7     capture size, the opponent stones a legal move would capture:
                   0, 1, 2, 3, 4, 5, >= 6
  26         1     ladder move: a legal move that captures a chain in a ladder
                   (``go.ladder``)
  27-35      9     rank: one-hot of ``State.rank`` (0..8 for 1..9 dan), all zero
                   when it is outside 0..ranks-1 (e.g. -1, unknown)

With ``ranks=0`` (records without ranks) the rank planes are replaced by one
constant plane of ones, C = 28. The stone planes are absolute (black, white) as
in the paper, whose net has one softmax per colour to move.

The per-move planes (liberties after, capture size) play every point at once
(``vmap`` of ``rules.place``: O(A^2) work per position); the ladder planes read
at most ``ladder_limit`` (move, prey) pairs per position.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from agz_jax.go import ladder
from agz_jax.go.board import analyse, neighbour_table, padded, place, stone
from agz_jax.go.rules import Rules, State

GROUPS = (("stone", ("black", "white", "empty")),
          ("liberties", ("1", "2", "3", ">=4")),
          ("liberties_after", ("1", "2", "3", "4", "5", ">=6")),
          ("legal", ("",)),
          ("turns_since", ("1", "2", "3", "4", ">=5")),
          ("capture_size", ("0", "1", "2", "3", "4", "5", ">=6")),
          ("ladder", ("",)))
RANKS = 9


def channel_names(ranks: int = RANKS) -> list[str]:
    """The name of every channel, in order (e.g. ``"liberties:>=4"``)."""
    names = [f"{g}:{v}" if v else g for g, values in GROUPS for v in values]
    return names + ([f"rank:{r + 1}d" for r in range(ranks)] if ranks else ["constant"])


def num_channels(ranks: int = RANKS) -> int:
    return len(channel_names(ranks))


def channel(name: str, ranks: int = RANKS) -> int:
    """The index of a channel by name (``channel("ladder") == 26``)."""
    return channel_names(ranks).index(name)


def bucket(values: jax.Array, low: int, planes: int) -> jax.Array:
    """bool[..., planes]: one-hot of ``values`` clipped to ``low``..``low + planes - 1``
    (the last plane is "or more"); all False where ``values < low``."""
    return jnp.minimum(values, low + planes - 1)[..., None] == low + jnp.arange(planes)


def rank_planes(ranks: int, rank: jax.Array, num_points: int) -> jax.Array:
    """bool[num_points, ranks]: one-hot of ``rank`` (all False outside 0..ranks-1);
    with ``ranks=0``, bool[num_points, 1] of ones (the constant plane)."""
    if not ranks:
        return jnp.ones((num_points, 1), bool)
    return jnp.broadcast_to(jnp.arange(ranks) == rank, (num_points, ranks))


def after_move(rules: Rules, state: State) -> tuple[jax.Array, jax.Array]:
    """(int32[A] liberties of the new stone's chain, int32[A] stones captured) if
    the side to move played each point; meaningful on legal points only."""
    size, a = rules.size, rules.num_points
    me = stone(state.to_play)
    points = jnp.arange(a)
    move = analyse(size, state.board, state.chain, me, state.ko, points, hashes=False)
    nbr = jnp.asarray(neighbour_table(size))

    def one(p, row):
        placed = place(size, state.board, state.chain, me, p, row)
        mine = placed.chain.astype(jnp.int32) == p
        touching = jnp.any(padded(mine, False)[nbr], axis=1)
        return jnp.sum((placed.board == 0) & touching), jnp.sum(placed.captured)

    return jax.vmap(one)(points, move)


def features(rules: Rules, state: State, ranks: int = RANKS, ladder_limit: int = 8,
             ladder_depth: int | None = None, ladder_steps: int | None = None) -> jax.Array:
    """float32[H, W, C]: the planes of one position (see the module for the layout).
    ``ladder_*`` bound the ladder reader (``go.ladder.ladder_moves``)."""
    board, a = state.board, rules.num_points
    me = stone(state.to_play)
    legal = rules.legal_mask(state)[:a]
    libs = rules.liberties(state)
    libs_after, captured = after_move(rules, state)
    age = state.num_moves - state.played_at.astype(jnp.int32)  # 1: the last move
    age = jnp.where(state.played_at >= 0, age, 5)
    ladders = ladder.ladder_moves(rules.size, board, state.chain, me, legal, ladder_limit,
                                  ladder_depth, ladder_steps)
    rank = rank_planes(ranks, state.rank, a)
    out = assemble(board, legal, libs, libs_after, age, captured, ladders & legal, rank)
    return out.astype(jnp.float32).reshape(rules.size, rules.size, -1)


def assemble(board, legal, libs, libs_after, age, captured, ladders, rank) -> jax.Array:
    """bool[A, C]: Table 1's planes, in the module docstring's order, from
    their per-point readings (``ladders``: the ladder plane, already masked)."""
    stones = board != 0
    return jnp.concatenate([
        jnp.stack([board > 0, board < 0, ~stones], axis=-1),
        bucket(libs, 1, 4) & stones[:, None],
        bucket(libs_after, 1, 6) & legal[:, None],
        legal[:, None],
        bucket(age, 1, 5) & stones[:, None],
        bucket(captured, 0, 7) & legal[:, None],
        ladders[:, None],
        rank,
    ], axis=-1)


@functools.cache
def batched(rules: Rules, ranks: int = RANKS):
    """``jax.jit(jax.vmap(features))`` for ``rules`` and ``ranks``, one cached
    function: the data set builder and the GTP engine share its compilations
    (float32[B, H, W, C] of B stacked states)."""
    return jax.jit(jax.vmap(functools.partial(features, rules, ranks=ranks)))
