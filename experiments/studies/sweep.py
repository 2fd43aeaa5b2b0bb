"""Reproducibility sweep: the main job over a grid of seeds x config overrides.

    python -m experiments.studies.sweep --preset smoke --out runs/sweep --seeds 0-3 \\
        --set search.num_simulations=4,8
    python -m experiments.studies.sweep --preset cpu --out runs/sweep_cpu --seeds 0-7 \\
        --set search.num_simulations=32,64 --set decay.gamma=1.0,0.95

A ``--set`` with several values is an axis of the grid; with one value it is a
fixed override of every run (``--set eval.every=3``). Each run is the main job
itself (``agz_jax.training.driver.train``, in this process, one after the other) in
``OUT/runs/<setting>/seed_<n>``, so it gives bit for bit what running it alone
gives; runs of one setting share compiled executables through the persistent
compilation cache (compiled once, not once per seed). Every finished run leaves
``record.json`` (config, seed, package versions, final metrics, params hash).
Running the same command again skips finished runs and resumes a killed one
from its checkpoint. At the end: ``summary.csv``, ``summary.md`` (mean ± std
and 95% interval across seeds per setting), ``curves.png`` and ``final.png``.

``--vmap-seeds`` (off by default) runs the unfinished seeds of each setting
together, vmapped in one compile (``agz_jax.studies.seeds``; ConfigError before
anything runs if a setting does not allow it: one device, one process, the
stacked run states within ``--vmap-max-gb``). Each seed's run directory is
written as the main job writes it (``config.json``, a checkpoint per
iteration, ``metrics.jsonl``, TensorBoard events, then ``record.json``), so
``agz_jax.nets.models.load``, ``experiments.selfplay --resume`` and this summary
read it unchanged. A killed group resumes from the last iteration all its
seeds checkpointed. Vmapped runs are deterministic but not bit-identical to
solo runs (the last bits of the nets differ; docs/performance.md); on 2 CPU
cores they are also slower (docs/performance.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
from pathlib import Path

from agz_jax.base import clock
from agz_jax.config.presets import PRESETS, get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.studies.sweep import Tee
from agz_jax.training import cli


def parse(argv: list[str]):
    from agz_jax.studies import sweep

    p = argparse.ArgumentParser(prog="python -m experiments.studies.sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="smoke", help=f"one of {sorted(PRESETS)} (smoke)")
    p.add_argument("--out", type=Path, required=True, help="sweep directory")
    p.add_argument("--seeds", default="0-3", help="e.g. 0-7 or 0,2,5 (0-3)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=V1[,V2...]",
                   help="config override; several values make a grid axis (repeatable)")
    p.add_argument("--strength", default="eval/vs_random_score",
                   help="the metric of final.png (falls back to train/loss if not logged)")
    p.add_argument("--verbose", action="store_true", help="show each run's own output")
    p.add_argument("--vmap-seeds", action="store_true",
                   help="run each setting's seeds together, vmapped in one compile")
    p.add_argument("--vmap-max-gb", type=float, default=2.0,
                   help="with --vmap-seeds: budget of a setting's stacked run states (2)")
    args = p.parse_args(argv)
    if args.vmap_seeds and not args.vmap_max_gb > 0:
        raise ConfigError(f"--vmap-max-gb must be positive, not {args.vmap_max_gb:g}")
    check_out(args.out)
    base = get_preset(args.preset)
    sets = [sweep.parse_set(s) for s in args.set]
    base, runs = sweep.grid(base, sweep.parse_seeds(args.seeds), sets)
    return args, base, runs


class Stopped(Exception):
    """A run stopped by Ctrl-C or SIGTERM (it kept its checkpoints): ``status``."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


def check_out(out: Path) -> None:
    """ConfigError unless ``out`` is new, an empty directory, or a sweep's own
    (its ``sweep.json``, written before the first run: an interrupted sweep resumes)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; choose a new --out")
    if out.is_dir() and any(out.iterdir()) and not (out / "sweep.json").is_file():
        raise ConfigError(f"--out {out} holds other files and is not a sweep (no sweep.json); "
                          "choose a new or empty --out")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from agz_jax.studies import sweep

    try:
        args, base, runs = parse(argv)
        plans = []
        for r in runs:
            done = sweep.read_record(r.dir(args.out))
            # compare configs, not their JSON (which turns tuples into lists)
            if done is not None and type(r.config).from_dict(done["config"]) != r.config:
                field = r.config.first_difference(type(r.config).from_dict(done["config"]))
                raise ConfigError(f"{r.dir(args.out)} was run with another {field}; "
                                  "choose another --out")
            plans.append((r, done))
        if args.vmap_seeds:
            check_vmappable(plans, args.out, args.vmap_max_gb)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    command = shlex.join(["python", "-m", "experiments.studies.sweep", *argv])
    try:
        return sweep_runs(args, base, runs, plans, command)
    except (KeyboardInterrupt, Stopped) as e:
        print(f"interrupted: finished runs and checkpoints are kept in {args.out}; "
              f"resume with the same command: {command}", file=sys.stderr)
        return e.status if isinstance(e, Stopped) else cli.INTERRUPTED


def sweep_runs(args, base, runs, plans, command: str) -> int:
    """The runs of the sweep (KeyboardInterrupt on Ctrl-C), then its report."""
    from agz_jax.studies import sweep
    from agz_jax.training import driver as training

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sweep.json").write_text(json.dumps({
        "command": command,
        "preset": args.preset, "base": base.to_dict(), "seeds": sorted({r.seed for r in runs}),
        "settings": list(dict.fromkeys(r.label for r in runs)), "runs": len(runs),
        "vmap_seeds": args.vmap_seeds,
    }, indent=2))
    print(f"sweep {args.out}: {len(runs)} runs ({len({r.label for r in runs})} settings x "
          f"{len({r.seed for r in runs})} seeds), preset {args.preset}", flush=True)

    if args.vmap_seeds:
        try:
            records = run_vmapped(plans, args)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return report(runs, records, args)
    records = {}
    for i, (r, done) in enumerate(plans, 1):
        run_dir = r.dir(args.out)
        name = f"[{i}/{len(plans)}] {r.label} seed {r.seed}"
        if done is not None:
            print(f"{name}: done before, skipped", flush=True)
            records[run_dir] = done
            continue
        resume = (run_dir / "checkpoints").is_dir()
        t0 = clock.running()
        tee = Tee(sys.stdout, quiet=not args.verbose)
        err = Tee(sys.stderr, quiet=not args.verbose)
        try:
            with contextlib.redirect_stdout(tee), contextlib.redirect_stderr(err):
                # A killed run resumes with its own config.json, as --resume does.
                result = training.train(None if resume else r.config, run_dir, resume=resume,
                                        quiet=True, preset=args.preset)
        except training.Interrupted as e:  # handled by the run: checkpoints kept
            raise Stopped(e.status) from None
        except ConfigError as e:
            out = "".join(tee.parts) + "".join(err.parts)
            print(f"{name}: failed: {e}\n{out[-3000:]}", file=sys.stderr)
            return 1
        wall = clock.running() - t0
        rec = sweep.write_record(r, run_dir, result.params_hash, wall)
        records[run_dir] = rec
        print(f"{name}: {'resumed, ' if resume else ''}{wall:.0f} s"
              f"{shown(rec['final'], args.strength)}", flush=True)
    return report(runs, records, args)


def shown(final: dict, strength: str) -> str:
    return "".join(f", {k} {final[k]:.3f}" for k in ("train/loss", strength) if k in final)


def report(runs, records: dict, args) -> int:
    """The summary table and the plots of the finished runs."""
    from agz_jax.studies import sweep

    sweep.summarise(runs, records, args.out)
    written = sweep.plot(runs, args.out, strength=args.strength)
    print()
    print((args.out / "summary.md").read_text())
    print("written: " + ", ".join(str(p) for p in
                                  [args.out / "summary.csv", args.out / "summary.md", *written]))
    return 0


# ------------------------------------------------------------------ --vmap-seeds


def groups(plans) -> list[list[tuple]]:
    """The plans of each setting, in grid order."""
    by_label: dict[str, list[tuple]] = {}
    for plan in plans:
        by_label.setdefault(plan[0].label, []).append(plan)
    return list(by_label.values())


def check_vmappable(plans, out: Path, max_gb: float) -> None:
    """ConfigError, before anything runs, if a setting's unfinished seeds cannot
    be vmapped together (``agz_jax.studies.seeds.check``) or their directories hold
    runs of another config."""
    from agz_jax.nets import checkpoint
    from agz_jax.studies import seeds
    from agz_jax.training import run

    for group in groups(plans):
        todo = [r for r, done in group if done is None]
        if todo:
            seeds.check(run.build(todo[0].config), [r.seed for r in todo],
                        int(max_gb * 1024**3))
        for r in todo:  # a killed run of this grid, or another run in the way
            saved = r.dir(out) / "config.json"
            if saved.exists() and checkpoint.read_config(saved.parent) != r.config:
                field = r.config.first_difference(checkpoint.read_config(saved.parent))
                raise ConfigError(f"{saved.parent} was run with another {field}; "
                                  "choose another --out")


def resume_step(run_dirs: list[Path]) -> int | None:
    """The iteration a group restarts from: None (from scratch) if no seed has
    checkpointed past iteration 0, else the last iteration every seed has a
    checkpoint of (a group killed while saving leaves its seeds one apart).
    ConfigError if the seeds' checkpoints do not fit one group."""
    from agz_jax.nets import checkpoint

    steps = {d: checkpoint.latest_step(d) for d in run_dirs}
    known = [s for s in steps.values() if s is not None]
    if not known or max(known) == 0:
        return None
    if len(known) < len(steps) or max(known) - min(known) > 1:
        shown = ", ".join(f"{d.name} at {s}" for d, s in steps.items())
        raise ConfigError(f"the seeds of {run_dirs[0].parent} stopped at different iterations "
                          f"({shown}): resume them without --vmap-seeds")
    return min(known)


def run_vmapped(plans, args) -> dict[Path, dict]:
    """Every setting's unfinished seeds as one vmapped group; the records of all runs."""
    from agz_jax.base.cache import enable_compilation_cache
    from agz_jax.nets import checkpoint
    from agz_jax.studies import seeds, sweep
    from agz_jax.training import driver as training
    from agz_jax.training import report, run

    enable_compilation_cache()
    records = {}
    settings = groups(plans)
    for number, group in enumerate(settings, 1):
        for r, done in group:
            if done is not None:
                print(f"{r.label} seed {r.seed}: done before, skipped", flush=True)
                records[r.dir(args.out)] = done
        todo = [r for r, done in group if done is None]
        if not todo:
            continue
        dirs = [r.dir(args.out) for r in todo]
        config = todo[0].config
        name = (f"[setting {number}/{len(settings)}] {todo[0].label} seeds "
                f"{','.join(str(r.seed) for r in todo)} (vmapped)")
        t0 = clock.running()
        group_seeds = seeds.build(config, [r.seed for r in todo], int(args.vmap_max_gb * 1024**3))
        start = resume_step(dirs)
        state = seeds.init_state(group_seeds)
        if start is not None:
            state = seeds.stack([
                checkpoint.restore(d, seeds.unstack(state, i), step=start)[0]
                for i, d in enumerate(dirs)])
        for i, (r, d) in enumerate(zip(todo, dirs, strict=True)):
            if checkpoint.latest_step(d) is None:
                checkpoint.write_config(d, r.config)
                checkpoint.save(d, 0, seeds.unstack(state, i),
                                training.checkpoint_meta(r.config, 0))
        logs = [run.MetricsLog(d, keep_through=start or 0) for d in dirs]
        due = [training.needs_initial_evaluation(config, start or 0, log) for log in logs]
        if any(due):
            initial = seeds.initial_evaluation(group_seeds, state)
            for log, m, now in zip(logs, initial, due, strict=True):
                if now:
                    log.write(0, m)
        while (it := int(state.iteration[0])) < config.iterations:
            state, metrics = seeds.run_iteration(group_seeds, state)
            it += 1
            for i, (r, d, log) in enumerate(zip(todo, dirs, logs, strict=True)):
                log.write(it, metrics[i])
                if (checkpoint.latest_step(d) or 0) < it:  # one apart after a kill: kept
                    checkpoint.save(d, it, seeds.unstack(state, i),
                                    training.checkpoint_meta(r.config, it))
            if args.verbose:
                print(f"{name}: " + "; ".join(
                    f"seed {r.seed} {report.fmt_line(it, config.iterations, m)}"
                    for r, m in zip(todo, metrics, strict=True)), flush=True)
        wall = clock.running() - t0
        for i, (r, d, log) in enumerate(zip(todo, dirs, logs, strict=True)):
            log.close()
            rec = sweep.write_record(r, d, run.params_hash(seeds.unstack(state, i)), wall,
                                     {"vmap_group": [x.seed for x in todo]})
            records[d] = rec
            print(f"{name} seed {r.seed}: {'resumed, ' if start else ''}{wall:.0f} s"
                  f"{shown(rec['final'], args.strength)}", flush=True)
    return records


if __name__ == "__main__":
    cli.leave(main())
