"""Several seeds of one config as one computation: the run's phases vmapped over seeds.

purejaxrl's sweep trick for the self-play loop of ``agz_jax.training.run``: the run
states of S seeds are stacked along a leading seed axis, and each phase of an
iteration (self-play, ingest into the replay, a train step, gating, the
evaluation match) is ``jax.jit(jax.vmap(phase))`` of the solo run's phase, so
one compile serves every seed and each call advances all S runs.

Per seed, the semantics are the solo run's (``run.run_iteration``):

* seed ``s`` starts from ``run.init_state`` of ``config.replace(seed=s)``;
* the host decisions of the solo loop become per-seed masks: a seed trains only
  once each of its replay rings holds ``train.min_replay`` positions (the steps
  run for the whole group when any seed trains; a seed that does not train
  keeps its train state, ``jnp.where`` on the trees), and with gating a seed's
  best net is replaced only if its own candidate was trained and won;
* the metrics of each seed have the solo run's keys and values, except the
  timings: ``time/*`` is the wall time of the phase for the whole group, and
  ``speed/*`` is this seed's games (moves, simulations) over that time.

Where the config allows (``check``, ConfigError before anything compiles):
one device in the mesh (``parallel.devices`` 1, or 0 with one device visible)
and one process, since the seed axis is not sharded; distinct seeds; and the
stacked run states (replay buffers, nets, optimizer states) within a memory
budget, ``max_bytes`` (the activations of self-play and training grow with S
too). Larger runs go one after another (``experiments.studies.sweep`` without
``--vmap-seeds``).

Determinism, measured on XLA:CPU (jax 0.10.2; one iteration of the smoke preset
with the sweep tests' tiny overrides, seeds 0 and 1): a vmapped group is
bit-identical to itself, and seed ``s`` gives the same bits in any group of the
same size (seeds 0,1 and 1,2 alike). Self-play of a vmapped seed equals the solo
run's exactly (the same games and replay: the random bits do not depend on the
batching, and the search's argmax and sampling saw the same numbers); the nets
after its training step do not: XLA lowers a convolution vmapped over weights
differently, and the parameters differ from the solo run's by at most 1.2e-7
(the loss agrees to all printed digits). A group of one other size differs
from it by as much (1 seed vs 2: 1.2e-7). Over later iterations these last
bits can flip a search decision, after which the runs diverge like two seeds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.base import clock
from agz_jax.config.schema import Config, ConfigError
from agz_jax.match import arena
from agz_jax.training import run
from agz_jax.training.run import RunState

MAX_BYTES = 2 * 1024**3
"""Default budget of the stacked run states of a group (2 GiB)."""


@dataclasses.dataclass(frozen=True)
class Group:
    """The vmapped phases of S seeds of one config; every array argument and
    result has a leading seed axis ``[S, ...]``."""

    config: Config  # the shared config (its own seed is not used)
    seeds: tuple[int, ...]
    comps: run.Components  # the solo run's phases, for seed-independent parts
    selfplay: Callable
    ingest: Callable
    train: Callable
    gate: Callable
    evaluate: Callable
    select: Callable  # (mask bool[S], a, b) -> a where mask else b, per seed


def solo(comps: run.Components, seed: int) -> run.Components:
    """The solo run's components of ``seed``; with nets of their own, so that no
    trace (``init_state`` under ``eval_shape``, or another seed's) shares their
    cached initialiser."""
    config = comps.config.replace(seed=seed)
    nets = run.make_networks(config.net, board_size=config.game.size, features=config.features)
    return dataclasses.replace(comps, config=config, nets=nets)


def state_bytes(comps: run.Components) -> int:
    """Bytes of one seed's run state (replay buffer, nets, optimizer state)."""
    like = dataclasses.replace(solo(comps, comps.config.seed), sharder=None)
    shapes = jax.eval_shape(lambda: run.init_state(like))
    return sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(shapes))


def check(comps: run.Components, seeds: Sequence[int], max_bytes: int = MAX_BYTES) -> None:
    """ConfigError, naming the field, if ``comps``' config cannot be vmapped over
    ``seeds`` (see the module docstring)."""
    if not seeds:
        raise ConfigError("seeds: a group needs at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds must be distinct, got {list(seeds)}")
    if comps.config.gating.chunk:
        raise ConfigError("gating.chunk plays its match in host-driven chunks, which cannot "
                          "be vmapped over seeds: set gating.chunk=0 for a vmapped group")
    if comps.config.selfplay.continuous:
        raise ConfigError("selfplay.continuous is not vmapped over seeds yet: set "
                          "selfplay.continuous=false for a vmapped group, or run the seeds "
                          "one after another")
    if jax.process_count() > 1:
        raise ConfigError(f"vmapped seeds run in one process, not {jax.process_count()}: "
                          "run the seeds one after another")
    devices = comps.sharder.num_devices if comps.sharder else 1
    if devices != 1:
        raise ConfigError(f"parallel.devices must be 1 to vmap seeds (the seed axis is not "
                          f"sharded), got a mesh of {devices} devices")
    need = len(seeds) * state_bytes(comps)
    if need > max_bytes:
        raise ConfigError(
            f"replay.capacity {comps.config.replay.capacity} is too large to vmap "
            f"{len(seeds)} seeds: their run states need {need / 1024**3:.2f} GiB, over the "
            f"budget of {max_bytes / 1024**3:.2f} GiB; run the seeds one after another "
            "(or in smaller groups)")


def build(config: Config, seeds: Sequence[int], max_bytes: int = MAX_BYTES) -> Group:
    """The jitted, vmapped phases (compiled lazily, once for the group). Raises
    ConfigError before compiling if the config does not allow vmapping."""
    comps = run.build(config)
    check(comps, seeds, max_bytes)

    def where(mask, a, b):
        return jax.tree.map(lambda x, y: jnp.where(
            mask.reshape(mask.shape + (1,) * (x.ndim - 1)), x, y), a, b)

    lift = lambda f: jax.jit(jax.vmap(f))  # noqa: E731
    return Group(config, tuple(seeds), comps, lift(comps.selfplay), lift(comps.ingest),
                 lift(comps.train), lift(comps.gate), lift(comps.evaluate), jax.jit(where))


def stack(states: Sequence[RunState]) -> RunState:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def unstack(tree, i: int):
    """Seed ``i``'s (by position in the group) part of a stacked tree: of a stacked
    run state, the run state a solo run holds."""
    return jax.tree.map(lambda x: x[i], tree)


def init_state(group: Group) -> RunState:
    """The stacked ``[S, ...]`` initial states, each exactly ``run.init_state`` of
    its seed's config."""
    return stack([run.init_state(solo(group.comps, s)) for s in group.seeds])


def _split(keys: jax.Array, n: int) -> jax.Array:
    """``jax.random.split(key, n)`` of every seed's key: uint32[S, n, 2]."""
    return jax.vmap(lambda k: jax.random.split(k, n))(keys)


def run_iteration(group: Group, state: RunState) -> tuple[RunState, list[dict]]:
    """One iteration of every seed; the new stacked state and each seed's metrics
    (``run.run_iteration``'s, per seed; see the module docstring)."""
    config = group.config
    n = len(group.seeds)
    keys = _split(state.key, 5)
    key, k_play, k_train, k_gate, k_eval = (keys[:, j] for j in range(5))
    metrics: list[dict[str, float]] = [{} for _ in range(n)]
    it = int(np.asarray(state.iteration)[0]) + 1

    t0 = clock.running()
    traj, final, stats = group.selfplay(state.best, k_play)
    stats = jax.device_get(stats)
    t_play = clock.running() - t0
    for i, m in enumerate(metrics):
        m.update(run.selfplay_metrics(unstack(stats, i), t_play, search=config.search))

    buffer = group.ingest(state.replay, traj, final)
    t0 = clock.running()
    sizes = np.asarray(buffer.size)  # [S, rings]
    trained = np.all(sizes >= config.train.min_replay, axis=1)
    train_state = state.train
    if trained.any():
        train_keys = _split(k_train, config.train.steps_per_iteration)
        for j in range(config.train.steps_per_iteration):
            train_state, step_metrics = group.train(train_state, buffer, train_keys[:, j])
            if j == 0:
                first = jax.device_get(step_metrics)
        last = jax.device_get(step_metrics)
        train_state = group.select(jnp.asarray(trained), train_state, state.train)
        for i in np.flatnonzero(trained):
            metrics[i].update(run.train_metrics(unstack(first, i), unstack(last, i)))
    t_train = clock.running() - t0
    for i, m in enumerate(metrics):
        m["time/train_s"] = t_train
        m["train/trained"] = float(trained[i])
        m["replay/size"] = float(np.min(sizes[i]))

    best = state.best
    if not config.gating.enabled:
        best = train_state.variables
    elif trained.any() and it % config.gating.every == 0:
        t0 = clock.running()
        result = jax.device_get(group.gate(train_state.variables, state.best, k_gate))
        t_gate = clock.running() - t0
        accepted = np.zeros(n, bool)
        for i in np.flatnonzero(trained):
            score = arena.score(unstack(result, i))
            accepted[i] = score.score >= config.gating.threshold
            metrics[i]["time/gating_s"] = t_gate
            metrics[i]["gating/score"] = score.score
            metrics[i]["gating/accepted"] = float(accepted[i])
        best = group.select(jnp.asarray(accepted), train_state.variables, state.best)

    last_iteration = it == config.iterations
    if config.eval.every and (it % config.eval.every == 0 or last_iteration):
        for m, e in zip(metrics, evaluate(group, best, k_eval), strict=True):
            m.update(e)

    iteration = jnp.full(n, it, jnp.int32)
    return RunState(iteration, key, train_state, best, buffer), metrics


def evaluate(group: Group, variables, keys: jax.Array) -> list[dict]:
    """Each seed's ``run.evaluate`` metrics against a uniformly random player
    (``time/eval_s`` is the group's)."""
    t0 = clock.running()
    results = jax.device_get(group.evaluate(variables, keys))
    elapsed = clock.running() - t0
    out = []
    for i in range(len(group.seeds)):
        # run.evaluate's metrics of this seed's results (already played, so its
        # components' phase only hands them over), with the group's time.
        played = unstack(results, i)
        comps = dataclasses.replace(group.comps, evaluate=lambda *_, r=played: r)
        out.append({**run.evaluate(comps, None, None), "time/eval_s": elapsed})
    return out


def initial_evaluation(group: Group, state: RunState) -> list[dict]:
    """Iteration 0 of every seed (``run.initial_evaluation``)."""
    return evaluate(group, state.best, jax.vmap(lambda k: jax.random.fold_in(k, 0))(state.key))
