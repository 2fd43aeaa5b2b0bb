"""Curriculum stages of one shape, and the runner that chains them with checkpoints.

A *stage* is ``stage(train_state, key) -> (train_state, metrics)``: it takes
the nets (as a ``TrainState`` with a fresh optimizer) and returns them trained,
with a dict of summary metrics. ``make_stage(name, ...)`` builds one from the
config; ``run_curriculum`` runs a list of them in order:

    RUN_DIR/config.json                  the whole config (written once)
    RUN_DIR/curriculum.json              stages done so far and their metrics
    RUN_DIR/stages/<i>-<name>/           each finished stage's nets (a model dir)
    RUN_DIR/config.json + variables.msgpack   the latest finished stage's nets:
                                         RUN_DIR is itself a model directory
    RUN_DIR/selfplay/                    the self-play stage's run (checkpoints
                                         after every iteration)
    RUN_DIR/rounds/<i>-imitate/          the imitate stage's checkpoint after
                                         every round, and its nets after round r
                                         in round-<r>/ (a model dir)
    RUN_DIR/metrics.jsonl                one line per round / iteration

A killed curriculum resumes (``resume=True``) after its last finished stage; a
self-play stage also resumes from its last iteration, an imitate stage from its
last round. Every stage starts with a fresh optimizer from the previous stage's
variables and a key derived from the seed and the stage's position, so a
resumed curriculum computes what an uninterrupted one does.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.base import clock
from agz_jax.config.schema import Config, ConfigError, TrainConfig
from agz_jax.config.sections import STAGES
from agz_jax.curriculum import basic_rules, imitation
from agz_jax.game.mentor import Mentor
from agz_jax.match import arena
from agz_jax.nets import checkpoint, models
from agz_jax.nets.networks import make_networks
from agz_jax.search.searcher import Searcher
from agz_jax.training import replay, run, supervised, train
from agz_jax.training.train import TrainState, fresh_train_state

Stage = Callable[[TrainState, jax.Array], tuple[TrainState, dict]]
Log = Callable[[dict], None]  # receives one metrics record (a round, an iteration)


def stage_train(config: Config) -> TrainConfig:
    """The train settings of the basic and imitation stages: ``config.train`` at
    a constant learning rate (``train.lr_decay_steps`` spans the self-play
    stage's training, so every recipe starts from the same curriculum)."""
    return dataclasses.replace(config.train, lr_decay_steps=0)


def sgd(config: Config, state: TrainState, buffer: replay.Buffer, key: jax.Array,
        steps: int) -> tuple[TrainState, dict]:
    """``train.sgd`` with the nets and train settings of ``config``."""
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    return train.sgd(nets, stage_train(config), state, buffer, key, steps)


def _predict(comps: run.Components):
    @jax.jit
    def predict(variables, obs, to_play):
        return comps.nets.evaluate(variables, obs.astype(jnp.float32), to_play)

    return predict


@functools.cache
def components(config: Config) -> run.Components:
    """``run.build`` once per config, so stages built again (a resumed curriculum,
    tests) reuse the compiled functions."""
    return run.build(config)


_add = jax.jit(replay.add)


@functools.cache
def _predict_fn(config: Config):
    return _predict(components(config))


def basic_stage(config: Config, log: Log | None = None) -> Stage:
    """Stage 1 (paper IV.B): train on generated basic-rule positions."""
    cfg = config.basic
    comps = components(config)
    rules = comps.rules
    add = _add
    predict = _predict_fn(config)

    def stage(state: TrainState, key: jax.Array):
        k_gen, k_train = jax.random.split(key)
        t0 = clock.running()
        # one call (one compilation) for the training and the held-out positions
        everything = basic_rules.generate(rules, k_gen, cfg.num_positions + cfg.held_out,
                                          features=config.features)
        examples = jax.tree.map(lambda x: x[:cfg.num_positions], everything)
        held = jax.device_get(jax.tree.map(lambda x: x[cfg.num_positions:], everything))
        buffer = replay.init_for(comps.nets, rules, cfg.num_positions)
        buffer = add(buffer, examples)
        t_gen = clock.running() - t0
        t0 = clock.running()
        state, train_metrics = sgd(config, state, buffer, k_train, cfg.steps)
        t_train = clock.running() - t0
        metrics = {"basic/positions": float(np.sum(np.asarray(buffer.size))),
                   "time/generate_s": t_gen, "time/train_s": t_train,
                   **{f"train/{k}": v for k, v in train_metrics.items()},
                   **held_out_basic(predict, state.variables, held)}
        if log:
            log({"stage": "basic", **metrics})
        return state, metrics

    return stage


def held_out_basic(predict, variables, held, chunk: int = 512) -> dict:
    """Held-out basic-rule positions: does the argmax hit a labelled point, and the
    value loss against z."""
    valid = np.asarray(held.valid)
    obs, to_play = np.asarray(held.obs)[valid], np.asarray(held.to_play)[valid]
    policy, z = np.asarray(held.policy)[valid], np.asarray(held.z)[valid]
    hits, sq = [], []
    n = len(z)
    for s in range(0, n, chunk):
        idx = np.arange(s, s + chunk) % n  # fixed shapes: wrap around, then trim
        logits, value = jax.device_get(predict(variables, obs[idx], to_play[idx]))
        legal = (obs[idx, ..., 0] == 0) & (obs[idx, ..., 1] == 0)
        logits = np.where(legal.reshape(len(idx), -1), logits, -np.inf)
        best = np.argmax(logits, axis=-1)
        keep = slice(0, min(chunk, n - s))
        hits.append((policy[idx][np.arange(len(idx)), best] > 0)[keep])
        sq.append(((value - z[idx]) ** 2)[keep])
    return {"heldout/top1": float(np.mean(np.concatenate(hits))),
            "heldout/value_loss": float(np.mean(np.concatenate(sq))),
            "heldout/positions": float(n)}


@functools.cache
def _imitate_fns(config: Config):
    """(mentor games, student-vs-mentor match), jitted once per config."""
    cfg = config.imitate
    comps = components(config)
    rules, nets = comps.rules, comps.nets
    gamma = config.decay.gamma
    mentor = Mentor(rules, cfg.level)
    searcher = Searcher.of(rules, nets, search=config.search, decay=config.decay)

    def players(variables):  # (student, mentor); the mentor's games ignore the student
        return (arena.mcts_player(searcher, variables,
                                  num_simulations=cfg.eval_simulations), mentor.act)

    mentors = lambda variables: (mentor.act, mentor.act)
    to_examples = jax.jit(lambda result: imitation.games_to_examples(
        rules, result, cfg.opening_plies, gamma, config.features))

    if cfg.chunk:
        def games(key):
            return to_examples(arena.play_match_compact(
                rules, mentors, None, key, cfg.num_games, cfg.opening_plies, cfg.chunk))

        def match(variables, key):
            return arena.play_match_compact(rules, players, variables, key, cfg.eval_games, 2,
                                            cfg.chunk)
    else:
        @jax.jit
        def games(key):
            return imitation.play_mentor_games(rules, cfg.level, key, cfg.num_games,
                                               cfg.opening_plies, gamma, config.features)

        @jax.jit
        def match(variables, key):
            return arena.play_match(rules, *players(variables), key, cfg.eval_games, 2)

    return games, match


def imitate_stage(config: Config, log: Log | None = None, rounds_dir: Path | None = None,
                  say: Callable[[str], None] = print) -> Stage:
    """Stage 2 (paper IV.C): imitate the mentor until the student beats it by the
    configured margin (``imitate.target_score``), or for ``imitate.rounds`` rounds.

    With ``rounds_dir`` every round is kept: the train state and replay buffer
    in ``rounds_dir/checkpoints/<round>`` (a stage started again resumes after
    the last saved round, and computes what an unbroken one does) and the nets
    as a model directory ``rounds_dir/round-<round>``.
    """
    cfg = config.imitate
    comps = components(config)
    rules, nets = comps.rules, comps.nets
    add = _add
    games, match = _imitate_fns(config)

    def stage(state: TrainState, key: jax.Array):
        buffer = replay.init_for(nets, rules, cfg.capacity)
        metrics: dict[str, float] = {}
        start = 0
        if rounds_dir is not None and checkpoint.latest_step(rounds_dir) is not None:
            (state, buffer), meta, start = checkpoint.restore(rounds_dir, (state, buffer))
            metrics = meta["metrics"]
            say(f"imitate: resumed {rounds_dir} after round {start}")
            if meta["target_reached"]:
                return state, metrics
        for r in range(start, cfg.rounds):
            k_games, k_split, k_train, k_eval = jax.random.split(jax.random.fold_in(key, r), 4)
            t0 = clock.running()
            g = jax.block_until_ready(games(k_games))
            t_games = clock.running() - t0
            train_mask, held_mask = supervised.split_by_game(g.game, cfg.held_out, k_split)
            buffer = add(buffer, imitation.mask_examples(g.examples, jnp.asarray(train_mask)))
            t0 = clock.running()
            state, train_metrics = sgd(config, state, buffer, k_train, cfg.steps_per_round)
            t_train = clock.running() - t0
            metrics = {
                "imitate/round": float(r + 1),
                "imitate/mentor_games": float(cfg.num_games),
                "imitate/mentor_mean_length": float(np.mean(np.asarray(g.result.length))),
                "imitate/train_positions": float(np.sum(np.asarray(buffer.size))),
                "time/mentor_games_s": t_games,
                "time/train_s": t_train,
                "speed/mentor_games_per_s": cfg.num_games / t_games,
                **{f"train/{k}": v for k, v in train_metrics.items()},
                **held_out_imitation(nets, state.variables, g, np.asarray(held_mask)),
            }
            if cfg.eval_games:
                t0 = clock.running()
                s = arena.score(match(state.variables, k_eval))
                metrics.update({"imitate/vs_mentor_score": s.score,
                                "imitate/vs_mentor_low": s.low,
                                "time/eval_s": clock.running() - t0})
            reached = bool(cfg.eval_games) and (
                metrics["imitate/vs_mentor_score"] >= cfg.target_score)
            if rounds_dir is not None:
                checkpoint.save(rounds_dir, r + 1, (state, buffer),
                                {"round": r + 1, "metrics": metrics, "target_reached": reached})
                models.save(rounds_dir / f"round-{r + 1}", config, state.variables)
            if log:
                log({"stage": "imitate", "round": r + 1, **metrics})
            if reached:
                break
        return state, metrics

    return stage


def held_out_imitation(nets, variables, g: imitation.MentorGames, held_mask) -> dict:
    """Top-1/5/10 accuracy and value loss on the held-out games' mentor moves."""
    keep = np.asarray(g.examples.valid) & held_mask
    if not keep.any():
        return {}
    obs = np.asarray(g.examples.obs)[keep]
    to_play = np.asarray(g.examples.to_play)[keep]
    action = np.asarray(g.action)[keep]
    z = np.asarray(g.examples.z)[keep]
    out = supervised.evaluate(nets, variables, obs, to_play, action, z)
    out["value_loss"] = out.pop("value_mse")
    del out["count"]
    return {f"heldout/{k}": float(v) for k, v in out.items()} | {
        "heldout/positions": float(len(obs)),
        "heldout/games": float(len(np.unique(np.asarray(g.game)[keep])))}


def selfplay_stage(config: Config, run_dir: Path, log: Log | None = None,
                   say: Callable[[str], None] = print) -> Stage:
    """Stage 3 (paper IV.D): the self-play RL loop from the given nets, with gating,
    checkpointed after every iteration in ``run_dir`` (resumed if it holds a run)."""

    def stage(state: TrainState, key: jax.Array):
        del key  # the run's own key comes from config.seed, as in the main job
        comps = components(config)
        rs = run.init_state(comps)
        rs = rs._replace(train=state, best=state.variables)
        if comps.sharder is not None:
            rs = comps.sharder.replicate(rs)
        if checkpoint.latest_step(run_dir) is not None:
            rs, _, _ = checkpoint.restore(run_dir, rs)
            say(f"selfplay: resumed {run_dir} at iteration {int(rs.iteration)}")
        else:
            checkpoint.write_config(run_dir, config)
            checkpoint.save(run_dir, 0, rs, {"iteration": 0})
        metrics: dict[str, float] = {}
        while int(rs.iteration) < config.iterations:
            rs, metrics = run.run_iteration(comps, rs)
            it = int(rs.iteration)
            checkpoint.save(run_dir, it, rs, {"iteration": it})
            if log:
                log({"stage": "selfplay", "iteration": it, **metrics})
        return rs.train._replace(variables=rs.best), metrics

    return stage


def make_stage(name: str, config: Config, run_dir: Path, log: Log | None = None,
               say: Callable[[str], None] = print, index: int = 0) -> Stage:
    """The stage ``name`` of a curriculum in ``run_dir``, at position ``index``
    (which names the imitate stage's directory of rounds)."""
    if name not in STAGES:
        raise ConfigError(f"unknown stage {name!r}; the stages are {', '.join(STAGES)}")
    if name == "selfplay":
        return selfplay_stage(config, run_dir / "selfplay", log, say)
    if name == "imitate":
        return imitate_stage(config, log, run_dir / "rounds" / f"{index}-imitate", say)
    return basic_stage(config, log)


def stage_key(config: Config, index: int) -> jax.Array:
    return jax.random.fold_in(jax.random.PRNGKey(config.seed), 1000 + index)


def read_progress(run_dir: Path) -> dict:
    path = run_dir / "curriculum.json"
    if not path.exists():
        return {"done": [], "metrics": {}}
    return json.loads(path.read_text())


def run_curriculum(config: Config, run_dir: Path, init_variables=None,
                   say: Callable[[str], None] = print) -> dict:
    """Run (or resume) ``config.curriculum.stages`` in ``run_dir``; returns the
    progress record (stages done and each one's final metrics)."""
    stages = config.curriculum.stages
    progress = read_progress(run_dir)
    done = progress["done"]
    if done != list(stages[:len(done)]):
        raise ConfigError(f"{run_dir}/curriculum.json records stages {done}, which do not "
                          f"begin the configured stages {list(stages)}")
    if not (run_dir / "config.json").exists():
        checkpoint.write_config(run_dir, config)
    metrics_path = run_dir / "metrics.jsonl"

    def log(record: dict) -> None:
        with metrics_path.open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        say(format_record(record))

    if done:
        variables = models.load(run_dir / "stages" / f"{len(done) - 1}-{done[-1]}").variables
    elif init_variables is not None:
        variables = init_variables
    else:
        variables = run.init_state(components(config)).best
    for i, name in enumerate(stages):
        if i < len(done):
            continue
        say(f"stage {i + 1}/{len(stages)}: {name}")
        stage = make_stage(name, config, run_dir, log, say, index=i)
        t0 = clock.running()
        train_cfg = config.train if name == "selfplay" else stage_train(config)
        state, metrics = stage(fresh_train_state(train_cfg, variables),
                               stage_key(config, i))
        variables = jax.device_get(state.variables)
        metrics["time/stage_s"] = clock.running() - t0
        models.save(run_dir / "stages" / f"{i}-{name}", config, variables)
        models.save(run_dir, config, variables)
        done.append(name)
        progress = {"done": done, "metrics": {**progress["metrics"], name: metrics}}
        (run_dir / "curriculum.json").write_text(json.dumps(progress, indent=2, sort_keys=True))
    return progress


def format_record(r: dict) -> str:
    """One human line of a metrics record."""
    parts = [r["stage"]]
    if "round" in r:
        parts.append(f"round {r['round']}")
    if "iteration" in r:
        parts.append(f"it {r['iteration']}")
    for key, label in (("train/loss", "loss"), ("train/value_loss", "v"),
                       ("train/policy_loss", "p"), ("heldout/top1", "top1"),
                       ("heldout/top5", "top5"), ("heldout/top10", "top10"),
                       ("heldout/value_loss", "held-out v"),
                       ("imitate/vs_mentor_score", "vs mentor"),
                       ("speed/mentor_games_per_s", "mentor games/s"),
                       ("gating/score", "gate"), ("eval/vs_random_score", "vs random")):
        if key in r:
            parts.append(f"{label} {r[key]:.3f}")
    return " | ".join(parts)
