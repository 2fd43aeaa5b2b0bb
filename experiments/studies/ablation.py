"""The ablation sweep of AlphaGomoku's claims: Winning Value Decay,
Double Networks, and the curriculum against self-play from scratch.

    python -m experiments.studies.ablation run --config experiments/studies/ablation.toml \\
        --out runs/ablation9
    python -m experiments.studies.ablation status --out runs/ablation9
    python -m experiments.studies.ablation report --out runs/ablation9 --docs docs/ablation
    python -m experiments.studies.ablation report --docs docs/ablation  # committed data alone
    python -m experiments.studies.ablation save --out runs/ablation9 \\
        --state experiments/studies/ablation_state
    python -m experiments.studies.ablation run --config experiments/studies/ablation.toml \\
        --out runs/ablation9 --state experiments/studies/ablation_state  # a fresh clone

``run`` trains every arm x seed of the sweep file (``agz_jax.studies.ablation`` says
what it holds) and rates them, one run after the other in this process, seed
by seed (all arms of seed 0 first, so partial results cover every arm):

* a curriculum arm first runs ``experiments.training.curriculum`` (its stages, no
  self-play) in ``RUN/curriculum``, its process CPU time measured;
* the main job (``agz_jax.training.driver.train``, lockstep self-play) runs in
  ``RUN/selfplay`` from scratch, or from the curriculum's nets, in
  segments of ``snapshot_every`` iterations (resumed, extended to N);
  every iteration also logs its process CPU seconds (``time/cpu_seconds``);
* after each segment the best net is saved as a model directory
  ``RUN/snapshots/it<N>`` and listed in ``OUT/index.json`` with its self-play
  games (and the curriculum's pre-registered game equivalents) and CPU
  seconds so far;
* every match the snapshots call for (``agz_jax.studies.ablation.pairings``) is
  played and appended to ``OUT/games.jsonl`` (the rating ladder's ledger
  format, one JSON line a match, its seed derived from the evaluation seed
  and the two names), then the report is redrawn in ``OUT/report``.

Running the same command again skips what is done: finished segments,
snapshots and matches; a killed segment resumes from its last checkpoint, a
killed curriculum after its last stage or round, a killed match is played
again. A second runner on the same OUT is refused (a lock). Changing the
sweep file under an existing OUT is refused too, except for adding seeds.

``save --out OUT --state DIR`` keeps in DIR, a directory committed to git
(OUT is not), what the sweep needs to continue in a fresh clone: the sweep
file, the index of the finished runs, their matches, metrics and records, and
the snapshot nets that matches still to come will play (those of the seed in
progress). It may run while a runner works in OUT. An unfinished run is not
kept: ``run --state DIR`` on an OUT that holds no sweep yet restores DIR into
it, and that run starts again from its beginning (its matches played again).
A state of another sweep file (more seeds aside) is refused, and so is a
save that would replace a directory that is no state, or a state with
finished runs OUT lacks. DIR has OUT's layout: ``status`` and ``report`` take
it as ``--out``.

``report --out OUT --docs DIR`` draws the report of OUT's data
(``ablation.json``, the sweep file as run; ``index.json``; ``games.jsonl``)
into DIR: summary.csv, seeds.csv, claims.csv, summary.md, curves.png,
final.png and pool.md (every player's rating, ``experiments.play.ladder``'s
table). The data stays where it is (the committed report's is the committed
state's, ``experiments/studies/ablation_state``); summary.md names it. Without
``--out`` DIR's own data is read, where DIR holds some.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import sys
import time
from pathlib import Path

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.studies.ablation_matches import play_missing
from agz_jax.studies.ablation_store import (
    check_state,
    restore_state,
    run_dir,
    same_sweep,
    save_state,
    write_json,
)
from agz_jax.studies.ablation_train import curriculum_flags, train_run

DATA_FILES = ("ablation.json", "index.json", "games.jsonl")


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.ablation", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="train and rate every arm x seed (resumable)")
    r.add_argument("--config", type=Path, default=Path("experiments/studies/ablation.toml"),
                   help="the sweep file (default experiments/studies/ablation.toml)")
    r.add_argument("--out", type=Path, required=True, help="the sweep directory")
    r.add_argument("--state", type=Path, default=None,
                   help="a state directory written by save (committed): an --out that holds "
                        "no sweep yet starts from it")
    r.add_argument("--verbose", action="store_true", help="show every run's own output")
    v = sub.add_parser("save", help="keep what the sweep needs to continue in a directory "
                                    "(committed to git)")
    v.add_argument("--out", type=Path, required=True, help="the sweep directory")
    v.add_argument("--state", type=Path, required=True,
                   help="the state directory (replaced whole; e.g. "
                        "experiments/studies/ablation_state)")
    s = sub.add_parser("status", help="what is done and what is left")
    s.add_argument("--out", type=Path, required=True)
    d = sub.add_parser("report", help="draw the report (into --docs)")
    d.add_argument("--out", type=Path, default=None,
                   help="the sweep directory to take the data from (default: --docs's own)")
    d.add_argument("--docs", type=Path, required=True, help="where the report goes")
    return p.parse_args(argv)


# ------------------------------------------------------------------ bookkeeping


@contextlib.contextmanager
def lock(out: Path):
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"another ablation runner is working in {out}") from None
        yield


def check(plan, out: Path) -> None:
    """Before anything runs: the players parse, the curriculum builds exactly each
    curriculum arm's config from its flags (the main job is given its config:
    ``agz_jax.training.driver.train``), and OUT holds no other sweep."""
    from agz_jax.curriculum import command as curriculum
    from agz_jax.play import players

    ev = plan.evaluation
    for p in (ev.target, *ev.anchors, *ev.pool):
        players.parse_spec(p, "evaluation")
    for arm in plan.arms:
        for seed in plan.seeds:
            if arm.curriculum:
                want = plan.curriculum_config(arm, seed)
                got = curriculum.parse(curriculum_flags(plan, arm, seed, Path("x")))[1]
                if got != want:
                    raise ConfigError(f"arm {arm.name}: the curriculum's flags give another "
                                      f"{want.first_difference(got)}")
    same_sweep(plan, out / "ablation.json", f"{out} holds", "choose another --out")



def regenerate_command(data: Path, docs: Path) -> str:
    source = "" if data == docs else f"--out {data} "
    return f"python -m experiments.studies.ablation report {source}--docs {docs}"


def render(data: Path, target: Path, regenerate: str) -> dict:
    """The report of the data in ``data`` (ablation.json, index.json,
    games.jsonl), written into ``target`` (its summary names ``data``'s
    place relative to ``target``)."""
    from agz_jax.base import rating
    from agz_jax.studies import ablation, ablation_report
    from agz_jax.studies.ladder_report import table
    from agz_jax.studies.ledger import read_ledger

    missing = [f for f in DATA_FILES[:2] if not (data / f).exists()]
    if missing:
        raise ConfigError(f"{data} holds no ablation data ({', '.join(missing)} missing): "
                          "give --out SWEEP_DIR, or run the sweep first")
    plan = ablation.parse(json.loads((data / "ablation.json").read_text()),
                          str(data / "ablation.json"))
    index = json.loads((data / "index.json").read_text())
    ledger = data / "games.jsonl"
    lines = read_ledger(ledger)
    where = Path(os.path.relpath(data, target)) if data.resolve() != target.resolve() else None
    result = ablation_report.write_report(plan, index, lines, target, regenerate, where)
    if lines:
        fit = rating.fit(rating.Match(x["a"], x["b"], x["wins"], x["draws"], x["losses"])
                         for x in lines)
        (target / "pool.md").write_text(table(fit, lines, ledger, where))
    return result


def redraw(plan, out: Path, index: dict, state: dict) -> None:
    """The report in OUT/report (the runner's view of the sweep so far), when
    anything was trained or played since it was last drawn."""
    if not state.pop("dirty", False) and (out / "report" / "summary.md").exists():
        return
    render(out, out / "report", f"python -m experiments.studies.ablation report --out {out} "
                                "--docs DIR")


def code_version() -> str:
    """The commit this code is (a ``COMMIT`` file beside ``experiments/``, as a
    ``git archive`` copy run in the background has, else ``git rev-parse``),
    ``+dirty`` when src/ or experiments/ differ from it, ``unknown`` without git."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    if (root / "COMMIT").exists():
        return (root / "COMMIT").read_text().strip()
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src",
                                "experiments"], check=True, capture_output=True,
                               text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def cmd_run(args) -> int:
    from agz_jax.base.cache import enable_compilation_cache
    from agz_jax.studies import ablation, ablation_report
    from agz_jax.studies.ledger import check_board, read_ledger

    plan = ablation.load(args.config)
    not_a_file(args.out, "--out")
    check(plan, args.out)
    if args.state is not None:
        check_state(plan, args.state)

    def say(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)

    with lock(args.out):
        if args.state is not None:
            restore_state(plan, args.state, args.out, say)
        write_json(args.out / "ablation.json", plan.source)
        index = ablation_report.read_json(args.out / "index.json", {"name": plan.name, "runs": []})
        version = code_version()
        if version not in index.setdefault("code", []):
            index["code"].append(version)
        lines = read_ledger(args.out / "games.jsonl")
        base = get_preset(plan.preset).replace(**plan.common)
        check_board(lines, args.out / "games.jsonl", base.game.size, base.game.rule)
        state = {"lines": lines}
        enable_compilation_cache()
        t0 = time.perf_counter()
        say(f"ablation {plan.name} in {args.out}: {len(plan.arms)} arms x "
            f"{len(plan.seeds)} seeds, {plan.games_per_arm} self-play games each")
        write_json(args.out / "index.json", index)
        play_missing(plan, args.out, index, state, args.verbose, say)
        for seed in plan.seeds:
            for arm in plan.arms:
                train_run(plan, arm, seed, args.out, index, state, args.verbose, say)
            play_missing(plan, args.out, index, state, args.verbose, say)
            redraw(plan, args.out, index, state)
        redraw(plan, args.out, index, state)
        say(f"all done ({time.perf_counter() - t0:.0f} s this session); report in "
            f"{args.out / 'report'}")
    return 0


def cmd_status(args) -> int:
    from agz_jax.studies import ablation, ablation_report, sweep
    from agz_jax.studies.ledger import read_ledger

    if not (args.out / "ablation.json").exists():
        raise ConfigError(f"{args.out} holds no ablation sweep (no ablation.json)")
    plan = ablation.parse(json.loads((args.out / "ablation.json").read_text()))
    index = ablation_report.read_json(args.out / "index.json", {"runs": []})
    lines = read_ledger(args.out / "games.jsonl")
    runs = {(r["arm"], r["seed"]): r for r in index["runs"]}
    done_walls = []
    print(f"{plan.name}: {len(plan.arms)} arms x {len(plan.seeds)} seeds in {args.out}")
    for seed in plan.seeds:
        for arm in plan.arms:
            r = runs.get((arm.name, seed))
            step = len(sweep.read_history(run_dir(args.out, arm.name, seed) / "selfplay"))
            snaps = len(r["snapshots"]) if r else 0
            state = "done" if r and r["done"] else ("running" if r else "waiting")
            if r and r["done"]:
                done_walls.append(r["wall_s"])
            print(f"  {arm.name:>14} seed {seed}: {state}, iteration {step}/"
                  f"{plan.iterations(arm)}, snapshots {snaps}/{len(plan.snapshots(arm))}"
                  + (f", {r['wall_s'] / 3600:.2f} h" if r else ""))
    wanted = ablation.pairings(plan, index)
    have = {frozenset((x["a"], x["b"])) for x in lines}
    print(f"matches: {len(lines)} played ({sum(x['games'] for x in lines)} games), "
          f"{sum(frozenset((a, b)) not in have for a, b, _ in wanted)} of those called for so "
          "far still to play")
    left = len(plan.arms) * len(plan.seeds) - len(done_walls)
    if done_walls and left:
        mean = sum(done_walls) / len(done_walls)
        print(f"{len(done_walls)} runs done at {mean / 3600:.2f} h each (wall, with their "
              f"matches): about {left * mean / 3600:.1f} h left for {left} runs")
    return 0


def cmd_save(args) -> int:
    manifest = save_state(args.out, args.state)
    print(f"saved {args.out} into {args.state}: {len(manifest['finished'])} finished runs, "
          f"{manifest['matches']} matches, {len(manifest['nets'])} nets, "
          f"{manifest['bytes'] / 1e6:.2f} MB"
          + (f"; not kept: {', '.join(manifest['not_kept'])}, with "
             f"{manifest['matches_not_kept']} matches" if manifest["not_kept"] else ""))
    return 0


def not_a_file(path: Path, flag: str) -> None:
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{flag} {path} is a file, not a directory; give a directory")


def cmd_report(args) -> int:
    not_a_file(args.docs, "--docs")
    if args.out is not None:
        not_a_file(args.out, "--out")
        if not (args.out / "ablation.json").exists():
            raise ConfigError(f"{args.out} holds no ablation sweep (no ablation.json); give "
                              "the sweep directory of experiments.studies.ablation run")
    else:
        missing = [f for f in DATA_FILES[:2] if not (args.docs / f).exists()]
        if missing:  # before --docs is made
            raise ConfigError(f"{args.docs} holds no ablation data ({', '.join(missing)} "
                              "missing): give --out SWEEP_DIR, or run the sweep first")
    args.docs.mkdir(parents=True, exist_ok=True)
    data = args.docs if args.out is None else args.out
    result = render(data, args.docs, regenerate_command(data, args.docs))
    print((args.docs / "summary.md").read_text())
    print(f"report in {args.docs}" + (" (PARTIAL)" if result["partial"] else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
        return {"run": cmd_run, "status": cmd_status, "save": cmd_save,
                "report": cmd_report}[args.command](args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # argparse: usage error (already printed) or --help
        return int(e.code or 0)


if __name__ == "__main__":
    sys.exit(main())
