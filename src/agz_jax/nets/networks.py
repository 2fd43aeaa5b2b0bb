"""Policy-value networks (AlphaGomoku, Tables I-III), Double Networks and
Maddison et al.'s architecture options.

``PolicyValueNet`` maps observations ``[B, H, W, C]`` to policy logits ``[B, H*W]``
and a value ``[B]`` in (-1, 1), from the perspective of the side to move.

Default architecture (paper, Section III / Tables I-III):
  * stem: conv3x3 32, BN, ReLU
  * residual blocks (paper: 2): conv3x3 32, BN, ReLU, conv3x3 32, BN, +x, ReLU
  * policy head: conv1x1 2, BN, ReLU, flatten, dense H*W (softmax in the loss)
  * value head: conv1x1 1, BN, ReLU, flatten, dense 32, ReLU, dense 1, tanh

BatchNorm uses batch statistics while training (``train=True``, and
``batch_stats`` is mutable) and the running averages otherwise (search, play).

Options (Maddison et al., ICLR 2015, Section 4; each off by default, and with
all of them off the variables and outputs are the paper net's, bit for bit):
  * ``position_bias``: every conv layer adds a learned bias per board point and
    channel (``position_bias`` [H, W, C_out], zeros at init). The default
    policy output, a dense layer, already has a bias per point; the symmetric
    policy output (below) gets one per point too.
  * ``symmetric``: every conv kernel is averaged over the 8 dihedral maps of its
    spatial axes before use (weight tying: the kernel is invariant under the
    group). The flatten-dense heads are not equivariant, so this also makes the
    policy head fully convolutional (conv1x1 2, BN, ReLU, conv1x1 -> one logit
    per point) and the value head invariant (conv1x1 ``value_hidden``, BN,
    ReLU, mean over the points, dense ``value_hidden``, ReLU, dense 1, tanh).
    The whole net is then exactly equivariant: rotating or reflecting the
    input rotates or reflects the policy and leaves the value unchanged (up to
    float rounding). Position biases are not invariant: with both options the
    net is only equivariant while they are symmetric (at init, all zeros).
  * ``colour_heads``: Maddison's two softmaxes: one trunk, the policy (and the
    value) output doubled, a black and a white one, and each position reads
    the one of its colour to move (``to_play``, required). An alternative to
    Double Networks (``NetConfig`` refuses both at once).

Double Networks (paper III.B): ``Networks`` holds ``num_nets`` parameter sets
stacked on a leading axis: one net (``num_nets=1``) or a black and a white net
(``num_nets=2``). ``Networks.evaluate`` asks, for each position, the net of the
colour to move. A mixed-colour batch is sorted by colour and each net evaluates
a fixed share of it (``agz_jax.nets.routing``), at about one forward pass where
running both nets on the whole batch costs two; ``make bench`` measures the
two. On XLA:CPU both nets under ``jax.vmap`` (a batched convolution) or a
per-position parameter gather were 2-3x slower than two plain passes.

``Networks`` also carries the input encoding (``features``, see
``agz_jax.nets.features``): a net is searched and played with the features it was
trained on.

Mixed precision: ``Networks.evaluate(..., dtype=jnp.bfloat16)`` runs
the convolutions and dense layers in bfloat16 (``cast_params``: the ``params``
and the observations cast, BatchNorm's running statistics kept in float32, as
flax's own ``force_float32_reductions`` does), and returns float32 logits and
values. It is inference only, for the search (``SearchConfig.dtype``);
training stays float32.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from agz_jax.config.sections import FeaturesConfig, NetConfig
from agz_jax.game.gomoku import Rules, State
from agz_jax.nets import features as features_lib
from agz_jax.nets import routing

Variables = Any  # {'params': ..., 'batch_stats': ...}, each leaf stacked [N, ...]


def symmetrise(kernel: jax.Array) -> jax.Array:
    """The mean of a conv kernel ``[kh, kw, cin, cout]`` over the 8 dihedral maps
    of its spatial axes: a kernel invariant under rotations and reflections."""
    maps = [jnp.rot90(kernel, k, axes=(0, 1)) for k in range(4)]
    maps += [jnp.flip(m, axis=1) for m in maps]
    return sum(maps) / 8.0


class BoardConv(nn.Module):
    """A 'SAME' convolution without bias, optionally weight-symmetric and with a
    bias per board point and channel (used only when an option is on: the
    default net uses ``nn.Conv``, whose variables it keeps)."""

    filters: int
    kernel_size: int
    symmetric: bool = False
    position_bias: bool = False

    @nn.compact
    def __call__(self, x):
        k = self.kernel_size
        kernel = self.param("kernel", nn.linear.default_kernel_init,
                             (k, k, x.shape[-1], self.filters), jnp.float32)
        if self.symmetric:
            kernel = symmetrise(kernel)
        y = jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        if self.position_bias:
            y = y + self.param("position_bias", nn.initializers.zeros,
                               (*x.shape[1:3], self.filters), jnp.float32)
        return y


class ResidualBlock(nn.Module):
    filters: int
    symmetric: bool = False
    position_bias: bool = False

    @nn.compact
    def __call__(self, x, train: bool):
        conv = functools.partial(_conv, self.symmetric, self.position_bias, self.filters, 3)
        y = conv(x)
        y = nn.BatchNorm(use_running_average=not train, momentum=0.9)(y)
        y = nn.relu(y)
        y = conv(y)
        y = nn.BatchNorm(use_running_average=not train, momentum=0.9)(y)
        return nn.relu(x + y)


def _conv(symmetric: bool, position_bias: bool, filters: int, kernel_size: int, x):
    """A conv layer of the calling module: flax's ``nn.Conv`` when no option is on
    (the default net's variables), else a ``BoardConv``."""
    if symmetric or position_bias:
        return BoardConv(filters, kernel_size, symmetric, position_bias)(x)
    return nn.Conv(filters, (kernel_size, kernel_size), padding="SAME", use_bias=False)(x)


def _by_colour(out: jax.Array, to_play: jax.Array | None) -> jax.Array:
    """[B, 2, ...] per-colour outputs -> [B, ...], each row its colour to move's."""
    if to_play is None:
        raise ValueError("a net with colour_heads needs to_play (the colour to move)")
    to_play = jnp.asarray(to_play).astype(jnp.int32)
    return jnp.take_along_axis(out, to_play.reshape(-1, *([1] * (out.ndim - 1))), axis=1)[:, 0]


class PolicyValueNet(nn.Module):
    """The paper's policy-value net; ``filters``/``blocks`` configurable, and
    Maddison et al.'s options (see the module docstring)."""

    board_size: int = 15
    filters: int = 32
    blocks: int = 2
    value_hidden: int = 32
    position_bias: bool = False
    symmetric: bool = False
    colour_heads: bool = False

    @nn.compact
    def __call__(self, obs: jax.Array, train: bool = False, to_play: jax.Array | None = None):
        """obs: float32[B, H, W, C], to_play: int32[B] (needed with ``colour_heads``)
        -> (logits float32[B, H*W], value float32[B])."""
        bn = lambda: nn.BatchNorm(use_running_average=not train, momentum=0.9)
        conv = functools.partial(_conv, self.symmetric, self.position_bias)
        heads = 2 if self.colour_heads else 1
        a = self.board_size * self.board_size
        x = conv(self.filters, 3, obs)
        x = nn.relu(bn()(x))
        for _ in range(self.blocks):
            x = ResidualBlock(self.filters, self.symmetric, self.position_bias)(x, train)

        p = conv(2, 1, x)
        p = nn.relu(bn()(p))
        if self.symmetric:
            logits = BoardConv(heads, 1, position_bias=self.position_bias)(p)  # [B, H, W, h]
            logits = jnp.moveaxis(logits, -1, 1).reshape(p.shape[0], heads, a)
        else:
            p = p.reshape(p.shape[0], -1)
            logits = nn.Dense(heads * a)(p).reshape(p.shape[0], heads, a)

        if self.symmetric:
            v = conv(self.value_hidden, 1, x)
            v = nn.relu(bn()(v))
            v = jnp.mean(v, axis=(1, 2))
        else:
            v = conv(1, 1, x)
            v = nn.relu(bn()(v))
            v = v.reshape(v.shape[0], -1)
        v = nn.relu(nn.Dense(self.value_hidden)(v))
        value = jnp.tanh(nn.Dense(heads)(v))
        if self.colour_heads:
            return _by_colour(logits, to_play), _by_colour(value, to_play)
        return logits[:, 0], value[:, 0]


@functools.partial(jax.jit, static_argnums=0)
def _inference(module: PolicyValueNet, variables: Variables, obs: jax.Array,
               to_play: jax.Array | None):
    """``module``'s inference, as a jitted function of its own: inside a larger
    program it is a call that jax traces once per net and input shape in a
    process, and lowers once per program, where a search otherwise traced the
    net anew at each of its calls (the root, each recurrent step's branch of
    ``routing.by_colour``). XLA inlines the call, so the program computes the same."""
    return module.apply(variables, obs, train=False, to_play=to_play)


@dataclasses.dataclass(frozen=True)
class Networks:
    """``num_nets`` copies of one architecture with stacked variables, and the
    input features they read.

    ``num_nets=2`` is Double Networks: index 0 is the black net, 1 the white net.
    """

    module: PolicyValueNet
    num_nets: int = 2
    features: FeaturesConfig = FeaturesConfig()
    route: bool = True
    """Double Networks: each position through its own net only (``evaluate``)."""

    def __post_init__(self):
        if self.num_nets not in (1, 2):
            raise ValueError(f"num_nets must be 1 (one net) or 2 (Double Networks), "
                             f"got {self.num_nets!r}")
        if self.num_nets == 2 and self.module.colour_heads:
            raise ValueError("colour_heads is an alternative to Double Networks: "
                             "use num_nets=1 with it")

    @property
    def obs_channels(self) -> int:
        return self.features.channels

    @property
    def num_rings(self) -> int:
        """Parts the training data is split into, by colour to move (replay rings):
        2 when each colour has its own net or its own heads, else 1."""
        return 2 if self.num_nets == 2 or self.module.colour_heads else 1

    def observe(self, rules: Rules, states: State) -> jax.Array:
        """float32[B, H, W, C]: the observations of states ``[B]`` these nets read."""
        return features_lib.observe_batch(self.features, rules, states)

    def init(self, key: jax.Array) -> Variables:
        """Variables with every leaf stacked ``[num_nets, ...]`` (one jitted call,
        compiled once per ``Networks``; the persistent XLA cache can serve it)."""
        return self._jitted_init(key)

    @functools.cached_property
    def _jitted_init(self):
        size = self.module.board_size

        def init(key):
            # Built inside the traced function: the cached closure must hold no
            # array of whatever trace first asked for it (jit, eval_shape).
            dummy = jnp.zeros((1, size, size, self.obs_channels), jnp.float32)
            to_play = jnp.zeros(1, jnp.int32)
            keys = jax.random.split(key, self.num_nets)
            return jax.vmap(lambda k: self.module.init(k, dummy, train=False,
                                                       to_play=to_play))(keys)

        return jax.jit(init)

    def net_index(self, to_play: jax.Array) -> jax.Array:
        """int32[B]: which net evaluates a position whose colour to move is given."""
        if self.num_nets == 1:
            return jnp.zeros_like(to_play)
        return to_play

    def apply_one(self, variables: Variables, obs: jax.Array, to_play: jax.Array | None = None):
        """One net's (unstacked variables) inference: obs [B,H,W,C], to_play int32[B]
        (needed with colour heads) -> ([B,A], [B])."""
        return _inference(self.module, variables, obs, to_play)

    def apply_train(self, variables: Variables, obs: jax.Array,
                    to_play: jax.Array | None = None):
        """One net's training forward pass (batch statistics):
        -> ((logits [B,A], value [B]), new batch_stats)."""
        out, updates = self.module.apply(variables, obs, train=True, to_play=to_play,
                                         mutable=["batch_stats"])
        return out, updates["batch_stats"]

    def evaluate(self, variables: Variables, obs: jax.Array, to_play: jax.Array,
                 dtype: Any = jnp.float32, route: bool | None = None):
        """Inference with running BN statistics, each position by its own net.

        Args:
          variables: stacked ``[num_nets, ...]``, or each net's (``split``:
            in a loop, it copies no weights).
          obs: float32[B, H, W, C].
          to_play: int32[B], colour to move of each position.
          dtype: what the layers compute in: float32, or bfloat16 (``cast_params``
            of ``variables``, a no-op on params already cast, and the
            observations cast; the outputs are cast back).
          route: with Double Networks, each position through its own net only
            (``routing.by_colour``, about one net's cost; the batch is routed in
            as many blocks as there are devices); False runs both nets on every
            position (``routing.plain``). The two agree up to float rounding.
            None: the ``route`` field's.
        Returns:
          logits float32[B, A], value float32[B].
        """
        if jnp.dtype(dtype) != jnp.float32:
            variables, obs = cast_params(variables, dtype), obs.astype(dtype)
        if self.num_nets == 1:
            logits, value = self.apply_one(unstack(variables, 0), obs, to_play)
        elif self.route if route is None else route:
            logits, value = routing.by_colour(self.apply_one, variables, obs, to_play,
                                              blocks=jax.device_count())
        else:
            logits, value = routing.plain(self.apply_one, variables, obs, to_play)
        return logits.astype(jnp.float32), value.astype(jnp.float32)

    def num_params(self, variables: Variables) -> int:
        """Trainable parameters of one net."""
        return sum(x[0].size for x in jax.tree.leaves(variables["params"]))


def make_networks(net: NetConfig, *, board_size: int, features: FeaturesConfig) -> Networks:
    """The ``Networks`` that ``net`` describes (architecture and ``num_nets``), on a
    ``board_size`` x ``board_size`` board, reading the input encoding ``features``."""
    module = PolicyValueNet(board_size=board_size, filters=net.filters,
                            blocks=net.blocks, value_hidden=net.value_hidden,
                            position_bias=net.position_bias, symmetric=net.symmetric,
                            colour_heads=net.colour_heads)
    return Networks(module, num_nets=net.num_nets, features=features)


def cast_params(variables: Variables, dtype: Any) -> Variables:
    """``variables`` with the floating leaves of ``params`` cast to ``dtype``.

    The layers compute in the dtype of their inputs and kernels (flax's
    ``dtype=None`` promotion), so bfloat16 params and observations give
    bfloat16 convolutions and matmuls. ``batch_stats`` stay float32: BatchNorm
    then normalises in float32 (a few elementwise ops per activation) and
    rounds its output to bfloat16. Casting params that already have ``dtype``
    emits nothing, so a search casts once, outside its loop.
    """
    if isinstance(variables, routing.PerNet):  # each net's (``split``)
        return routing.PerNet(cast_params(v, dtype) for v in variables.nets)
    cast = lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x
    return {**variables, "params": jax.tree.map(cast, variables["params"])}


def unstack(variables: Variables, n: int) -> Variables:
    """The variables of net ``n``: from stacked ``[num_nets, ...]`` variables, or
    from each net's (``split``)."""
    return routing.net_variables(variables, n)


def split(variables: Variables) -> routing.PerNet:
    """Stacked ``[num_nets, ...]`` variables as each net's (``routing.PerNet``).

    ``Networks.evaluate`` takes either. A loop that evaluates many times (a
    search's simulations) should be given these, made before it: indexing
    the stacked nets by a traced colour inside the loop copies that net's
    weights at every evaluation (on XLA:CPU about a twentieth of a
    one-position search's time with the paper's nets)."""
    if isinstance(variables, routing.PerNet):
        return variables
    num_nets = jax.tree.leaves(variables)[0].shape[0]
    return routing.PerNet(unstack(variables, n) for n in range(num_nets))


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
