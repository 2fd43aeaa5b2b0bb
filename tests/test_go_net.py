"""The move-prediction net (``agz_jax.go.net``): the paper's shape and size,
one softmax per colour to move, weight-symmetric filters, configs and model
directories."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.game import symmetry
from agz_jax.go import net as net_lib


def shapes(config):
    tree = jax.eval_shape(net_lib.GoNet(config).init, jax.random.key(0, impl="rbg"))
    return {"/".join(k.key for k in path): leaf.shape
            for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}


def test_the_paper_net():
    """12 layers of 128 filters on 19x19 with the 36 planes: about 2.3 million
    parameters (Section 4); 5x5 first, 3x3 after, biases per point, 2 outputs."""
    s = shapes(net_lib.NetConfig())
    assert sum(int(np.prod(v)) for v in s.values()) == 2_292_690
    assert s["BoardConv_0/kernel"] == (5, 5, 36, 128)
    assert s["BoardConv_0/position_bias"] == (19, 19, 128)
    assert all(s[f"BoardConv_{i}/kernel"] == (3, 3, 128, 128) for i in range(1, 12))
    assert s["BoardConv_12/kernel"] == (1, 1, 128, 2)
    assert s["BoardConv_12/position_bias"] == (19, 19, 2)
    assert len(s) == 26
    for depth in net_lib.DEPTHS:
        assert f"BoardConv_{depth}/kernel" in shapes(net_lib.NetConfig(layers=depth, filters=16))


def test_one_softmax_per_colour():
    config = net_lib.NetConfig(size=5, channels=28, layers=2, filters=4)
    net = net_lib.GoNet(config)
    params = net_lib.init(config, seed=1)
    out = params["BoardConv_2"]
    # white's output plane: a constant 3 at every point; black's: the net's
    kernel, bias = np.array(out["kernel"]), np.array(out["position_bias"])
    kernel[..., 1], bias[..., 1] = 0.0, 3.0
    params["BoardConv_2"] = {"kernel": kernel, "position_bias": bias}
    obs = jax.random.bernoulli(jax.random.PRNGKey(0), 0.3, (2, 5, 5, 28)).astype(jnp.float32)
    logits = np.asarray(net.logits(params, obs, jnp.array([0, 1])))
    assert logits.shape == (2, 25)
    np.testing.assert_allclose(logits[1], 3.0)
    assert np.ptp(logits[0]) > 0
    black_only = np.asarray(net.logits(params, obs[:1], jnp.array([0])))
    np.testing.assert_allclose(black_only[0], logits[0], rtol=1e-5, atol=1e-6)


def test_symmetric_filters_make_the_net_equivariant():
    config = net_lib.NetConfig(size=5, channels=28, layers=2, filters=4, symmetric=True,
                               position_bias=False)
    net = net_lib.GoNet(config)
    params = net_lib.init(config, seed=2)
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (1, 5, 5, 28)).astype(jnp.float32)
    base = net.logits(params, obs, jnp.array([1]))
    for g in range(8):
        moved = net.logits(params, symmetry.transform_planes(obs, g), jnp.array([1]))
        np.testing.assert_allclose(moved, symmetry.transform_policy(base, g, 5), rtol=1e-4,
                                   atol=1e-5)


@pytest.mark.parametrize("field, value, says", [
    ("layers", 0, "net.layers must be a positive integer"),
    ("first_kernel", 4, "net.first_kernel must be odd"),
    ("size", 25, "net.size must be in 2..19"),
    ("symmetric", "yes", "net.symmetric must be true or false"),
    ("filters", 2.5, "net.filters must be a positive integer"),
])
def test_bad_configs_name_the_field(field, value, says):
    with pytest.raises(ValueError, match=says):
        net_lib.NetConfig(**{field: value})


def test_model_directory(tmp_path):
    config = net_lib.NetConfig(size=5, channels=28, layers=1, filters=2)
    params = jax.tree.map(lambda s: np.full(s.shape, 0.5, s.dtype),
                          jax.eval_shape(net_lib.GoNet(config).init, jax.random.key(0, impl="rbg")))
    net_lib.save(tmp_path / "m", config, params, {"note": "x"})
    back, loaded, meta = net_lib.load(tmp_path / "m")
    assert back == config and meta == {"note": "x"}
    assert jax.tree.all(jax.tree.map(np.array_equal, params, loaded))
    with pytest.raises(ValueError, match="unknown net field 'net.depth'"):
        net_lib.NetConfig.from_dict({"depth": 3})
    (tmp_path / "m" / "params.msgpack").write_bytes(b"\x00")
    with pytest.raises(ValueError, match="a damaged Go model"):
        net_lib.load(tmp_path / "m")
