"""Distillation: a net of other sizes trained to a teacher's outputs.

A larger net that starts from random weights throws away what self-play
taught the nets before it, and on the CPU it would take the campaign months
to teach it again. ``distil`` starts it from them instead: the student (with
Double Networks a black and a white net, each taught by the teacher's net of
its colour) is trained to reproduce the teacher on positions of the
teacher's own games:

1. games (``training.teacher_games``): the teacher plays itself from its
   config's openings (``openings``: the balanced set, moved by up to
   ``openings.shift`` points, a fraction from the empty board;
   ``Settings.openings`` names another set), by its raw policy, each move
   drawn from its move probabilities at ``temperature``, or, with
   ``simulations`` > 0, by the main job's lockstep self-play
   (``selfplay.make_selfplay``, the teacher's search at that many
   simulations a move);
2. targets: the teacher's move probabilities (its policy's softmax over the
   empty points) and its value, each from the teacher's net of the colour to
   move, computed as the student trains, on the position the student sees:
   every position of a batch under a random one of the 8 symmetries, so the
   student learns what the teacher says of each of the 8 and not a symmetric
   average of it. With ``policy_target="search"`` the policy target is the
   policy of the search that chose the move (what self-play trains on),
   stored with the position and mapped by its symmetry;
3. training: Adam (a cosine decay of ``learning_rate`` to a tenth over the
   planned steps) on the main job's loss with the teacher's outputs for
   labels, (v_teacher - v)^2 - pi_teacher^T log p + c ||theta||^2 (kernels
   only), in epochs: every training position of a colour once, in a new
   order;
4. before training and after every epoch, on the positions of
   ``held_out_games`` other games (played with another key): how often the
   student's top move is the teacher's (both over the empty points), the
   mean squared difference of their values and the KL divergence of the
   student's policy from the teacher's. After every epoch the student is
   written as a model directory (``models.save``: ``config.json``, the
   teacher's config with the student's sizes, and ``variables.msgpack``), so
   a distillation stopped at any point after its first epoch leaves its last
   epoch's nets, loadable by ``models.load`` and by the main job's
   ``--init-from`` (the untrained student is never written).

``seconds`` bounds the whole distillation (games included): training stops
at the first step past it, and the held-out measure and the nets follow.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from agz_jax.config import files
from agz_jax.config.schema import Config, ConfigError
from agz_jax.game import symmetry
from agz_jax.nets import models
from agz_jax.nets.networks import Networks, make_networks, stack, unstack
from agz_jax.training.teacher_games import (
    Games,
    game_stats,
    make_policy_games,
    make_search_games,
    play_games,
)
from agz_jax.training.train import TrainState, l2_penalty, loss_terms

POLICY_TARGETS = ("net", "search")
METRICS_FILE = "metrics.jsonl"
RECORD_FILE = "distill.json"
TARGET_CHUNK = 1024  # held-out positions per jitted call of the measure


@dataclasses.dataclass(frozen=True)
class Settings:
    """How a student is distilled (the command's flags, ``experiments.training.distill``)."""

    games: int = 1024
    """Teacher games whose positions the student trains on."""
    held_out_games: int = 128
    """Further games, played with another key, whose positions measure the student."""
    games_per_batch: int = 256
    """Games played at once (one jitted scan); the last batch's extra games are dropped."""
    simulations: int = 0
    """0: the teacher's raw policy plays; n: its search with n simulations a move."""
    temperature: float = 1.0
    """The raw policy's moves are drawn from softmax(logits / temperature)."""
    policy_target: str = "net"
    """'net': the teacher's move probabilities; 'search': its search's policy."""
    epochs: int = 4
    """Passes over the training positions."""
    batch_size: int = 256
    """Positions per SGD step, per net."""
    learning_rate: float = 2e-3
    """Adam's learning rate, decayed by a cosine to a tenth over the planned steps."""
    l2: float = 1e-4
    """c of c ||theta||^2 (kernels), as the main job's ``train.l2``."""
    seconds: float = 0.0
    """0: no limit; else training stops once the distillation has run this long."""
    seed: int = 0
    """Every random number (games, initial weights, order, symmetries) comes from it."""
    openings: str | None = None
    """None: the teacher's ``openings.path``; '' the empty board; else a set's name or path."""

    def check(self) -> None:
        """ConfigError (one line, naming the flag) for a value out of range."""
        for name in ("games", "held_out_games", "games_per_batch", "epochs", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be a positive integer, "
                                  f"got {value!r}")
        if self.simulations < 0 or self.seed < 0:
            name = "simulations" if self.simulations < 0 else "seed"
            raise ConfigError(f"--{name} must be an integer >= 0, got {getattr(self, name)}")
        for name in ("temperature", "learning_rate"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be a number > 0, "
                                  f"got {getattr(self, name)}")
        if self.l2 < 0 or self.seconds < 0:
            name = "l2" if self.l2 < 0 else "seconds"
            raise ConfigError(f"--{name} must be a number >= 0, got {getattr(self, name)}")
        if self.policy_target not in POLICY_TARGETS:
            raise ConfigError(f"--policy-target must be one of {', '.join(POLICY_TARGETS)}, "
                              f"got {self.policy_target!r}")
        if self.policy_target == "search" and not self.simulations:
            raise ConfigError("--policy-target search needs --simulations N > 0 (the raw "
                              "policy's games have no search policy)")


class Positions(NamedTuple):
    """The positions of one split, one ring per net of the student (by colour to
    move with Double Networks): obs int8[N, M, H, W, P], policy float32[N, M, A]
    (the search's, or None: the teacher's net gives it), size int32[N] (ring n
    holds its first size[n] rows; M is the largest)."""

    obs: Any
    policy: Any
    size: Any


def student_config(teacher: Config, sizes: dict[str, int]) -> Config:
    """The teacher's config with the student's net sizes (dotted fields, as
    ``presets.net_preset`` gives them): its board, features, other net
    options and play-time settings stay the teacher's."""
    return teacher.replace(**sizes)


def check_teacher(config: Config) -> None:
    """ConfigError unless ``distil`` can teach from nets of ``config``."""
    if config.net.colour_heads:
        raise ConfigError("--teacher has net.colour_heads (one net, a head per colour): "
                          "distillation teaches Double Networks or a single net")


def parameters(config: Config) -> int:
    """Trainable parameters of one net of ``config`` (shapes only, nothing compiled)."""
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    shapes = jax.eval_shape(nets.init, jax.random.PRNGKey(0))
    return sum(math.prod(x.shape[1:]) for x in jax.tree.leaves(shapes["params"]))


# ---------------------------------------------------------------------------- targets


def legal_points(obs: jax.Array) -> jax.Array:
    """bool[B, A]: the empty points of observations float32[B, H, W, P] (planes 0
    and 1 are the stones of the two sides, ``agz_jax.nets.features``)."""
    return (obs[..., 0] + obs[..., 1] == 0).reshape(obs.shape[0], -1)


def teacher_outputs(nets: Networks, variables, obs: jax.Array):
    """(move probabilities float32[B, A], value float32[B]) of one teacher net
    (unstacked ``variables``) on ``obs`` float32[B, H, W, P]: its policy's softmax
    over the empty points, and its value."""
    logits, value = nets.apply_one(variables, obs)
    return jax.nn.softmax(jnp.where(legal_points(obs), logits, -jnp.inf), axis=-1), value


def split_rings(games: Games, policy_target: str, num_rings: int) -> Positions:
    """The positions of ``games`` in the rings of the student's nets (by colour to
    move when there are two), with the search's policies if they are the target."""
    rings = []
    for n in range(num_rings):
        rows = np.flatnonzero(games.to_play == n) if num_rings == 2 else np.arange(
            len(games.to_play))
        rings.append((games.obs[rows],
                      games.search_policy[rows] if policy_target == "search" else None))
    size = np.array([len(obs) for obs, _ in rings], np.int32)
    m = max(1, int(size.max()))
    policy = None
    if policy_target == "search":
        policy = np.stack([_padded(p.astype(np.float32), m) for _, p in rings])
    return Positions(np.stack([_padded(obs, m) for obs, _ in rings]), policy, size)


def _padded(x: np.ndarray, rows: int) -> np.ndarray:
    """``x`` with zero rows added up to ``rows`` (a fixed shape for jit)."""
    if len(x) == rows:
        return x
    return np.concatenate([x, np.zeros((rows - len(x), *x.shape[1:]), x.dtype)])


# --------------------------------------------------------------------------- training


def make_optimizer(settings: Settings, total_steps: int) -> optax.GradientTransformation:
    """Adam with a cosine decay of the learning rate to a tenth over ``total_steps``."""
    schedule = optax.cosine_decay_schedule(settings.learning_rate, max(1, total_steps),
                                           alpha=0.1)
    return optax.adam(schedule)


def init_student(nets: Networks, optimizer: optax.GradientTransformation,
                 key: jax.Array) -> TrainState:
    """New student nets (``nets.init(key)``) with a new optimizer state."""
    variables = nets.init(key)
    return TrainState(variables, jax.vmap(optimizer.init)(variables["params"]), jnp.int32(0))


def make_step(nets: Networks, teacher: Networks, optimizer: optax.GradientTransformation,
              l2: float):
    """``step(state, teacher_variables, data: Positions, index int32[N, B], key) ->
    (state, metrics [N])``: one SGD step of every student net on its ring's rows
    ``index``, each under a random symmetry, to the outputs of the teacher's net
    of its colour on what it sees."""
    size = nets.module.board_size

    def loss_fn(params, batch_stats, obs, policy, value):
        (logits, v), stats = nets.apply_train({"params": params, "batch_stats": batch_stats},
                                              obs)
        value_loss, policy_loss = loss_terms(logits, v, policy, value)
        loss = value_loss + policy_loss + l2 * l2_penalty(params)
        return loss, (stats, {"loss": loss, "value_loss": value_loss,
                              "policy_loss": policy_loss})

    def one_net(variables, opt_state, obs, policy, value):
        grads, (stats, metrics) = jax.grad(loss_fn, has_aux=True)(
            variables["params"], variables["batch_stats"], obs, policy, value)
        updates, opt_state = optimizer.update(grads, opt_state, variables["params"])
        params = optax.apply_updates(variables["params"], updates)
        return {"params": params, "batch_stats": stats}, opt_state, metrics

    def step(state: TrainState, teacher_variables, data: Positions, index: jax.Array,
             key: jax.Array):
        outs = []
        # One net after the other, as the main job's step (train.make_train_step).
        for n, k in enumerate(jax.random.split(key, index.shape[0])):
            g = symmetry.random_symmetry(k, (index.shape[1],))
            obs = data.obs[n][index[n]].astype(jnp.float32)
            obs = jax.vmap(symmetry.transform_planes)(obs, g)
            policy, value = teacher_outputs(
                teacher, unstack(teacher_variables, n if teacher.num_nets == 2 else 0), obs)
            if data.policy is not None:  # the search's, mapped as the position
                policy = jax.vmap(lambda p, h: symmetry.transform_policy(p, h, size))(
                    data.policy[n][index[n]], g)
            outs.append(one_net(unstack(state.variables, n), unstack(state.opt_state, n), obs,
                                jax.lax.stop_gradient(policy), jax.lax.stop_gradient(value)))
        variables, opt_state, metrics = (stack([o[i] for o in outs]) for i in range(3))
        return TrainState(variables, opt_state, state.step + 1), metrics

    return jax.jit(step)


def epoch_order(size: np.ndarray, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """int32[steps, N, B]: the rows of each ring's steps in one epoch: every row of
    a ring once in a new order, the rings of fewer rows topped up with rows
    drawn again (``steps``: the largest ring's rows over ``batch_size``, rounded
    up)."""
    steps = -(-int(size.max()) // batch_size)
    order = []
    for n in size:
        rows = rng.permutation(int(n))
        extra = rng.integers(0, max(int(n), 1), steps * batch_size - int(n))
        order.append(np.concatenate([rows, extra]).reshape(steps, batch_size))
    return np.stack(order, axis=1).astype(np.int32)


# ---------------------------------------------------------------------------- measure


def make_measure(nets: Networks, teacher: Networks):
    """``measure(variables, teacher_variables, obs, policy, count, n) -> sums``:
    the held-out sums of student net ``n`` against the teacher's net of its
    colour on the first ``count`` rows of a chunk (``policy``: the search's
    targets, or None for the teacher net's): the top-1 agreements, squared value
    differences, cross-entropies and the targets' entropies."""

    def measure(variables, teacher_variables, obs, policy, count, n):
        x = obs.astype(jnp.float32)
        target, value = teacher_outputs(
            teacher, unstack(teacher_variables, n if teacher.num_nets == 2 else 0), x)
        if policy is not None:
            target = policy
        logits, v = nets.apply_one(unstack(variables, n if nets.num_nets == 2 else 0), x)
        mine = jnp.argmax(jnp.where(legal_points(x), logits, -jnp.inf), axis=-1)
        agree = (mine == jnp.argmax(target, axis=-1)).astype(jnp.float32)
        log_p = jax.nn.log_softmax(logits)
        ce = -jnp.sum(jnp.where(target > 0, target * log_p, 0.0), axis=-1)
        entropy = -jnp.sum(jnp.where(target > 0, target * jnp.log(target), 0.0), axis=-1)
        keep = jnp.arange(x.shape[0]) < count
        sums = jnp.stack([agree, jnp.square(v - value), ce, entropy])
        return jnp.sum(jnp.where(keep, sums, 0.0), axis=-1)

    return jax.jit(measure, static_argnums=5)


RINGS = ("black", "white")


def held_out(measure: Callable, variables, teacher_variables, data: Positions) -> dict:
    """``held_out/*``: the student's agreement with the teacher on every held-out
    position, over all of them and (with two rings) per colour to move."""
    totals = []
    for n in range(len(data.size)):
        total = np.zeros(4)
        count = int(data.size[n])
        for lo in range(0, count, TARGET_CHUNK):
            obs = _padded(data.obs[n][lo:lo + TARGET_CHUNK], TARGET_CHUNK)
            policy = None if data.policy is None else _padded(
                data.policy[n][lo:lo + TARGET_CHUNK], TARGET_CHUNK)
            k = min(TARGET_CHUNK, count - lo)
            total += np.asarray(measure(variables, teacher_variables, obs, policy, k, n),
                                np.float64)
        totals.append((total, count))

    def line(total, count, prefix):
        agree, sq, ce, entropy = total / max(count, 1)
        values = {"top1": agree, "value_mse": sq, "policy_kl": ce - entropy, "policy_ce": ce,
                  "target_entropy": entropy, "positions": float(count)}
        return {prefix + k: v for k, v in values.items()}

    out = line(sum(t for t, _ in totals), sum(c for _, c in totals), "held_out/")
    if len(totals) == 2:
        for name, (total, count) in zip(RINGS, totals, strict=True):
            out.update(line(total, count, f"held_out/{name}/"))
    return {k: float(v) for k, v in out.items()}


# ------------------------------------------------------------------------------ distil


def sha256(path: Path) -> str | None:
    """The sha256 of a model directory's variables file (None for a run
    directory, whose nets are in its checkpoints)."""
    file = path / models.VARIABLES_FILE
    return hashlib.sha256(file.read_bytes()).hexdigest() if file.exists() else None


def distil(teacher: models.Model, config: Config, settings: Settings, out: Path,
           say: Callable[[str], None] = print) -> dict:
    """Distil ``teacher`` into a student of ``config`` (``student_config``) in
    ``out``: the model directory, ``metrics.jsonl`` (a line before training and
    one after every epoch) and ``distill.json`` (the settings, the teacher, the
    games, and at the end the epochs' lines and the summary, which is
    returned)."""
    start = time.monotonic()
    elapsed = lambda: time.monotonic() - start
    key = jax.random.PRNGKey(settings.seed)
    k_games, k_held, k_init = (jax.random.fold_in(key, i) for i in range(3))
    rules = teacher.rules
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    search = settings.simulations > 0
    tcfg = teacher.config
    if settings.openings is not None:
        tcfg = tcfg.replace(**{"openings.path": settings.openings})
    if search:
        play = jax.jit(make_search_games(tcfg, rules, teacher.nets, settings.games_per_batch,
                                         settings.simulations))
    else:
        play = jax.jit(make_policy_games(tcfg, rules, teacher.nets, settings.games_per_batch,
                                         settings.temperature,
                                         files.selfplay_opening_set(tcfg.openings,
                                                                    tcfg.game.size)))
    record = {"teacher": {"name": teacher.name, "path": str(teacher.path),
                          "step": teacher.step, "sha256": sha256(teacher.path),
                          "net": dataclasses.asdict(teacher.config.net),
                          "parameters": parameters(teacher.config)},
              "student": {"net": dataclasses.asdict(config.net),
                          "parameters": parameters(config)},
              "settings": dataclasses.asdict(settings),
              "openings": {"path": tcfg.openings.path, "shift": tcfg.openings.shift,
                           "empty_fraction": tcfg.openings.empty_fraction},
              "backend": jax.default_backend(), "devices": jax.device_count()}
    out.mkdir(parents=True, exist_ok=True)
    _write_record(out, record)

    say(f"playing {settings.games} + {settings.held_out_games} held-out teacher games "
        f"({'search ' + str(settings.simulations) if search else 'raw policy'}, "
        f"{settings.games_per_batch} at a time)")
    per_batch = settings.games_per_batch
    train_games = play_games(play, teacher.variables, k_games, settings.games, per_batch, search)
    test_games = play_games(play, teacher.variables, k_held, settings.held_out_games, per_batch,
                            search)
    record["games"] = {"train": game_stats(train_games), "held_out": game_stats(test_games),
                       "seconds": round(elapsed(), 1)}
    train = split_rings(train_games, settings.policy_target, nets.num_rings)
    test = split_rings(test_games, settings.policy_target, nets.num_rings)
    del train_games, test_games
    record["positions"] = {"train": train.size.tolist(), "held_out": test.size.tolist(),
                           "seconds": round(elapsed(), 1)}
    _write_record(out, record)
    if train.size.min() < 1 or test.size.min() < 1:
        raise ConfigError(f"the games gave a net no position to "
                          f"{'train on' if train.size.min() < 1 else 'measure'}: play more "
                          "games (--games, --held-out-games)")
    say(f"positions: {', '.join(map(str, train.size))} to train on, "
        f"{', '.join(map(str, test.size))} held out ({elapsed():.0f} s)")

    steps_per_epoch = -(-int(train.size.max()) // settings.batch_size)
    optimizer = make_optimizer(settings, settings.epochs * steps_per_epoch)
    state = init_student(nets, optimizer, k_init)
    step = make_step(nets, teacher.nets, optimizer, settings.l2)
    measure = make_measure(nets, teacher.nets)
    data = jax.device_put(train)
    teacher_variables = jax.device_put(teacher.variables)
    rng = np.random.default_rng(settings.seed)
    log = out / METRICS_FILE
    log.write_text("")

    def write_line(line: dict) -> None:
        with log.open("a") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")

    line = {"epoch": 0, "step": 0, **held_out(measure, state.variables, teacher_variables, test),
            "time/seconds": elapsed()}
    write_line(line)
    say(_fmt(line))
    cut = False
    for epoch in range(1, settings.epochs + 1):
        order = epoch_order(train.size, settings.batch_size, rng)
        sums, done, previous = None, 0, None
        for i in range(len(order)):
            if settings.seconds and elapsed() >= settings.seconds:
                cut = True
                break
            state, m = step(state, teacher_variables, data, order[i],
                            jax.random.fold_in(k_init, (epoch - 1) * steps_per_epoch + i + 1))
            # At most one step in flight, so that the clock above sees the steps
            # done, not the steps dispatched.
            if previous is not None:
                jax.block_until_ready(previous)
            previous = m
            sums = m if sums is None else jax.tree.map(jnp.add, sums, m)
            done += 1
        line = {"epoch": epoch, "step": int(state.step), "epoch_steps": done}
        if done:
            line.update({f"train/{k}": float(np.mean(v)) / done
                         for k, v in jax.device_get(sums).items()})
            line.update(held_out(measure, state.variables, teacher_variables, test))
            line["time/seconds"] = elapsed()
            write_line(line)
            say(_fmt(line) + (" (stopped by --seconds)" if cut else ""))
            models.save(out, config, state.variables)
        if cut:
            break
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    last = lines[-1]
    record["epochs"] = lines
    record["summary"] = {"steps": int(state.step), "epochs": last["epoch"],
                         "stopped_by_seconds": cut, "seconds": round(elapsed(), 1),
                         "written": int(state.step) > 0,
                         "held_out": {k.split("/", 1)[1]: v for k, v in last.items()
                                      if k.startswith("held_out/")}}
    _write_record(out, record)
    return record["summary"]


def _write_record(out: Path, record: dict) -> None:
    partial = out / f"{RECORD_FILE}.partial"
    partial.write_text(json.dumps(record, indent=2) + "\n")
    partial.replace(out / RECORD_FILE)


def _fmt(line: dict) -> str:
    parts = [f"epoch {line['epoch']:>3}", f"step {line['step']:>6}"]
    if "train/loss" in line:
        parts.append(f"train loss {line['train/loss']:.3f} (v {line['train/value_loss']:.4f} "
                     f"p {line['train/policy_loss']:.3f})")
    parts.append(f"held-out top-1 {line['held_out/top1']:.3f}, value MSE "
                 f"{line['held_out/value_mse']:.4f}, policy KL {line['held_out/policy_kl']:.3f}")
    parts.append(f"{line['time/seconds']:.0f} s")
    return " | ".join(parts)
