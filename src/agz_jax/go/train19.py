"""Move prediction trained on a store of human games (``go.games``), planes made
on the device (``go.sampling``).

``go.movepred.train`` gathers precomputed planes from a ``go.dataset``; here
each jitted training step draws its own mini-batch with
``sampling.sample_batch`` from the training store (moves only, about 2 bytes a
move): the games are replayed, the Table 1 planes computed and a random
symmetry applied inside the step, so a store of 600,000 19x19 games fits in
memory where its planes would not. Held-out accuracy is measured on a fixed
sample of positions of another split (``eval_set``: drawn once, one position
a game drawn, no symmetry), ranked among the legal points as in
``go.movepred.evaluate``, with a 95% interval (Wilson).

The ladder plane: ``Config.ladder`` is ``go.planes.planes``' ladder mode; the
default ``"none"`` leaves the plane (channel 26) zero in training and
evaluation alike. Reading ladders in every batch costs about 1 s a batch on a
CPU and ``sampling.ladder_table`` (211 positions/s) would take a week for the
TYGEM store's 128 million positions: not affordable here. No rank planes (a
constant plane: ``ranks=0``).

Checkpoints are ``go.movepred``'s (``OUT/checkpoint.msgpack`` with the step,
parameters and optimiser state, ``OUT/history.json``), written at every
evaluation; the batch of step ``i`` is drawn with ``fold_in(key, i)``, so a
resumed run draws what an uninterrupted one would.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from agz_jax.go import games as games_lib
from agz_jax.go import movepred, replay, sampling
from agz_jax.go import net as net_lib
from agz_jax.go.features import channel, num_channels
from agz_jax.go.planes import LADDER_MODES

SIZE = 19
LEGAL = channel("legal", 0)

PAPER_TOP1 = {(3, 16): 37.5, (3, 128): 48.0, (6, 128): 51.2, (10, 128): 54.5, (12, 128): 55.2}
"""Maddison et al., Table 3 (19x19 KGS): (layers, filters) -> held-out top-1 %."""


def params_count(config: net_lib.NetConfig) -> int:
    """The net's parameters."""
    return net_lib.GoNet(config).num_params(net_lib.init(config))


@dataclass(frozen=True)
class Config:
    """One training run on a games store (hashable: it closes over jitted steps)."""

    steps: int = 1000
    batch_size: int = 64
    per_game: int = 16
    """Positions drawn from each replayed game of a batch (``sampling.draw``:
    every position stays equally likely; fewer games replayed a batch)."""
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    eval_every: int = 250
    """Held-out accuracy and a checkpoint every this many steps (and at the end)."""
    eval_positions: int = 2000
    eval_seed: int = 0
    """The held-out sample (fixed for the run, whatever ``seed``)."""
    seed: int = 0
    ladder: str = "none"
    """``go.planes.planes``' ladder mode: "none" (the plane zero) or a reading mode."""

    def __post_init__(self):
        for name in ("steps", "batch_size", "per_game", "eval_every", "eval_positions"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.batch_size % self.per_game:
            raise ValueError(f"batch_size {self.batch_size} is not a multiple of per_game "
                             f"{self.per_game}")
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError(f"optimizer must be 'sgd' or 'adam', got {self.optimizer!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if self.ladder not in LADDER_MODES:
            raise ValueError(f"ladder must be one of {LADDER_MODES}, got {self.ladder!r}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def net_config(layers: int = 12, filters: int = 128, **kw) -> net_lib.NetConfig:
    """The net for 19x19 planes without rank planes (28 channels)."""
    return net_lib.NetConfig(size=SIZE, channels=num_channels(0), layers=layers,
                             filters=filters, **kw)


def load_store(path: str | Path, split: str) -> tuple[replay.Store, int, int]:
    """(device ``Store`` of a split of a games store, its longest game, its games)."""
    g = games_lib.load_games(path, split)
    if len(g) == 0:
        raise games_lib.GamesError(f"{path}: no {split} games")
    return replay.store(g.moves, g.offsets, size=SIZE), replay.longest(g.offsets), len(g)


def make_optimizer(optimizer: str, learning_rate: float) -> optax.GradientTransformation:
    """``Config.optimizer`` ("sgd" or "adam") at ``learning_rate``."""
    return optax.sgd(learning_rate) if optimizer == "sgd" else optax.adam(learning_rate)


@functools.cache
def _step(config: net_lib.NetConfig, *, batch_size: int, per_game: int, optimizer: str,
          learning_rate: float, ladder: str, length: int):
    """The jitted training step (cached on the settings it closes over)."""
    net = net_lib.GoNet(config)
    opt = make_optimizer(optimizer, learning_rate)

    def loss_fn(params, planes, to_play, target):
        logits = net.logits(params, planes, to_play)
        ce = -jnp.take_along_axis(jax.nn.log_softmax(logits), target[:, None], axis=-1)[:, 0]
        return jnp.mean(ce), jnp.mean(jnp.argmax(logits, -1) == target)

    @jax.jit
    def step(params, opt_state, key, s: replay.Store):
        """One step on a mini-batch drawn, replayed and featurised here."""
        b = sampling.sample_batch(key, s, batch_size, length, SIZE, per_game, ranks=0,
                                  symmetries=True, ladder=ladder)
        (loss, acc), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, b.planes, b.to_play, b.target)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, acc

    return step


class EvalSet:
    """A fixed sample of held-out positions (host arrays): planes uint8[n, 19,
    19, C], to_play int32[n], target int32[n], ply int32[n], game int32[n]."""

    def __init__(self, planes, to_play, target, ply, game):
        self.planes, self.to_play, self.target = planes, to_play, target
        self.ply, self.game = ply, game

    def __len__(self) -> int:
        return len(self.target)


def eval_set(s: replay.Store, length: int, n: int, seed: int = 0, ladder: str = "none",
             chunk: int = 128) -> EvalSet:
    """``n`` positions of ``s`` drawn uniformly (one a drawn game, in chunks of
    ``chunk``; a position may recur), no symmetry, planes as in training."""
    chunk = min(chunk, n)
    fn = sampling.sampler(length, SIZE, batch_size=chunk, per_game=1, ranks=0,
                          symmetries=False, dtype=jnp.uint8, ladder=ladder)
    key = jax.random.PRNGKey(seed)
    parts = []
    for i in range(-(-n // chunk)):
        b = jax.device_get(fn(jax.random.fold_in(key, i), s))
        parts.append((b.planes, b.to_play, b.target, b.ply, b.game))
    cols = [np.concatenate(c)[:n] for c in zip(*parts, strict=True)]
    return EvalSet(*cols)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson interval of a proportion k / n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def evaluate(config: net_lib.NetConfig, params, ev: EvalSet, batch: int = 256) -> dict:
    """top-1/5/10 among the legal points, the cross-entropy, and top-1's 95% interval."""
    return summary(*ranks(config, params, ev, batch))


def summary(rank: np.ndarray, ce: np.ndarray) -> dict:
    """``evaluate``'s metrics of the positions' ranks and cross-entropies (``ranks``)."""
    n = len(rank)
    hits = int(np.sum(rank < 1))
    lo, hi = wilson(hits, n)
    return {"top1": hits / n, "top1_lo": lo, "top1_hi": hi,
            "top5": float(np.mean(rank < 5)), "top10": float(np.mean(rank < 10)),
            "policy_ce": float(np.mean(ce)), "positions": n}


def ranks(config: net_lib.NetConfig, params, ev: EvalSet,
          batch: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(rank int[n], cross-entropy float[n]) of each held-out position's move:
    its place among the legal points in the net's order (0: the net's first
    choice) and -log p of it."""
    n = len(ev)
    if n == 0:
        raise ValueError("evaluate needs at least one position")
    fn = movepred._rank_fn(config)
    batch = min(batch, n)
    found, ces = [], []
    for start in range(0, n, batch):
        idx = np.minimum(np.arange(start, start + batch), n - 1)  # padded: one compilation
        planes = ev.planes[idx]
        legal = planes[..., LEGAL].reshape(len(idx), -1) > 0
        r, ce = fn(params, planes.astype(np.float32), ev.to_play[idx], ev.target[idx], legal)
        keep = min(batch, n - start)
        found.append(np.asarray(r)[:keep])
        ces.append(np.asarray(ce)[:keep])
    return np.concatenate(found), np.concatenate(ces)


def train(config: net_lib.NetConfig, cfg: Config, s: replay.Store, length: int,
          ev: EvalSet | None = None, out: Path | None = None,
          log: Callable[[dict], None] | None = None, resume: bool = False,
          seconds: float | None = None):
    """Train ``config`` for ``cfg.steps`` steps on batches drawn from ``s`` (games
    of at most ``length`` plies); every ``cfg.eval_every`` steps and at the end,
    the accuracy on ``ev`` and (with ``out``) a checkpoint, which ``resume``
    continues from. ``seconds``: stop sooner, once this call has trained that
    long (compiling included, evaluations not), with an evaluation and a
    checkpoint at the step it stops (a time-boxed GPU window). Returns
    (params, history). The assembler of a whole run config: the step and the
    optimiser take only the fields they use."""
    params = net_lib.init(config, cfg.seed)
    opt_state = make_optimizer(cfg.optimizer, cfg.learning_rate).init(params)
    done, history = 0, []
    ckpt = out / "checkpoint.msgpack" if out is not None else None
    if resume and ckpt is not None and ckpt.exists():
        done, params, opt_state, history = movepred.load_checkpoint(ckpt, params, opt_state)
    step = _step(config, batch_size=cfg.batch_size, per_game=cfg.per_game,
                 optimizer=cfg.optimizer, learning_rate=cfg.learning_rate, ladder=cfg.ladder,
                 length=length)
    key = jax.random.PRNGKey(cfg.seed)
    spent = history[-1]["train_s"] if history else 0.0
    cpu_spent = history[-1]["cpu_s"] if history else 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    spent_before = spent  # the run's training seconds before this call
    losses, accs, since = [], [], done
    stop = False
    while done < cfg.steps and not stop:
        params, opt_state, loss, acc = step(params, opt_state, jax.random.fold_in(key, done), s)
        losses.append(loss)
        accs.append(acc)
        done += 1
        if seconds is not None and done % 8 == 0:
            loss.block_until_ready()  # the device may run behind the host's loop
            stop = spent - spent_before + time.perf_counter() - t0 >= seconds
        if done % cfg.eval_every == 0 or done == cfg.steps or stop:
            t_train = time.perf_counter() - t0
            record = {"step": done, "positions": done * cfg.batch_size,
                      "train_s": spent + t_train,
                      "cpu_s": cpu_spent + time.process_time() - c0,
                      "steps_per_s": (done - since) / max(t_train, 1e-9),
                      "train/loss": float(np.mean(jax.device_get(losses))),
                      "train/top1": float(np.mean(jax.device_get(accs)))}
            if not math.isfinite(record["train/loss"]):
                raise FloatingPointError(f"the training loss is {record['train/loss']} at step "
                                         f"{done}: lower the learning rate")
            if ev is not None:
                e0 = time.perf_counter()
                m = evaluate(config, params, ev)
                record.update({f"heldout/{k}": v for k, v in m.items()})
                record["eval_s"] = time.perf_counter() - e0
            history.append(record)
            if log:
                log(record)
            if ckpt is not None:
                movepred._save_checkpoint(ckpt, done, params, opt_state, history)
            losses, accs, since = [], [], done
            spent, cpu_spent = record["train_s"], record["cpu_s"]
            t0, c0 = time.perf_counter(), time.process_time()
    return jax.device_get(params), history


__all__ = ["PAPER_TOP1", "Config", "EvalSet", "eval_set", "evaluate", "load_store", "net_config",
           "params_count", "ranks", "summary", "train", "wilson"]
