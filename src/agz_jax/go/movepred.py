"""Supervised move prediction in Go (Maddison et al., ICLR 2015, Sections 3-5).

The net (``go.net``) learns the moves of recorded games from their Table 1
planes (``go.dataset``), and is judged as in the paper: top-n accuracy on
held-out *games* (``agz_jax.training.supervised.split_by_game``: whole games on one
side), the probability that the record's move is among the net's n best
(Figure 1, drawn by ``agz_jax.studies.movepred_report.plot``) and a table by depth (Table 3).

Training: cross-entropy of the softmax over the points at the move played;
each example is seen under one of the 8 symmetries of the board drawn at
random, every time it is drawn (Section 3); mini-batches are drawn uniformly
with replacement. The paper's optimiser is plain SGD (learning rate 0.128 on
the batch-mean loss, batch 128, no momentum); ``TrainConfig.optimizer = "adam"``
is offered for short CPU runs. Ranking (accuracy) is among the legal points of
the position (the legality plane); ties go to the lower point.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax

from agz_jax.base.checks import Section, integer, number, one_of, setting
from agz_jax.game import symmetry
from agz_jax.go import net as net_lib
from agz_jax.go.dataset import Data
from agz_jax.training import supervised

TOP_N = 10  # Figure 1's n = 1..10


@dataclass(frozen=True)
class TrainConfig(Section):
    """One training run of one net."""

    section = "train"
    steps: int = setting(1000, integer(1))
    """Mini-batches of ``batch_size`` positions."""
    batch_size: int = setting(128, integer(1))
    optimizer: str = setting("sgd", one_of(("sgd", "adam")))
    """'sgd' (the paper: no momentum) or 'adam'."""
    learning_rate: float = setting(0.128, number(0, lo_open=True))
    held_out: float = setting(0.1, number(0, 1, lo_open=True, hi_open=True))
    """Fraction of the *games* held out."""
    log_every: int = setting(0, integer(0))
    """Held-out accuracy (and a checkpoint) every this many steps (0: at the end)."""
    eval_positions: int = setting(0, integer(0))
    """Held-out positions scored at the intermediate logs (0: all); the final
    evaluation always uses all of them."""
    seed: int = setting(0, integer(0))
    """Initial parameters, mini-batches and symmetries; the split uses ``split_seed``."""
    split_seed: int = setting(0, integer(0))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def split(data: Data, held_out: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train_mask, held_out_mask) over positions, whole games on one side."""
    return supervised.split_by_game(data.game, held_out, jax.random.PRNGKey(seed))


def make_optimizer(tc: TrainConfig) -> optax.GradientTransformation:
    if tc.optimizer == "sgd":
        return optax.sgd(tc.learning_rate)
    return optax.adam(tc.learning_rate)


@functools.cache
def _step_fn(config: net_lib.NetConfig, tc: TrainConfig):
    net = net_lib.GoNet(config)
    opt = make_optimizer(tc)
    a = config.size * config.size

    def loss_fn(params, planes, to_play, action):
        logits = net.logits(params, planes, to_play)
        log_p = jax.nn.log_softmax(logits)
        ce = -jnp.take_along_axis(log_p, action[:, None], axis=-1)[:, 0]
        return jnp.mean(ce), jnp.mean(jnp.argmax(logits, -1) == action)

    @jax.jit
    def step(params, opt_state, key, planes, to_play, action):
        """One SGD step on a uniform mini-batch of the (device) training arrays,
        each example under a random symmetry."""
        k_idx, k_sym = jax.random.split(key)
        idx = jax.random.randint(k_idx, (tc.batch_size,), 0, action.shape[0])
        g = symmetry.random_symmetry(k_sym, (tc.batch_size,))
        x = jax.vmap(symmetry.transform_planes)(planes[idx], g)
        onehot = jax.nn.one_hot(action[idx], a)
        y = jnp.argmax(jax.vmap(lambda p, g: symmetry.transform_policy(p, g, config.size))(
            onehot, g), axis=-1)
        (loss, acc), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, x, to_play[idx], y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, acc

    return step


@functools.cache
def _rank_fn(config: net_lib.NetConfig):
    net = net_lib.GoNet(config)

    @jax.jit
    def ranks(params, planes, to_play, action, legal):
        logits = net.logits(params, planes, to_play)
        log_p = jax.nn.log_softmax(logits)
        ce = -jnp.take_along_axis(log_p, action[:, None], axis=-1)[:, 0]
        return supervised.target_rank(logits, action, legal), ce

    return ranks


def evaluate(config: net_lib.NetConfig, params, data: Data, move_bin: int = 10,
             batch: int = 512) -> dict:
    """Held-out metrics: top-1/5/10 and the top-n curve for n = 1..10 (Figure
    1), the cross-entropy, and top-1 accuracy by move number (bins of
    ``move_bin`` plies), in ``agz_jax.studies.movepred_report.plot``'s format."""
    n = len(data.action)
    if n == 0:
        raise ValueError("evaluate needs at least one position")
    fn = _rank_fn(config)
    legal = data.legal
    ranks, ces = [], []
    for start in range(0, n, batch):
        idx = np.minimum(np.arange(start, start + batch), n - 1)  # padded: one compilation
        r, ce = fn(params, data.planes[idx], data.to_play[idx].astype(np.int32),
                   data.action[idx], legal[idx])
        keep = min(batch, n - start)
        ranks.append(np.asarray(r)[:keep])
        ces.append(np.asarray(ce)[:keep])
    rank = np.concatenate(ranks)
    topn = [float(np.mean(rank < k)) for k in range(1, TOP_N + 1)]
    by_move = supervised.per_move_number_accuracy(rank < 1, data.ply, move_bin)
    return {"top1": topn[0], "top5": topn[4], "top10": topn[9], "topn": topn,
            "policy_ce": float(np.mean(np.concatenate(ces))), "positions": n,
            "games": int(len(np.unique(data.game))),
            "by_move": {k: np.asarray(v).tolist() for k, v in by_move.items()}}


def _save_checkpoint(path: Path, step: int, params, opt_state, history: list) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(flax.serialization.to_bytes(
        {"step": step, "params": jax.device_get(params), "opt_state": jax.device_get(opt_state)}))
    tmp.replace(path)
    hist = path.with_name("history.json")
    hist.write_text(json.dumps(history))


def load_checkpoint(path: Path, params, opt_state) -> tuple[int, object, object, list]:
    """(step, params, opt_state, history) of ``_save_checkpoint``'s ``path``;
    ``params`` and ``opt_state`` give the structure."""
    saved = flax.serialization.from_bytes(
        {"step": 0, "params": params, "opt_state": opt_state}, path.read_bytes())
    history = json.loads(path.with_name("history.json").read_text())
    return int(saved["step"]), saved["params"], saved["opt_state"], history


def train(config: net_lib.NetConfig, tc: TrainConfig, data: Data, train_mask: np.ndarray,
          out: Path | None = None, log: Callable[[dict], None] | None = None,
          resume: bool = False):
    """Train one net on ``data[train_mask]``; the rest is held out.

    Every ``tc.log_every`` steps (and at the end) the held-out accuracy is
    measured and, with ``out``, a checkpoint written (``out/checkpoint.msgpack``);
    ``resume`` continues from it. Returns (params, history).
    """
    train_mask = np.asarray(train_mask, bool)
    held = data.select(~train_mask)
    tr = data.select(train_mask)
    if len(tr.action) == 0:
        raise ValueError("no training positions")
    planes = jnp.asarray(tr.planes)
    to_play = jnp.asarray(tr.to_play.astype(np.int32))
    action = jnp.asarray(tr.action)
    params = net_lib.init(config, tc.seed)
    opt_state = make_optimizer(tc).init(params)
    done, history = 0, []
    ckpt = out / "checkpoint.msgpack" if out is not None else None
    if resume and ckpt is not None and ckpt.exists():
        saved = flax.serialization.from_bytes(
            {"step": 0, "params": params, "opt_state": opt_state}, ckpt.read_bytes())
        done, params, opt_state = int(saved["step"]), saved["params"], saved["opt_state"]
        history = json.loads((out / "history.json").read_text())
    step = _step_fn(config, tc)
    key = jax.random.PRNGKey(tc.seed)
    every = tc.log_every or tc.steps
    t0 = time.perf_counter()
    losses, accs = [], []
    spent = history[-1]["train_s"] if history else 0.0
    sub = held
    if tc.eval_positions and len(held.action) > tc.eval_positions:
        pick = np.random.default_rng(tc.seed).choice(len(held.action), tc.eval_positions,
                                                     replace=False)
        sub = held.select(np.sort(pick))
    while done < tc.steps:
        params, opt_state, loss, acc = step(params, opt_state, jax.random.fold_in(key, done),
                                            planes, to_play, action)
        losses.append(loss)
        accs.append(acc)
        done += 1
        if done % every == 0 or done == tc.steps:
            record = {"step": done, "train_s": spent + time.perf_counter() - t0,
                      "train/loss": float(np.mean(jax.device_get(losses))),
                      "train/top1": float(np.mean(jax.device_get(accs)))}
            losses, accs = [], []
            if len(held.action):
                m = evaluate(config, params, sub)
                record.update({"heldout/top1": m["top1"], "heldout/top5": m["top5"],
                               "heldout/top10": m["top10"], "heldout/policy_ce": m["policy_ce"]})
            if not math.isfinite(record["train/loss"]):
                raise FloatingPointError(f"the training loss is {record['train/loss']} at step "
                                         f"{done}: lower train.learning_rate")
            history.append(record)
            if log:
                log(record)
            if ckpt is not None:
                _save_checkpoint(ckpt, done, params, opt_state, history)
    return jax.device_get(params), history
