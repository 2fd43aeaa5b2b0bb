"""The 8 symmetries of the square board (the dihedral group D4).

Symmetry ``g`` in 0..7 is ``k = g % 4`` quarter turns followed, for ``g >= 4``,
by a left-right flip. Planes are channels-last ``[..., H, W, C]``; policies are
flat ``[..., H*W]`` over the same points. For every ``g``::

    policy_of(transform_planes(x, g)) == transform_policy(policy_of(x), g)

holds for an equivariant net, and ``inverse(g)`` undoes ``g``. The image of
a position under ``g`` (its "frame", as the engine's trees see it) holds the
position's point ``permutations(size)[g][j]`` at point ``j``; ``transform_point``,
``untransform_policy`` and ``transform_states`` map points, host vectors and
positions between the two.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.game.gomoku import State

NUM_SYMMETRIES = 8


def _np_transform(square: np.ndarray, g: int) -> np.ndarray:
    out = np.rot90(square, k=g % 4, axes=(0, 1))
    if g >= 4:
        out = np.flip(out, axis=1)
    return out


@functools.cache
def permutations(size: int) -> np.ndarray:
    """int32[8, A]: ``transformed_flat = flat[perm[g]]`` for flat point vectors."""
    idx = np.arange(size * size).reshape(size, size)
    return np.stack(
        [_np_transform(idx, g).reshape(-1) for g in range(NUM_SYMMETRIES)]
    ).astype(np.int32)


@functools.cache
def _inverse_table() -> tuple[int, ...]:
    perms = permutations(5)
    ident = np.arange(25)
    inv = []
    for g in range(NUM_SYMMETRIES):
        for h in range(NUM_SYMMETRIES):
            if np.array_equal(perms[g][perms[h]], ident):
                inv.append(h)
                break
    return tuple(inv)


def inverse(g):
    """The symmetry that undoes ``g`` (works on ints and int arrays)."""
    table = _inverse_table()
    if isinstance(g, int):
        return table[g]
    return jnp.asarray(table, jnp.int32)[g]


def transform_policy(policy: jax.Array, g, size: int) -> jax.Array:
    """Apply symmetry ``g`` (int or int32[]) to a flat ``[..., A]`` vector."""
    perm = jnp.asarray(permutations(size))[g]
    return jnp.take(policy, perm, axis=-1)


def transform_planes(planes: jax.Array, g) -> jax.Array:
    """Apply symmetry ``g`` (int or int32[]) to ``[..., H, W, C]`` planes."""
    *lead, h, w, c = planes.shape
    if h != w:
        raise ValueError(f"symmetries need a square board, got {h}x{w}")
    flat = planes.reshape(*lead, h * w, c)
    perm = jnp.asarray(permutations(h))[g]
    return jnp.take(flat, perm, axis=-2).reshape(*lead, h, w, c)


def transform_point(point: int, g: int, size: int) -> int:
    """Where the position's point ``point`` lies in its image under ``g``
    (-1, no point, stays -1): the stone at ``point`` moves there."""
    return point if point < 0 else int(np.argsort(permutations(size)[g])[point])


def untransform_policy(x: np.ndarray, g: int, size: int) -> np.ndarray:
    """A flat ``[..., A]`` host vector over the image under ``g`` brought back
    over the position's points: undoes ``transform_policy``."""
    out = np.empty_like(x)
    out[..., permutations(size)[g]] = x
    return out


def transform_states(states: State, g: int, size: int) -> State:
    """Positions (``State``, batched or not) as their images under ``g`` (an
    int): the board, ``played_at`` and ``last_action`` moved; for ``g == 0``
    the same ``states``."""
    if g == 0:
        return states
    perm = jnp.asarray(permutations(size)[g])
    at = jnp.asarray(np.argsort(permutations(size)[g]).astype(np.int32))
    last = states.last_action
    return states._replace(board=states.board[..., perm],
                           played_at=states.played_at[..., perm],
                           last_action=jnp.where(last >= 0, at[jnp.maximum(last, 0)], last))


def random_symmetry(key: jax.Array, shape=()) -> jax.Array:
    """int32 symmetry indices, uniform over the 8."""
    return jax.random.randint(key, shape, 0, NUM_SYMMETRIES, dtype=jnp.int32)
