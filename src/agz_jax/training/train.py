"""The paper's loss and the SGD train step, one step for every net at once.

loss = (z - v)^2 - pi^T log p + c ||theta||^2        (AlphaGo Zero, eq. 1)

``c ||theta||^2`` is taken over the conv and dense kernels (not biases or BN
scales), as the original Keras code regularised them. Optimiser: SGD with
(Nesterov) momentum. Variables and optimiser states are stacked ``[N, ...]``
over the nets; each net is updated on its own batch, so the black net sees
only the black batch and the white net only the white one. A net with colour
heads (one net, replay split by colour) is updated once on the black and the
white batch together, each position through the head of its colour.

``sgd`` runs a number of such steps on samples of a replay buffer: the
supervised trainings (the curriculum's stages, move prediction) share it.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from agz_jax.config.schema import TrainConfig
from agz_jax.nets.networks import Networks, stack, unstack
from agz_jax.training import replay
from agz_jax.training.replay import Batch


class TrainState(NamedTuple):
    variables: Any  # {'params', 'batch_stats'}, stacked [N, ...]
    opt_state: Any  # stacked [N, ...]
    step: jax.Array  # int32[]


def learning_rate(cfg: TrainConfig) -> float | optax.Schedule:
    """``cfg.learning_rate``, or its cosine decay to a tenth over
    ``cfg.lr_decay_steps`` SGD steps (the optimizer's state then counts them)."""
    if not cfg.lr_decay_steps:
        return cfg.learning_rate
    return optax.cosine_decay_schedule(cfg.learning_rate, cfg.lr_decay_steps, alpha=0.1)


def make_optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    return optax.sgd(learning_rate(cfg), momentum=cfg.momentum or None, nesterov=cfg.nesterov)


def fresh_train_state(cfg: TrainConfig, variables) -> TrainState:
    """A TrainState of (stacked) ``variables`` with a new optimizer state (step 0)."""
    opt = make_optimizer(cfg)
    return TrainState(variables, jax.vmap(opt.init)(variables["params"]), jnp.int32(0))


def init_train_state(nets: Networks, cfg: TrainConfig, key: jax.Array) -> TrainState:
    """New nets (``nets.init(key)``) with a new optimizer state."""
    return fresh_train_state(cfg, nets.init(key))


def l2_penalty(params) -> jax.Array:
    """||theta||^2 over kernels."""
    leaves = jax.tree_util.tree_leaves_with_path(params)
    total = jnp.float32(0.0)
    for path, leaf in leaves:
        if getattr(path[-1], "key", None) == "kernel":
            total = total + jnp.sum(jnp.square(leaf))
    return total


def loss_terms(logits: jax.Array, value: jax.Array, policy: jax.Array, z: jax.Array):
    """Per-batch means of the value and policy terms.

    logits [B, A], value [B], policy (target pi) [B, A], z [B].
    """
    value_loss = jnp.mean(jnp.square(z - value))
    policy_loss = -jnp.mean(jnp.sum(policy * jax.nn.log_softmax(logits), axis=-1))
    return value_loss, policy_loss


def make_loss_fn(nets: Networks, cfg: TrainConfig):
    def loss_fn(params, batch_stats, obs, policy, z, to_play=None):
        (logits, value), new_stats = nets.apply_train(
            {"params": params, "batch_stats": batch_stats}, obs, to_play)
        value_loss, policy_loss = loss_terms(logits, value, policy, z)
        l2 = l2_penalty(params)
        loss = value_loss + policy_loss + cfg.l2 * l2
        entropy = -jnp.mean(jnp.sum(jax.nn.softmax(logits) * jax.nn.log_softmax(logits), -1))
        metrics = {"loss": loss, "value_loss": value_loss, "policy_loss": policy_loss,
                   "l2": l2, "policy_entropy": entropy}
        return loss, (new_stats, metrics)

    return loss_fn


def make_train_step(nets: Networks, cfg: TrainConfig):
    """Returns ``step(state, batch) -> (state, metrics)``; metrics per net [N].

    ``batch`` holds one part per replay ring (``nets.num_rings``): per net, or,
    with colour heads, the black and the white positions of the one net.
    """
    opt = make_optimizer(cfg)
    loss_fn = make_loss_fn(nets, cfg)

    def one_net(variables, opt_state, obs, policy, z, to_play=None):
        grads, (batch_stats, metrics) = jax.grad(loss_fn, has_aux=True)(
            variables["params"], variables["batch_stats"], obs, policy, z, to_play
        )
        updates, opt_state = opt.update(grads, opt_state, variables["params"])
        params = optax.apply_updates(variables["params"], updates)
        return {"params": params, "batch_stats": batch_stats}, opt_state, metrics

    def step(state: TrainState, batch: Batch):
        if nets.num_rings > nets.num_nets:  # colour heads: both colours' rings, one net
            joined = lambda x: x.reshape(1, -1, *x.shape[2:])
            to_play = jnp.repeat(jnp.arange(nets.num_rings, dtype=jnp.int32),
                                 batch.z.shape[1])
            out = one_net(unstack(state.variables, 0), unstack(state.opt_state, 0),
                          joined(batch.obs)[0], joined(batch.policy)[0], joined(batch.z)[0],
                          to_play)
            variables, opt_state, metrics = (stack([o]) for o in out)
            return TrainState(variables, opt_state, state.step + 1), metrics
        # The nets are updated one after the other rather than under jax.vmap:
        # on XLA:CPU a vmapped (batched-weight) convolution is several times
        # slower than two plain ones (measured by `make bench`).
        outs = [
            one_net(unstack(state.variables, n), unstack(state.opt_state, n),
                    batch.obs[n], batch.policy[n], batch.z[n])
            for n in range(nets.num_nets)
        ]
        variables, opt_state, metrics = (stack([o[i] for o in outs]) for i in range(3))
        return TrainState(variables, opt_state, state.step + 1), metrics

    return step


@functools.cache
def _sgd_fns(nets: Networks, cfg: TrainConfig):
    """(sample, step) jitted once per net and train config: the step takes a batch,
    so buffers of any capacity share its compilation."""
    sample = jax.jit(lambda buffer, key: replay.sample(buffer, key, cfg.batch_size))
    return sample, jax.jit(make_train_step(nets, cfg))


def sgd(nets: Networks, cfg: TrainConfig, state: TrainState, buffer: replay.Buffer,
        key: jax.Array, steps: int) -> tuple[TrainState, dict]:
    """``steps`` jitted SGD steps, each on a uniform, symmetry-augmented sample of
    ``cfg.batch_size`` positions per ring of ``buffer``; the first step's metrics
    (``first_<name>``) and the last one's, averaged over the nets, as floats.

    One jitted call per step, not a scan: XLA:CPU runs convolution gradients
    inside a rolled loop several times slower (``run.run_iteration``)."""
    sample, step = _sgd_fns(nets, cfg)
    metrics: dict[str, float] = {}
    m = None
    for i, k in enumerate(jax.random.split(key, steps) if steps else []):
        state, m = step(state, sample(buffer, k))
        if i == 0:
            metrics.update({f"first_{n}": float(np.mean(v)) for n, v in m.items()})
    if m is not None:
        metrics.update({n: float(np.mean(v)) for n, v in m.items()})
    return state, metrics
