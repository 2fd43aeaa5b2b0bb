"""A game state packed into two arrays: the form a search tree keeps its positions in.

A ``gomoku.State`` has nine fields. A search tree holds one state a node, and
the search reads a node's state at every step down the tree and writes one at
every expansion: with the nine fields each read and each write is nine small
XLA operations, which on a CPU cost more than the data they move. ``Packed``
holds the same values, exactly, in two arrays (the int8, int16 and bool
fields as int16; the int32 scalars as int32), so each read or write is two.

``Packed`` reads like a ``State`` (``packed.board``, ``packed.done``, ...,
with the State's dtypes), so code that only reads a node's position takes
either; ``pack`` and ``unpack`` convert. It works on any leading batch shape,
and on numpy arrays as well as jax ones (a tree brought to the host).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.game.gomoku import State


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Packed:
    """``State``'s values in two arrays, any leading batch shape ``[...]``.

    Attributes:
      shorts: int16[..., 2A + 2]: the board (A points), ``played_at`` (A),
        ``done`` and ``illegal`` (0 or 1).
      words: int32[..., 5]: ``to_play``, ``last_action``, ``num_moves``,
        ``winner`` and ``rank``.
    """

    shorts: jax.Array
    words: jax.Array

    @property
    def num_actions(self) -> int:
        return (self.shorts.shape[-1] - 2) // 2

    @property
    def board(self):
        return self.shorts[..., :self.num_actions].astype(np.int8)

    @property
    def played_at(self):
        a = self.num_actions
        return self.shorts[..., a:2 * a]

    @property
    def done(self):
        return self.shorts[..., 2 * self.num_actions] != 0

    @property
    def illegal(self):
        return self.shorts[..., 2 * self.num_actions + 1] != 0

    @property
    def to_play(self):
        return self.words[..., 0]

    @property
    def last_action(self):
        return self.words[..., 1]

    @property
    def num_moves(self):
        return self.words[..., 2]

    @property
    def winner(self):
        return self.words[..., 3]

    @property
    def rank(self):
        return self.words[..., 4]


def pack(state: State) -> Packed:
    """``state`` (any batch shape) as a ``Packed``: the same values, exactly."""
    flag = lambda x: x.astype(jnp.int16)[..., None]  # noqa: E731
    shorts = jnp.concatenate([state.board.astype(jnp.int16), state.played_at.astype(jnp.int16),
                              flag(state.done), flag(state.illegal)], axis=-1)
    words = jnp.stack([state.to_play, state.last_action, state.num_moves, state.winner,
                       state.rank], axis=-1).astype(jnp.int32)
    return Packed(shorts=shorts, words=words)


def unpack(packed: Packed | State) -> State:
    """The ``State`` a ``Packed`` holds (a ``State`` is returned as it is)."""
    if isinstance(packed, State):
        return packed
    return State(**{field: getattr(packed, field) for field in State._fields})
