"""Policy-value networks (AlphaGomoku, Tables I-III) and Double Networks.

``PolicyValueNet`` maps observations ``[B, H, W, C]`` to policy logits ``[B, H*W]``
and a value ``[B]`` in (-1, 1), from the perspective of the side to move.

Default architecture (paper, Section III / Tables I-III):
  * stem: conv3x3 32, BN, ReLU
  * residual blocks (paper: 2): conv3x3 32, BN, ReLU, conv3x3 32, BN, +x, ReLU
  * policy head: conv1x1 2, BN, ReLU, flatten, dense H*W (softmax in the loss)
  * value head: conv1x1 1, BN, ReLU, flatten, dense 32, ReLU, dense 1, tanh

BatchNorm uses batch statistics while training (``train=True``, and
``batch_stats`` is mutable) and the running averages otherwise (search, play).

Double Networks (paper III.B): ``Networks`` holds ``num_nets`` parameter sets
stacked on a leading axis: one net (``num_nets=1``) or a black and a white net
(``num_nets=2``). ``Networks.evaluate`` asks, for each position, the net of the
colour to move. Mixed-colour batches are evaluated by running both nets on the
whole batch, one after the other, and selecting per position. That costs two
forward passes; ``make bench`` measures the alternatives on a mixed-colour
batch, and on XLA:CPU both nets under ``jax.vmap`` (a batched convolution) or a
per-position parameter gather were 2-3x slower than two plain passes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

Variables = Any  # {'params': ..., 'batch_stats': ...}, each leaf stacked [N, ...]


class ResidualBlock(nn.Module):
    filters: int

    @nn.compact
    def __call__(self, x, train: bool):
        y = nn.Conv(self.filters, (3, 3), padding="SAME", use_bias=False)(x)
        y = nn.BatchNorm(use_running_average=not train, momentum=0.9)(y)
        y = nn.relu(y)
        y = nn.Conv(self.filters, (3, 3), padding="SAME", use_bias=False)(y)
        y = nn.BatchNorm(use_running_average=not train, momentum=0.9)(y)
        return nn.relu(x + y)


class PolicyValueNet(nn.Module):
    """The paper's policy-value net; ``filters``/``blocks`` configurable."""

    board_size: int = 15
    filters: int = 32
    blocks: int = 2
    value_hidden: int = 32

    @nn.compact
    def __call__(self, obs: jax.Array, train: bool = False):
        """obs: float32[B, H, W, C] -> (logits float32[B, H*W], value float32[B])."""
        bn = lambda: nn.BatchNorm(use_running_average=not train, momentum=0.9)
        x = nn.Conv(self.filters, (3, 3), padding="SAME", use_bias=False)(obs)
        x = nn.relu(bn()(x))
        for _ in range(self.blocks):
            x = ResidualBlock(self.filters)(x, train)

        p = nn.Conv(2, (1, 1), use_bias=False)(x)
        p = nn.relu(bn()(p))
        p = p.reshape(p.shape[0], -1)
        logits = nn.Dense(self.board_size * self.board_size)(p)

        v = nn.Conv(1, (1, 1), use_bias=False)(x)
        v = nn.relu(bn()(v))
        v = v.reshape(v.shape[0], -1)
        v = nn.relu(nn.Dense(self.value_hidden)(v))
        value = jnp.tanh(nn.Dense(1)(v))[:, 0]
        return logits, value


@dataclasses.dataclass(frozen=True)
class Networks:
    """``num_nets`` copies of one architecture with stacked variables.

    ``num_nets=2`` is Double Networks: index 0 is the black net, 1 the white net.
    """

    module: PolicyValueNet
    num_nets: int = 2
    obs_channels: int = 3

    def __post_init__(self):
        if self.num_nets not in (1, 2):
            raise ValueError(f"num_nets must be 1 (one net) or 2 (Double Networks), "
                             f"got {self.num_nets!r}")

    def init(self, key: jax.Array) -> Variables:
        """Variables with every leaf stacked ``[num_nets, ...]``."""
        size = self.module.board_size
        dummy = jnp.zeros((1, size, size, self.obs_channels), jnp.float32)
        keys = jax.random.split(key, self.num_nets)
        return jax.vmap(lambda k: self.module.init(k, dummy, train=False))(keys)

    def net_index(self, to_play: jax.Array) -> jax.Array:
        """int32[B]: which net evaluates a position whose colour to move is given."""
        if self.num_nets == 1:
            return jnp.zeros_like(to_play)
        return to_play

    def apply_one(self, variables: Variables, obs: jax.Array):
        """One net's (unstacked variables) inference: obs [B,H,W,C] -> ([B,A], [B])."""
        return self.module.apply(variables, obs, train=False)

    def evaluate(self, variables: Variables, obs: jax.Array, to_play: jax.Array):
        """Inference with running BN statistics, each position by its own net.

        Args:
          variables: stacked ``[num_nets, ...]``.
          obs: float32[B, H, W, C].
          to_play: int32[B], colour to move of each position.
        Returns:
          logits float32[B, A], value float32[B].
        """
        outs = [self.apply_one(unstack(variables, n), obs) for n in range(self.num_nets)]
        if self.num_nets == 1:
            return outs[0]
        white = (to_play == 1)
        logits = jnp.where(white[:, None], outs[1][0], outs[0][0])
        value = jnp.where(white, outs[1][1], outs[0][1])
        return logits, value

    def num_params(self, variables: Variables) -> int:
        """Trainable parameters of one net."""
        return sum(x[0].size for x in jax.tree.leaves(variables["params"]))


def unstack(variables: Variables, n: int) -> Variables:
    """The variables of net ``n`` from stacked ``[num_nets, ...]`` variables."""
    return jax.tree.map(lambda v: v[n], variables)


def stack(per_net: list) -> Variables:
    """Stack per-net pytrees on a new leading axis."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *per_net)


def flops_per_position(board_size: int, filters: int, blocks: int, channels: int = 3,
                       value_hidden: int = 32) -> int:
    """Multiply-adds x2 of one forward pass (convs and dense layers only)."""
    a = board_size * board_size
    conv = lambda cin, cout, k: 2 * a * k * k * cin * cout
    total = conv(channels, filters, 3) + blocks * 2 * conv(filters, filters, 3)
    total += conv(filters, 2, 1) + 2 * (2 * a) * a
    total += conv(filters, 1, 1) + 2 * a * value_hidden + 2 * value_hidden
    return total
