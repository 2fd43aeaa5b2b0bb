"""The paper's loss on hand-made numbers, and the SGD step of each net."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.config.schema import TrainConfig
from agz_jax.nets.networks import Networks, PolicyValueNet
from agz_jax.training.replay import Batch
from agz_jax.training.train import (
    init_train_state,
    l2_penalty,
    loss_terms,
    make_loss_fn,
    make_train_step,
)

SIZE = 5


@pytest.fixture(scope="module")
def nets():
    return Networks(PolicyValueNet(board_size=SIZE, filters=4, blocks=1, value_hidden=4),
                    num_nets=2)


def test_loss_terms_hand_made():
    # Two positions, three actions.
    logits = jnp.array([[0.0, 0.0, 0.0], [np.log(2.0), 0.0, 0.0]])
    value = jnp.array([0.5, -0.25])
    pi = jnp.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    z = jnp.array([1.0, 0.0])
    v_loss, p_loss = loss_terms(logits, value, pi, z)
    # (z - v)^2: (0.5^2 + 0.25^2) / 2
    assert float(v_loss) == pytest.approx((0.25 + 0.0625) / 2)
    # -pi . log p: row 1 = log 3; row 2 = -(0.5 log(2/4) + 0.5 log(1/4)) = 0.5 log 2 + log 2
    expected = (np.log(3.0) + 0.5 * np.log(2.0) + np.log(2.0)) / 2
    assert float(p_loss) == pytest.approx(expected, rel=1e-6)


def test_l2_counts_kernels_only():
    params = {"Conv_0": {"kernel": jnp.full((2, 2), 2.0)},
              "Dense_0": {"kernel": jnp.ones(3), "bias": jnp.full(3, 100.0)},
              "BatchNorm_0": {"scale": jnp.full(4, 100.0)}}
    assert float(l2_penalty(params)) == pytest.approx(4 * 4.0 + 3 * 1.0)


def test_total_loss_includes_l2(nets):
    cfg = TrainConfig(l2=0.5)
    state = init_train_state(nets, cfg, jax.random.PRNGKey(0))
    one = jax.tree.map(lambda v: v[0], state.variables)
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.2, (6, SIZE, SIZE, 3)).astype(jnp.float32)
    pi = jax.nn.one_hot(jnp.arange(6), SIZE * SIZE)
    z = jnp.array([1.0, -1.0, 0.0, 0.5, -0.5, 1.0])
    loss, (_, m) = make_loss_fn(nets, cfg)(one["params"], one["batch_stats"], obs, pi, z)
    assert float(loss) == pytest.approx(
        float(m["value_loss"] + m["policy_loss"] + 0.5 * m["l2"]), rel=1e-6)
    assert float(m["l2"]) == pytest.approx(float(l2_penalty(one["params"])), rel=1e-6)


def _batch(key, n, b):
    k1, k2, k3 = jax.random.split(key, 3)
    obs = jax.random.bernoulli(k1, 0.2, (n, b, SIZE, SIZE, 3)).astype(jnp.float32)
    pi = jax.nn.one_hot(jax.random.randint(k2, (n, b), 0, SIZE * SIZE), SIZE * SIZE)
    z = jax.random.choice(k3, jnp.array([-1.0, 1.0]), (n, b))
    return Batch(obs, pi, z)


def test_steps_reduce_loss_on_a_fixed_batch(nets):
    cfg = TrainConfig(learning_rate=0.05, batch_size=16, l2=1e-4)
    state = init_train_state(nets, cfg, jax.random.PRNGKey(0))
    step = jax.jit(make_train_step(nets, cfg))
    batch = _batch(jax.random.PRNGKey(3), 2, 16)
    losses = []
    for _ in range(30):
        state, m = step(state, batch)
        losses.append(np.asarray(m["loss"]))
    losses = np.stack(losses)  # [steps, nets]
    assert losses.shape == (30, 2)
    assert np.all(losses[-1] < 0.7 * losses[0]), losses[[0, -1]]
    assert int(state.step) == 30


def test_each_net_learns_only_from_its_own_batch(nets):
    """Double Networks: the black net's update ignores the white batch and vice versa."""
    cfg = TrainConfig(learning_rate=0.05, batch_size=8)
    state = init_train_state(nets, cfg, jax.random.PRNGKey(0))
    step = jax.jit(make_train_step(nets, cfg))
    b1 = _batch(jax.random.PRNGKey(1), 2, 8)
    b2 = _batch(jax.random.PRNGKey(2), 2, 8)
    mixed = Batch(*(jnp.stack([x[0], y[1]]) for x, y in zip(b1, b2, strict=True)))
    s1, _ = step(state, b1)
    s2, _ = step(state, mixed)
    black = lambda s: jax.tree.map(lambda v: v[0], s.variables)
    white = lambda s: jax.tree.map(lambda v: v[1], s.variables)
    jax.tree.map(np.testing.assert_array_equal, black(s1), black(s2))
    diffs = jax.tree.leaves(jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()),
                                         white(s1)["params"], white(s2)["params"]))
    assert max(diffs) > 0


def test_batchnorm_statistics_update_in_training(nets):
    cfg = TrainConfig(batch_size=8)
    state = init_train_state(nets, cfg, jax.random.PRNGKey(0))
    step = jax.jit(make_train_step(nets, cfg))
    new, _ = step(state, _batch(jax.random.PRNGKey(1), 2, 8))
    before = jax.tree.leaves(state.variables["batch_stats"])
    after = jax.tree.leaves(new.variables["batch_stats"])
    assert any(float(jnp.abs(a - b).max()) > 0 for a, b in zip(before, after, strict=True))


def test_the_learning_rate_decays_by_cosine_to_a_tenth_then_holds():
    """``train.lr_decay_steps``: 0 keeps the paper's constant rate; N decays it
    by a cosine to a tenth over N steps (reference: the formula by hand)."""
    from agz_jax.training.train import learning_rate

    assert learning_rate(TrainConfig(learning_rate=0.02)) == 0.02
    schedule = learning_rate(TrainConfig(learning_rate=0.02, lr_decay_steps=100))
    for t in (0, 25, 50, 100, 250):
        frac = min(t, 100) / 100
        expected = 0.02 * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * frac)))
        assert float(schedule(t)) == pytest.approx(expected, rel=1e-5)


def test_a_decayed_rate_makes_later_steps_smaller(nets):
    """With the schedule, the optimizer's state counts the steps of each net,
    and the same gradient moves the weights less after the decay than at the
    start (plain SGD, no momentum, so a step is the rate times the gradient)."""
    cfg = TrainConfig(learning_rate=0.05, batch_size=8, momentum=0.0, lr_decay_steps=4, l2=0.0)
    state = init_train_state(nets, cfg, jax.random.PRNGKey(0))
    step = jax.jit(make_train_step(nets, cfg))
    batch = _batch(jax.random.PRNGKey(1), 2, 8)

    def moved(s):
        after, _ = step(s, batch)
        return jax.tree.leaves(jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()),
                                            s.variables["params"], after.variables["params"]))

    first = moved(state)
    for _ in range(4):
        state, _ = step(state, batch)
    later = moved(state)
    counts = [np.asarray(x).tolist() for x in jax.tree.leaves(state.opt_state)
              if jnp.issubdtype(x.dtype, jnp.integer)]
    assert counts == [[4, 4]]  # one count a net
    assert max(later) < 0.5 * max(first)
