"""The ablation sweep's training: each run as the main job itself
(``agz_jax.training.driver.train``, resumed in segments of N iterations), a
curriculum arm first through ``experiments.training.curriculum``
(``agz_jax.curriculum.command``); snapshots of the best net at equal game
equivalents, each followed by its matches; the CPU time of every iteration
counted (``CpuTime``, a hook of the main job)."""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import sys
import time
from pathlib import Path

from agz_jax.base import clock
from agz_jax.config import presets
from agz_jax.config.presets import get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.studies.ablation_matches import drop_compiled, play_missing
from agz_jax.studies.ablation_store import index_run, run_dir, write_json
from agz_jax.training import driver as training

CPU_KEY = "time/cpu_seconds"  # not *_s: the ladder's hours sum time/*_s (wall) only


class CpuTime(training.Hook):
    """A hook of the main job: every iteration (``agz_jax.training.run.run_iteration``) logs
    its process CPU seconds (user + system, all threads) as ``time/cpu_seconds``.
    Logged per iteration, they follow the checkpoints: a killed run's lost
    iterations leave the log with them (``run.MetricsLog``), so nothing is
    counted twice."""

    def before_iteration(self, iteration: int) -> None:
        self.c0 = time.process_time()

    def after_iteration(self, iteration: int, metrics: dict) -> dict:
        return {CPU_KEY: time.process_time() - self.c0}


def call(main, argv: list[str], verbose: bool, name: str) -> str:
    """Run a command's main() (``name``: the command, ``experiments.training.curriculum``) in
    this process; its output (RuntimeError with its tail if it fails)."""
    from agz_jax.studies.sweep import Tee

    tee = Tee(sys.stdout, quiet=not verbose)
    with contextlib.redirect_stdout(tee):
        rc = main(argv)
    text = "".join(tee.parts)
    if rc != 0:
        raise RuntimeError(f"{name} {shlex.join(argv)} failed (exit {rc}):\n"
                           f"{text[-3000:]}")
    return text


def main_job(sdir: Path, verbose: bool, config=None, **kwargs) -> training.Summary:
    """``agz_jax.training.driver.train(config, sdir, quiet=True, **kwargs)`` in this
    process, its output shown if ``verbose``; RuntimeError with the output's
    tail if the run cannot start."""
    from agz_jax.studies.sweep import Tee

    tee = Tee(sys.stdout, quiet=not verbose)
    try:
        with contextlib.redirect_stdout(tee):
            return training.train(config, sdir, quiet=True, **kwargs)
    except ConfigError as e:
        raise RuntimeError(f"the main job in {sdir} failed: {e}\n"
                           f"{''.join(tee.parts)[-3000:]}") from e


def curriculum_flags(plan, arm, seed: int, cdir: Path) -> list[str]:
    from agz_jax.studies import sweep

    config = plan.curriculum_config(arm, seed)
    overrides = sweep.config_overrides(get_preset(plan.preset), config)
    stages = overrides.pop("curriculum.stages", None) or config.curriculum.stages
    return ["--preset", plan.preset, "--out", str(cdir), "--stages", ",".join(stages),
            *sweep.to_flags(overrides)]


# ------------------------------------------------------------------ training


def run_curriculum(plan, arm, seed: int, cdir: Path, verbose: bool, say) -> dict:
    """Run (or resume) the arm's curriculum; its cost so far: process CPU and
    wall seconds of every call, ``interrupted`` calls (killed: their time is
    missing, the cost a lower bound)."""
    from agz_jax.curriculum import command as curriculum
    from agz_jax.curriculum import stages

    cost_path = cdir / "cost.json"
    cost = json.loads(cost_path.read_text()) if cost_path.exists() else {
        "cpu_s": 0.0, "wall_s": 0.0, "calls": 0, "interrupted": 0, "open": False}
    config = plan.curriculum_config(arm, seed)
    if stages.read_progress(cdir)["done"] == list(config.curriculum.stages):
        return {**cost, "complete": True}
    if cost["open"]:
        cost["interrupted"] += 1
    cost["calls"] += 1
    cost["open"] = True
    cdir.mkdir(parents=True, exist_ok=True)
    write_json(cost_path, cost)
    argv = (["--out", str(cdir), "--resume"] if (cdir / "config.json").exists()
            else curriculum_flags(plan, arm, seed, cdir))
    say(f"  curriculum ({','.join(config.curriculum.stages)}) in {cdir}")
    c0, w0 = time.process_time(), clock.running()
    call(curriculum.main, argv, verbose, "experiments.training.curriculum")
    cost["cpu_s"] += time.process_time() - c0
    cost["wall_s"] += clock.running() - w0
    cost["open"] = False
    write_json(cost_path, cost)
    say(f"  curriculum done: {cost['cpu_s']:.0f} CPU-s, {cost['wall_s']:.0f} s")
    return {**cost, "complete": True}


def train_to(sdir: Path, target: int, config, init: training.Init | None, preset: str,
             verbose: bool) -> str | None:
    """The main job in ``sdir`` up to iteration ``target`` (started with ``config``
    and ``init``'s nets, resumed with its own config after); the params hash of
    its nets (None: nothing to do)."""
    from agz_jax.nets import checkpoint

    step = checkpoint.latest_step(sdir)
    if step is not None and step >= target:
        return None
    if step is None:
        summary = main_job(sdir, verbose, config, iterations=target, init=init,
                           preset=preset, hooks=[CpuTime()])
    else:
        summary = main_job(sdir, verbose, resume=True, iterations=target, hooks=[CpuTime()])
    return summary.params_hash


def progress_at(sdir: Path, iteration: int) -> tuple[int, float, float]:
    """(self-play games, CPU seconds, wall seconds: ``agz_jax.training.run.wall_seconds``) of a run
    through ``iteration``."""
    from agz_jax.training import run

    rows = [r for r in run.MetricsLog(sdir, keep_through=iteration, write=False).read()
            if 1 <= r["iteration"] <= iteration]
    if len(rows) != iteration:
        raise RuntimeError(f"{sdir / 'metrics.jsonl'} has {len(rows)} rows for iterations "
                           f"1..{iteration}")
    missing = [r["iteration"] for r in rows if CPU_KEY not in r]
    if missing:
        raise RuntimeError(f"{sdir}: iterations {missing[:5]} logged no {CPU_KEY} (run outside "
                           "the ablation runner, which logs it with its hook CpuTime)")
    games = int(sum(r["selfplay/games"] for r in rows))
    cpu = sum(r[CPU_KEY] for r in rows)
    wall = sum(run.wall_seconds(r) for r in rows)
    return games, cpu, wall


def save_snapshot(plan, arm, seed: int, rdir: Path, iteration: int) -> Path:
    """The best net at ``iteration`` as a model directory ``RUN/snapshots/it<N>``."""
    import jax

    from agz_jax.nets import models
    from agz_jax.training import run

    snap = rdir / "snapshots" / f"it{iteration}"
    if (snap / models.VARIABLES_FILE).exists():
        return snap
    config = plan.config(arm, seed)
    if iteration == 0 and arm.curriculum:
        variables = models.load(rdir / "curriculum").variables
    elif iteration == 0:
        variables = jax.device_get(run.init_state(run.build(config)).best)
    else:
        model = models.load(rdir / "selfplay")
        if model.step != iteration:
            raise RuntimeError(f"{rdir / 'selfplay'} is at iteration {model.step}, not "
                               f"{iteration}: its snapshot it{iteration} cannot be made")
        variables = model.variables
    tmp = snap.with_name(snap.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    models.save(tmp, config, variables)
    tmp.replace(snap)
    return snap


def train_run(plan, arm, seed: int, out: Path, index: dict, state: dict, verbose: bool,
              say) -> None:
    """One arm x seed: curriculum, segments, snapshots; the matches after each snapshot."""
    from agz_jax.studies import ablation, sweep

    entry = index_run(index, arm.name, seed)
    if entry["done"]:
        return
    rdir = run_dir(out, arm.name, seed)
    sdir = rdir / "selfplay"
    t0 = clock.running()
    say(f"[{arm.name} seed {seed}] {plan.iterations(arm)} iterations, snapshots at "
        f"{plan.snapshots(arm)}")
    cpu0 = wall0 = 0.0
    config = plan.config(arm, seed)  # its iterations set per segment (train_to)
    init = None
    if arm.curriculum:
        entry["curriculum"] = run_curriculum(plan, arm, seed, rdir / "curriculum", verbose, say)
        cpu0, wall0 = entry["curriculum"]["cpu_s"], entry["curriculum"]["wall_s"]
        init = curriculum_nets(config, rdir / "curriculum")
    last = plan.snapshots(arm)[-1]
    params_hash = None
    for it in plan.snapshots(arm):
        if any(s["iteration"] == it for s in entry["snapshots"]):
            continue
        if it:
            params_hash = train_to(sdir, it, config, init, plan.preset, verbose)
            games, cpu, wall = progress_at(sdir, it)
        else:
            games, cpu, wall = 0, 0.0, 0.0
        snap = save_snapshot(plan, arm, seed, rdir, it)
        equivalents = arm.curriculum_games + games
        entry["snapshots"].append({
            "iteration": it, "selfplay_games": games, "games": equivalents,
            "cpu_s": cpu0 + cpu, "wall_s": wall0 + wall, "final": it == last,
            "model": str(snap.relative_to(out)),
            "player": ablation.player_name(arm.name, seed, equivalents)})
        entry["wall_s"] += clock.running() - t0
        t0 = clock.running()
        write_json(out / "index.json", index)
        state["dirty"] = True
        say(f"  snapshot it{it}: {games} self-play games, {(cpu0 + cpu) / 3600:.3f} CPU-h")
        play_missing(plan, out, index, state, verbose, say)
        drop_compiled(state)  # the segment's and the matches' programs: see drop_compiled
    if params_hash is None:  # the last segment ran in an earlier session: ask the run
        params_hash = main_job(sdir, False, resume=True).params_hash
    setting = (("arm", arm.name), *arm.overrides.items())
    sweep.write_record(sweep.Run(setting, seed, config), sdir, params_hash, entry["wall_s"],
                       {"arm": arm.name, "cpu_s": entry["snapshots"][-1]["cpu_s"],
                        "curriculum": entry["curriculum"]})
    entry["done"] = True
    entry["wall_s"] += clock.running() - t0
    write_json(out / "index.json", index)
    say(f"[{arm.name} seed {seed}] done: {entry['snapshots'][-1]['cpu_s'] / 3600:.2f} CPU-h, "
        f"{entry['wall_s'] / 3600:.2f} h wall with its matches")


def curriculum_nets(config, cdir: Path) -> training.Init:
    """The curriculum's nets, which the arm's main job starts from (ConfigError if
    they do not fit its config, as ``--init-from`` says)."""
    from agz_jax.nets import models

    model = models.load(cdir)
    presets.check_nets_fit(config, model.config, f"--init-from {cdir}", model=str(cdir))
    return training.Init(str(cdir), model.variables)
