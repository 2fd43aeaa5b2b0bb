"""Reproducibility sweep: the main job over a grid of seeds x config overrides.

    python -m experiments.sweep --preset smoke --out runs/sweep --seeds 0-3 \\
        --set search.num_simulations=4,8
    python -m experiments.sweep --preset cpu --out runs/sweep_cpu --seeds 0-7 \\
        --set search.num_simulations=32,64 --set decay.gamma=1.0,0.95

A ``--set`` with several values is an axis of the grid; with one value it is a
fixed override of every run (``--set eval.every=3``). Each run is the main job
itself (``experiments.selfplay``, in this process, one after the other) in
``OUT/runs/<setting>/seed_<n>``, so it gives bit for bit what running it alone
gives; runs of one setting share compiled executables through the persistent
compilation cache (compiled once, not once per seed). Every finished run leaves
``record.json`` (config, seed, package versions, final metrics, params hash).
Running the same command again skips finished runs and resumes a killed one
from its checkpoint. At the end: ``summary.csv``, ``summary.md`` (mean ± std
and 95% interval across seeds per setting), ``curves.png`` and ``final.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
import sys
import time
from pathlib import Path

from agz_jax.config import PRESETS, ConfigError, get_preset


class Tee(io.TextIOBase):
    """Captures what is written, and passes it on unless ``quiet``."""

    def __init__(self, target, quiet: bool):
        self.target, self.quiet, self.parts = target, quiet, []

    def write(self, s: str) -> int:
        self.parts.append(s)
        if not self.quiet:
            self.target.write(s)
        return len(s)

    def flush(self) -> None:
        self.target.flush()


def parse(argv: list[str]):
    from agz_jax import sweep

    p = argparse.ArgumentParser(prog="python -m experiments.sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="smoke", help=f"one of {sorted(PRESETS)} (smoke)")
    p.add_argument("--out", type=Path, required=True, help="sweep directory")
    p.add_argument("--seeds", default="0-3", help="e.g. 0-7 or 0,2,5 (0-3)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=V1[,V2...]",
                   help="config override; several values make a grid axis (repeatable)")
    p.add_argument("--strength", default="eval/vs_random_score",
                   help="the metric of final.png (falls back to train/loss if not logged)")
    p.add_argument("--verbose", action="store_true", help="show each run's own output")
    args = p.parse_args(argv)
    base = get_preset(args.preset)
    sets = [sweep.parse_set(s) for s in args.set]
    base, runs = sweep.grid(base, sweep.parse_seeds(args.seeds), sets)
    return args, base, runs


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from agz_jax import sweep
    from experiments import selfplay

    try:
        args, base, runs = parse(argv)
        plans = []
        for r in runs:
            flags = ["--preset", args.preset, "--out", str(r.dir(args.out)), "--quiet",
                     *sweep.to_flags(sweep.config_overrides(get_preset(args.preset), r.config))]
            # The main job must build exactly this run's config from these flags.
            if selfplay.parse(flags)[1] != r.config:
                raise ConfigError(f"flags {shlex.join(flags)} do not give the config of {r.label}")
            done = sweep.read_record(r.dir(args.out))
            # compare configs, not their JSON (which turns tuples into lists)
            if done is not None and type(r.config).from_dict(done["config"]) != r.config:
                field = selfplay.dataclasses_differ(
                    r.config, type(r.config).from_dict(done["config"]))
                raise ConfigError(f"{r.dir(args.out)} was run with another {field}; "
                                  "choose another --out")
            plans.append((r, flags, done))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sweep.json").write_text(json.dumps({
        "command": shlex.join(["python", "-m", "experiments.sweep", *argv]),
        "preset": args.preset, "base": base.to_dict(), "seeds": sorted({r.seed for r in runs}),
        "settings": list(dict.fromkeys(r.label for r in runs)), "runs": len(runs),
    }, indent=2))
    print(f"sweep {args.out}: {len(runs)} runs ({len({r.label for r in runs})} settings x "
          f"{len({r.seed for r in runs})} seeds), preset {args.preset}", flush=True)

    records = {}
    for i, (r, flags, done) in enumerate(plans, 1):
        run_dir = r.dir(args.out)
        name = f"[{i}/{len(plans)}] {r.label} seed {r.seed}"
        if done is not None:
            print(f"{name}: done before, skipped", flush=True)
            records[run_dir] = done
            continue
        resume = (run_dir / "checkpoints").is_dir()
        run_flags = ["--out", str(run_dir), "--resume", "--quiet"] if resume else flags
        t0 = time.perf_counter()
        tee = Tee(sys.stdout, quiet=not args.verbose)
        with contextlib.redirect_stdout(tee):
            rc = selfplay.main(run_flags)
        out = "".join(tee.parts)
        found = re.search(r"params sha256 ([0-9a-f]{64})", out)
        if rc != 0 or not found:
            print(f"{name}: failed (exit {rc})\n{out[-3000:]}", file=sys.stderr)
            return 1
        rec = sweep.write_record(r, run_dir, found.group(1), time.perf_counter() - t0)
        records[run_dir] = rec
        final = rec["final"]
        shown = ", ".join(f"{k} {final[k]:.3f}" for k in ("train/loss", args.strength)
                          if k in final)
        print(f"{name}: {'resumed, ' if resume else ''}{time.perf_counter() - t0:.0f} s"
              f"{', ' + shown if shown else ''}", flush=True)

    sweep.summarise(runs, records, args.out)
    written = sweep.plot(runs, args.out, strength=args.strength)
    print()
    print((args.out / "summary.md").read_text())
    print("written: " + ", ".join(str(p) for p in
                                  [args.out / "summary.csv", args.out / "summary.md", *written]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
