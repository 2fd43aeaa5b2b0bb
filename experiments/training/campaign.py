r"""The self-play campaign's nets and its compute ledger, kept in the repository.

A campaign is a chain of self-play runs (``python -m experiments.selfplay
--preset campaign``, on the CPU, or ``--preset gpu`` in a GPU window), each
started with ``--init-from models/campaign`` and resumable on its own machine.
Runs do not survive the machine, so after (or during) each one its best nets
go into ``models/campaign`` with ``export``, and ``models/campaign/campaign.json``
records every run's share of the compute:

    python -m experiments.training.campaign export runs/campaign-b --device cpu
    python -m experiments.training.campaign status

``export`` is idempotent: exporting the same run again (it has gone further)
replaces that run's line (runs are named by their directory's name, so a
different run of a name already in the ledger, one started from another
``init_from``, is refused). A run whose board, net or input features differ
from the model's is refused before anything is written. ``status`` prints the
totals: self-play games and positions, CPU-hours and GPU-minutes.

``polish`` trains a run's candidate nets (the ones its SGD steps move, not the
best that the gate kept) some more SGD steps on the replay of one of its
checkpoints, and writes them as a model with a ``polish.json`` that says how;
the run itself is not changed:

    python -m experiments.training.campaign polish runs/campaign-h --steps 400 --seed 29 \
        --out runs/polished
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

LEDGER = "campaign.json"


def iteration_lines(run_dir: Path, through: int | None = None) -> list[dict]:
    """The iterations' lines of a run's metrics.jsonl (not iteration 0's evaluation),
    up to iteration ``through`` (its checkpoint) when given: a line past the
    checkpoint (a run stopped while writing it) is trimmed, and that iteration
    played again, on resume."""
    lines = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()
             if ln.strip()]
    return [m for m in lines
            if m["iteration"] > 0 and (through is None or m["iteration"] <= through)]


def run_summary(run_dir: Path, device: str, iterations: list[dict]) -> dict:
    """One run's line of the ledger, from its config and its ``iteration_lines``
    ("hours": the iterations' wall time, ``agz_jax.training.run.wall_seconds``: without the
    time the run was stopped, in lines logged since that is measured)."""
    from agz_jax.nets import checkpoint
    from agz_jax.training import run

    init = run_dir / "init_from.txt"
    seconds = sum(run.wall_seconds(m) for m in iterations)
    return {
        "run": run_dir.name,
        "init_from": init.read_text().strip() if init.exists() else None,
        "device": device,
        "iterations": len(iterations),
        "checkpoint": checkpoint.latest_step(run_dir),
        "games": int(sum(m.get("selfplay/games", 0) for m in iterations)),
        "positions": int(sum(m.get("selfplay/moves", 0) for m in iterations)),
        "accepted": int(sum(m.get("gating/accepted", 0) for m in iterations)),
        "hours": seconds / 3600,
        # Left out of "hours" (agz_jax.base.clock); lines logged before late 2026-11-27 have none.
        "stopped_hours": sum(m.get(run.STOPPED_S, 0.0) for m in iterations) / 3600,
        "black_wins_last": iterations[-1].get("selfplay/black_wins") if iterations else None,
        "exported": time.strftime("%Y-%m-%d %H:%M"),
    }


def totals(ledger: list[dict]) -> dict:
    cpu = sum(r["hours"] for r in ledger if r["device"] == "cpu")
    gpu = sum(r["hours"] for r in ledger if r["device"] != "cpu")
    return {"runs": len(ledger), "iterations": sum(r["iterations"] for r in ledger),
            "games": sum(r["games"] for r in ledger),
            "positions": sum(r["positions"] for r in ledger),
            "cpu_hours": cpu, "gpu_minutes": 60 * gpu}


def read_ledger(model_dir: Path) -> list[dict]:
    path = model_dir / LEDGER
    return json.loads(path.read_text())["runs"] if path.exists() else []


def best_iteration(iterations: list[dict], gated: bool) -> int | None:
    """The iteration whose trained nets are a run's best: with ``gated`` (the
    run's ``gating.enabled``) the last one its gate accepted, None if none;
    without, its last (every iteration's nets play the next)."""
    if not gated:
        return max((m["iteration"] for m in iterations), default=None)
    accepted = [m["iteration"] for m in iterations if m.get("gating/accepted", 0)]
    return max(accepted, default=None)


def made_with(iterations: list[dict], gated: bool, earlier: list[dict], total: dict) -> dict:
    """The campaign's self-play games and hours when a run's best nets were made:
    the ``earlier`` runs' lines, plus the run's ``iterations`` up to its
    ``best_iteration``; the campaign's ``total`` if that is unknown."""
    from agz_jax.training import run

    best = best_iteration(iterations, gated)
    if best is None:
        return {"games": total["games"],
                "hours": total["cpu_hours"] + total["gpu_minutes"] / 60}
    upto = [m for m in iterations if m["iteration"] <= best]
    return {"games": sum(r["games"] for r in earlier)
            + int(sum(m.get("selfplay/games", 0) for m in upto)),
            "hours": sum(r["hours"] for r in earlier)
            + sum(run.wall_seconds(m) for m in upto) / 3600,
            "iteration": best}


def nets_sha256(model_dir: Path) -> str:
    """The sha256 of a model directory's variables file (the ledger's ``nets.sha256``)."""
    import hashlib

    from agz_jax.nets import models

    return hashlib.sha256((model_dir / models.VARIABLES_FILE).read_bytes()).hexdigest()


def export(run_dir: Path, model_dir: Path, device: str) -> dict:
    """Copy ``run_dir``'s best nets to ``model_dir`` and record the run in its ledger.

    The ledger's ``nets`` names the nets now in ``model_dir`` (sha256 of their
    file) and the campaign's games and hours when they were made (``made_with``:
    up to the run's iteration that made them, not its last): a run whose
    candidates were all rejected leaves the nets, and so ``nets``, as they were
    (the ladder names the player by ``nets.games``)."""
    from agz_jax.nets import models

    check_fits(run_dir, model_dir)
    model = models.load(run_dir)
    iterations = iteration_lines(run_dir, through=model.step)
    line = run_summary(run_dir, device, iterations)
    same_name = [r for r in read_ledger(model_dir) if r["run"] == line["run"]]
    if same_name and same_name[0].get("init_from") != line["init_from"]:
        raise models.ModelError(
            f"{model_dir / LEDGER} already has a run named {line['run']!r}, started from "
            f"{same_name[0].get('init_from')}, but {run_dir} started from {line['init_from']}: "
            "a different run of the same name; rename its directory to export it")
    old_path = model_dir / LEDGER
    old_nets = json.loads(old_path.read_text()).get("nets") if old_path.exists() else None
    models.save(model_dir, model.config, model.variables)
    ledger = [r for r in read_ledger(model_dir) if r["run"] != line["run"]] + [line]
    total = totals(ledger)
    sha = nets_sha256(model_dir)
    nets = old_nets if old_nets and old_nets.get("sha256") == sha else {
        "sha256": sha, **made_with(iterations, model.config.gating.enabled, ledger[:-1], total)}
    old_path.write_text(json.dumps({"runs": ledger, "totals": total, "nets": nets},
                                   indent=2) + "\n")
    return line


def check_fits(run_dir: Path, model_dir: Path) -> None:
    """ModelError, naming the first field that differs, unless the run's nets
    can replace ``model_dir``'s (if it holds a model): the same board, rule,
    net and input features (``presets.check_nets_fit``'s sections)."""
    import dataclasses

    from agz_jax.nets import models

    if not (model_dir / models.CONFIG_FILE).exists():
        return
    theirs, mine = models.read_config(run_dir), models.read_config(model_dir)
    for section in ("game", "net", "features"):
        ours, new = getattr(mine, section), getattr(theirs, section)
        for f in dataclasses.fields(ours):
            a, b = getattr(ours, f.name), getattr(new, f.name)
            if a != b:
                raise models.ModelError(
                    f"{run_dir} has {section}.{f.name} = {b!r} but the model in {model_dir} "
                    f"has {a!r}; export it to another --to")


def polish(run_dir: Path, out: Path, steps: int, seed: int, step: int | None = None,
           learning_rate: float | None = None) -> dict:
    """Train the candidate of ``run_dir``'s checkpoint (the latest, or ``step``)
    ``steps`` more SGD steps (``agz_jax.training.train.sgd``, keyed by ``seed``) on that
    checkpoint's replay, with the run's train config (``learning_rate`` if given),
    and write the nets to ``out`` as a model with ``polish.json``, which it returns.
    Raises CheckpointError if the run has no checkpoint that fits its config."""
    import dataclasses

    import jax

    from agz_jax.nets import checkpoint, models
    from agz_jax.training import run
    from agz_jax.training.train import sgd

    config = checkpoint.read_config(run_dir)
    cfg = config.train if learning_rate is None else dataclasses.replace(
        config.train, learning_rate=learning_rate)
    comps = run.build(config)
    state, _, at = checkpoint.restore(run_dir, run.init_state(comps), step=step)
    start = time.perf_counter()
    train, metrics = sgd(comps.nets, cfg, state.train, state.replay,
                         jax.random.PRNGKey(seed), steps)
    seconds = time.perf_counter() - start
    models.save(out, config, train.variables)
    record = {"run": str(run_dir), "checkpoint": int(at), "candidate_step": int(state.train.step),
              "steps": steps, "seed": seed, "learning_rate": cfg.learning_rate,
              "batch_size": cfg.batch_size, "seconds": round(seconds, 1),
              "loss_first": metrics.get("first_loss"), "loss_last": metrics.get("loss"),
              "sha256": nets_sha256(out)}
    (out / "polish.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.training.campaign", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="copy a run's best nets into the campaign model")
    e.add_argument("run", type=Path, help="a run directory of experiments.selfplay")
    e.add_argument("--to", type=Path, default=Path("models/campaign"),
                   help="the campaign's model directory (default models/campaign)")
    e.add_argument("--device", choices=("cpu", "gpu"), required=True,
                   help="where the run ran (its hours count as CPU-hours or GPU-minutes)")
    q = sub.add_parser("polish", help="train a run's candidate more steps on its replay, "
                       "into a new model (the run is not changed)")
    q.add_argument("run", type=Path, help="a run directory of experiments.selfplay")
    q.add_argument("--out", type=Path, required=True, help="the model directory to write")
    q.add_argument("--steps", type=int, required=True, help="SGD steps (>= 1)")
    q.add_argument("--seed", type=int, default=0, help="the key of the batches drawn")
    q.add_argument("--step", type=int, default=None,
                   help="the checkpoint to start from (default: the latest)")
    q.add_argument("--learning-rate", type=float, default=None,
                   help="instead of the run's train.learning_rate")
    s = sub.add_parser("status", help="the campaign's runs and totals")
    s.add_argument("--model", type=Path, default=Path("models/campaign"))
    args = p.parse_args(argv)

    if args.command == "export":
        from agz_jax.nets import checkpoint, models

        if not (args.run / "config.json").is_file():
            print(f"error: {args.run} holds no self-play run (no config.json); give the "
                  "--out directory of python -m experiments.selfplay", file=sys.stderr)
            return 2
        if (not (args.run / "metrics.jsonl").is_file()
                or checkpoint.latest_step(args.run) is None):
            print(f"error: {args.run} has no finished iteration yet (no checkpoint); export "
                  "it once its first iteration is saved", file=sys.stderr)
            return 2
        if args.to.exists() and not args.to.is_dir():
            print(f"error: --to {args.to} is not a directory; give the campaign's model "
                  "directory", file=sys.stderr)
            return 2

        try:
            line = export(args.run, args.to, args.device)
        except models.ModelError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"exported {args.run} (iteration {line['checkpoint']}, {line['games']} games, "
              f"{line['hours']:.2f} h on {line['device']}) to {args.to}")
        return 0
    if args.command == "polish":
        return polish_command(args)
    ledger = read_ledger(args.model)
    if not ledger:
        print(f"error: {args.model / LEDGER} not found: no run exported yet "
              "(python -m experiments.training.campaign export RUN)", file=sys.stderr)
        return 2
    for r in ledger:
        stopped = r.get("stopped_hours", 0.0)
        print(f"{r['run']:>16}  {r['device']}  {r['iterations']:>4} iterations  "
              f"{r['games']:>7} games  {r['hours']:6.2f} h  from {r['init_from']}"
              + (f"  (and {stopped:.2f} h stopped, not counted)" if stopped else ""))
    t = totals(ledger)
    print(f"total: {t['runs']} runs, {t['iterations']} iterations, {t['games']} games, "
          f"{t['positions']} positions, {t['cpu_hours']:.2f} CPU-hours, "
          f"{t['gpu_minutes']:.1f} GPU-minutes")
    return 0


def polish_command(args: argparse.Namespace) -> int:
    if args.steps < 1:
        print(f"error: --steps must be >= 1, got {args.steps}", file=sys.stderr)
        return 2
    if args.learning_rate is not None and not args.learning_rate > 0:
        print(f"error: --learning-rate must be > 0, got {args.learning_rate}", file=sys.stderr)
        return 2
    if not (args.run / "config.json").is_file():
        print(f"error: {args.run} holds no self-play run (no config.json); give the "
              "--out directory of python -m experiments.selfplay", file=sys.stderr)
        return 2
    from agz_jax.training import cli

    if cli.file_in_the_way(args.out) is not None:
        print(f"error: --out {args.out} is not a directory; give a new directory for the "
              "polished model", file=sys.stderr)
        return 2
    if args.out.exists() and any(args.out.iterdir()):
        print(f"error: {args.out} is not empty; give a new directory for the polished model",
              file=sys.stderr)
        return 2
    from agz_jax.config.schema import ConfigError
    from agz_jax.nets import checkpoint

    try:
        r = polish(args.run, args.out, args.steps, args.seed, args.step, args.learning_rate)
    except (checkpoint.CheckpointError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"polished {args.run}'s candidate at iteration {r['checkpoint']}: {r['steps']} steps "
          f"at lr {r['learning_rate']:g} in {r['seconds']:.0f} s, loss {r['loss_first']:.3f} -> "
          f"{r['loss_last']:.3f}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
