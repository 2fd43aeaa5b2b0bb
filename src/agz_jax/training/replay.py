"""A fixed-size replay buffer of training examples, one ring per net.

With Double Networks each net has its own ring (black-to-move positions for
the black net, white-to-move for the white net), so each net samples uniformly
from its own colour's positions. All arrays have static shapes: adding a
variable number of valid examples is a masked scatter.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from agz_jax.game import symmetry
from agz_jax.game.gomoku import Rules
from agz_jax.nets.networks import Networks


class Examples(NamedTuple):
    """Flat training examples [N]: observation, pi, z, colour to move, valid."""

    obs: jax.Array
    policy: jax.Array
    z: jax.Array
    to_play: jax.Array
    valid: jax.Array


class Buffer(NamedTuple):
    """obs int8[N, C, H, W, P]; policy float32[N, C, A]; z float32[N, C];
    size, ptr int32[N] (N nets, capacity C)."""

    obs: jax.Array
    policy: jax.Array
    z: jax.Array
    size: jax.Array
    ptr: jax.Array


class Batch(NamedTuple):
    """A training batch per net: obs float32[N, B, H, W, P], policy [N, B, A], z [N, B]."""

    obs: jax.Array
    policy: jax.Array
    z: jax.Array


def init(num_nets: int, capacity: int, obs_shape: tuple[int, ...], num_actions: int) -> Buffer:
    return Buffer(
        obs=jnp.zeros((num_nets, capacity, *obs_shape), jnp.int8),
        policy=jnp.zeros((num_nets, capacity, num_actions), jnp.float32),
        z=jnp.zeros((num_nets, capacity), jnp.float32),
        size=jnp.zeros(num_nets, jnp.int32),
        ptr=jnp.zeros(num_nets, jnp.int32),
    )


def init_for(nets: Networks, rules: Rules, capacity: int) -> Buffer:
    """An empty buffer for training ``nets``: one ring per colour when the nets
    are split by colour (``nets.num_rings``), observations of their features."""
    return init(nets.num_rings, capacity, (rules.size, rules.size, nets.obs_channels),
                rules.num_actions)


def add(buffer: Buffer, examples: Examples) -> Buffer:
    """Append the valid examples ``[M]`` to the ring of their net (oldest dropped).

    The net of an example is its colour to move when there are two rings, else 0.
    If more than ``capacity`` valid examples go to one ring, only the last
    ``capacity`` are kept.
    """
    num_nets, capacity = buffer.z.shape
    net = examples.to_play if num_nets == 2 else jnp.zeros_like(examples.to_play)

    def add_one(n, obs, policy, z, size, ptr):
        mine = examples.valid & (net == n)
        rank = jnp.cumsum(mine) - 1  # position among this ring's new examples
        count = jnp.sum(mine)
        keep = mine & (rank >= count - capacity)
        slot = jnp.where(keep, (ptr + rank) % capacity, capacity)  # capacity = dropped
        obs = obs.at[slot].set(examples.obs.astype(obs.dtype), mode="drop")
        policy = policy.at[slot].set(examples.policy, mode="drop")
        z = z.at[slot].set(examples.z, mode="drop")
        return obs, policy, z, jnp.minimum(size + count, capacity), (ptr + count) % capacity

    obs, policy, z, size, ptr = jax.vmap(add_one)(
        jnp.arange(num_nets), buffer.obs, buffer.policy, buffer.z, buffer.size, buffer.ptr
    )
    return Buffer(obs, policy, z, size, ptr)


def sample(buffer: Buffer, key: jax.Array, batch_size: int, augment: bool = True) -> Batch:
    """Uniform samples from each ring, each with a random one of the 8 symmetries."""
    num_nets = buffer.z.shape[0]

    def sample_one(key, obs, policy, z, size):
        k_idx, k_sym = jax.random.split(key)
        idx = jax.random.randint(k_idx, (batch_size,), 0, jnp.maximum(size, 1))
        o = obs[idx].astype(jnp.float32)
        p = policy[idx]
        if augment:
            g = symmetry.random_symmetry(k_sym, (batch_size,))
            o = jax.vmap(symmetry.transform_planes)(o, g)
            size_hw = o.shape[1]
            p = jax.vmap(lambda pi, gg: symmetry.transform_policy(pi, gg, size_hw))(p, g)
        return o, p, z[idx]

    o, p, z = jax.vmap(sample_one)(
        jax.random.split(key, num_nets), buffer.obs, buffer.policy, buffer.z, buffer.size
    )
    return Batch(o, p, z)
