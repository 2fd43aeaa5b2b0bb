"""The move-prediction net of Maddison, Huang, Sutskever & Silver (ICLR 2015),
Section 4.

``layers`` convolutional layers with ReLU: the first with ``first_kernel`` x
``first_kernel`` (5x5) filters, the rest 3x3, stride 1, zero-padded ('SAME'),
no pooling, each with a bias per board point and filter (position-dependent
biases, ``position_bias``); then the output layer, a convolution with two
filters (with position-dependent biases too), giving two planes of logits: the
softmax over the points for black to move and the one for white to move. The
position reads the plane of its colour to move. ``symmetric`` ties every
kernel to be invariant under the 8 symmetries of the square (the paper's
weight symmetries, Section 5.1). The layers are ``agz_jax.nets.networks.BoardConv``,
the gomoku nets' Maddison options.

Our reading of what the paper leaves open: the output layer's kernel is 1x1
(``output_kernel``); there is no normalisation layer; the kernels start from
flax's LeCun-normal initialisation and the biases at zero (the paper draws every
parameter from uniform[-0.05, 0.05]). With 12 layers of 128 filters on 19x19 and
the 36 input planes the net has 2,292,690 parameters: the paper's "2.3 million".

Depths of the paper's Table 3 (``DEPTHS``): 3, 6, 10 and 12 layers; a config
of each is ``NetConfig(layers=d)``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import flax.linen as nn
import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.go.features import num_channels
from agz_jax.nets.networks import BoardConv

DEPTHS = (3, 6, 10, 12)


@dataclasses.dataclass(frozen=True)
class NetConfig:
    """The net's shape (hashable: it closes over jitted functions)."""

    size: int = 19
    channels: int = 36
    layers: int = 12
    filters: int = 128
    first_kernel: int = 5
    kernel: int = 3
    output_kernel: int = 1
    position_bias: bool = True
    symmetric: bool = False

    def __post_init__(self):
        def need(ok, name, says):
            if not ok:
                raise ValueError(f"net.{name} {says}, got {getattr(self, name)!r}")

        def positive(name):
            v = getattr(self, name)
            need(isinstance(v, int) and not isinstance(v, bool) and v >= 1, name,
                 "must be a positive integer")

        for name in ("size", "channels", "layers", "filters", "first_kernel", "kernel",
                     "output_kernel"):
            positive(name)
        need(2 <= self.size <= 19, "size", "must be in 2..19")
        for name in ("first_kernel", "kernel", "output_kernel"):
            need(getattr(self, name) % 2 == 1, name, "must be odd (a centred 'SAME' kernel)")
        for name in ("position_bias", "symmetric"):
            need(isinstance(getattr(self, name), bool), name, "must be true or false")

    @classmethod
    def for_features(cls, size: int, ranks: int = 0, **kw) -> NetConfig:
        return cls(size=size, channels=num_channels(ranks), **kw)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> NetConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown net field 'net.{sorted(unknown)[0]}'")
        return cls(**d)


class PolicyNet(nn.Module):
    """obs float32[B, H, W, C], to_play int32[B] -> logits float32[B, H*W]."""

    config: NetConfig

    @nn.compact
    def __call__(self, obs, to_play):
        c = self.config
        x = obs
        for i in range(c.layers):
            k = c.first_kernel if i == 0 else c.kernel
            x = nn.relu(BoardConv(c.filters, k, c.symmetric, c.position_bias)(x))
        out = BoardConv(2, c.output_kernel, c.symmetric, c.position_bias)(x)  # [B, H, W, 2]
        out = out.reshape(out.shape[0], -1, 2)  # [B, A, 2]: black's and white's logits
        to_play = jnp.asarray(to_play, jnp.int32).reshape(-1, 1, 1)
        return jnp.take_along_axis(out, to_play, axis=2)[..., 0]


@dataclasses.dataclass(frozen=True)
class GoNet:
    """A ``PolicyNet`` with its config: ``init``, ``logits`` (jit-able) and the
    parameter count."""

    config: NetConfig

    @property
    def module(self) -> PolicyNet:
        return PolicyNet(self.config)

    def init(self, key: jax.Array):
        c = self.config
        obs = jnp.zeros((1, c.size, c.size, c.channels), jnp.float32)
        return self.module.init(key, obs, jnp.zeros(1, jnp.int32))["params"]

    def logits(self, params, obs: jax.Array, to_play: jax.Array) -> jax.Array:
        """float32[B, A] (A = H*W points, no pass) for obs [B, H, W, C] (any dtype)."""
        return self.module.apply({"params": params}, jnp.asarray(obs, jnp.float32), to_play)

    def num_params(self, params) -> int:
        return sum(int(np.size(x)) for x in jax.tree.leaves(params))


@functools.cache
def _jitted_init(net: GoNet):
    return jax.jit(net.init)


def init(config: NetConfig, seed: int = 0):
    """Fresh parameters (an ``rbg`` key: faster to compile on CPU than threefry)."""
    return jax.device_get(_jitted_init(GoNet(config))(jax.random.key(seed, impl="rbg")))


def save(out: str | Path, config: NetConfig, params, meta: dict | None = None) -> Path:
    """A model directory: ``net.json`` (the config and ``meta``) and
    ``params.msgpack``, each written atomically."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "params.msgpack.tmp"
    tmp.write_bytes(flax.serialization.to_bytes(jax.device_get(params)))
    tmp.replace(out / "params.msgpack")
    tmp = out / "net.json.tmp"
    tmp.write_text(json.dumps({"net": config.to_dict(), **(meta or {})}, indent=2))
    tmp.replace(out / "net.json")
    return out


def load(path: str | Path) -> tuple[NetConfig, dict, dict]:
    """(config, params, meta) of a model directory written by ``save``."""
    path = Path(path)
    try:
        info = json.loads((path / "net.json").read_text())
        config = NetConfig.from_dict(info.pop("net"))
        data = (path / "params.msgpack").read_bytes()
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{path}: not a Go model directory ({Path(e.filename).name} "
                                "is missing)") from None
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"{path}: a damaged Go model (net.json: {e})") from None
    template = jax.eval_shape(GoNet(config).init, jax.random.key(0, impl="rbg"))
    template = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), template)
    try:
        params = flax.serialization.from_bytes(template, data)
    except Exception as e:  # noqa: BLE001  (msgpack and flax raise many kinds on bad bytes)
        raise ValueError(f"{path}: a damaged Go model (params.msgpack: "
                         f"{type(e).__name__}: {e})") from None
    shapes = jax.tree.map(np.shape, params)
    if shapes != jax.tree.map(np.shape, template):
        raise ValueError(f"{path}: a damaged Go model (params.msgpack does not fit net.json)")
    return config, params, info
