"""Supervised move prediction (Maddison et al., ICLR 2015): a grid of nets on the same games.

    python -m experiments.studies.movepred --preset smoke --out runs/movepred_smoke
    python -m experiments.studies.movepred --preset default --out runs/movepred \\
        --grid net.blocks=1,2,3 --grid net.symmetric=false,true
    python -m experiments.studies.movepred --preset rank --out runs/movepred_rank
    python -m experiments.studies.movepred --preset default --out runs/mp_psq \\
        --set movepred.records=runs/s/games --grid features.history=0,2

Every grid point trains a fresh net on the SAME games (mentor games made once
and cached in OUT/data/, or the ``.psq`` records of ``movepred.records``),
holds out the same whole games, and is judged by its held-out top-1..10
accuracy, accuracy by move number, policy cross-entropy and value MSE, and the
score of the raw net (policy argmax, no search) against ``movepred.opponent``.

``--grid FIELD=V1,V2,...`` is an axis (any config field: ``net.*``,
``features.*``, ``train.*``, ``seed``, or ``movepred.*`` except the fields that
make the games); ``--set FIELD=VALUE`` a fixed override (its value is taken
whole: ``--set movepred.levels=0,2``). Every point's config is checked before
anything compiles. A preset without ``--grid`` runs its own grid.

Written in OUT: ``settings/<setting>/`` (``record.json``, ``metrics.jsonl``
and the nets as a model directory: ``--a policy:OUT/settings/<setting>`` in
``experiments.play.arena``), ``table.csv``, ``table.md``, ``by_move.csv``,
``topn.png`` (Fig. 1) and ``by_move.png``. Running the command again skips
finished settings.

With rank conditioning (``features.ranks`` = the number of ``movepred.levels``;
the ``rank`` preset), a move's rank label is the index of the mentor level
that played it, and the raw net plays the opponent once asked to play at each
rank: the table shows the highest and the lowest.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import Config, ConfigError, GameConfig, NetConfig, TrainConfig
from agz_jax.studies.movepred import MovePredConfig, check
from agz_jax.training.cli import INTERRUPTED, grid_points, parse_assignment

_SMOKE = get_preset("smoke").replace(**{"game.size": 9, "train.batch_size": 64,
                                        "train.learning_rate": 2e-2})
# (config, movepred config, the preset's own grid axes)
PRESETS: dict[str, tuple[Config, MovePredConfig, list[tuple[str, list]]]] = {
    # A few minutes on 2 CPU cores: tiny nets on 9x9, level-0 mentor games.
    "smoke": (_SMOKE,
              MovePredConfig(levels=(0,), num_games=64, steps=150, arena_games=20,
                             opponent="random"),
              [("net.blocks", [0, 1]), ("net.symmetric", [False, True])]),
    # Real runs: the paper's net width on 9x9, level-1 mentor games, judged against
    # the level-0 mentor.
    "default": (Config(game=GameConfig(size=9), net=NetConfig(filters=32, blocks=2),
                       train=TrainConfig(batch_size=128, learning_rate=2e-2)),
                MovePredConfig(levels=(1,), num_games=1024, steps=2000, log_every=500,
                               arena_games=100, opponent="mentor:0"),
                [("net.blocks", [1, 2, 3]), ("net.symmetric", [False, True])]),
    # Rank conditioning: games of mentor levels 0 and 2 (and of each against the
    # other), the level as a rank plane; the net asked to play at each rank.
    "rank": (Config(game=GameConfig(size=9), net=NetConfig(filters=32, blocks=2),
                    train=TrainConfig(batch_size=128, learning_rate=2e-2)).replace(
                        **{"features.ranks": 2}),
             MovePredConfig(levels=(0, 2), num_games=512, steps=1500, log_every=500,
                            arena_games=200, opponent="mentor:0"),
             []),
}

# The games are shared by every grid point, so these cannot be axes.
DATA_FIELDS = tuple(f"movepred.{f}" for f in MovePredConfig().data_fields) + (
    "game.size", "game.rule")


def apply(config: Config, mp: MovePredConfig, overrides: dict) -> tuple[Config, MovePredConfig]:
    """Dotted overrides of the pair (``movepred.*`` go to the MovePredConfig)."""
    ours = {k.split(".", 1)[1]: v for k, v in overrides.items() if k.startswith("movepred.")}
    theirs = {k: v for k, v in overrides.items() if not k.startswith("movepred.")}
    try:
        config = config.replace(**theirs) if theirs else config
        mp = mp.replace(**ours) if ours else mp
    except TypeError as e:  # a value of the wrong kind reached a dataclass
        raise ConfigError(str(e)) from None
    return config, mp


def label(setting: tuple) -> str:
    return " ".join(f"{k.split('.')[-1]}={v}" for k, v in setting) or "base"


def slug(setting: tuple) -> str:
    return "__".join(f"{k}={v}" for k, v in setting) or "base"


def check_records(directory: Path, size: int) -> None:
    """``movepred.records`` read (not replayed: nothing compiles) before anything
    is written; ConfigError naming the field and the way out."""
    from agz_jax.game import records
    from agz_jax.studies.movepred_data import read_records

    try:
        read_records(directory, size)
    except records.RecordError as e:
        raise ConfigError(f"movepred.records: {e}; --set movepred.records=DIR, a directory of "
                          f"{size}x{size} .psq records (e.g. experiments.play.arena --out DIR), or "
                          "--set game.size=N for records of another board") from None


def check_out(out: Path) -> None:
    """ConfigError unless ``out`` is new, an empty directory, or this tool's own
    (its ``movepred.json``, written before anything runs: a stopped run continues)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory; choose a new --out")
    if out.is_dir() and any(out.iterdir()) and not (out / "movepred.json").is_file():
        raise ConfigError(f"--out {out} holds other files and is not a movepred experiment "
                          "(no movepred.json); choose a new or empty --out")


def parse(argv: list[str]):
    """Everything checked, nothing compiled: (args, base pair, [(setting, config, mp)])."""
    p = argparse.ArgumentParser(prog="python -m experiments.studies.movepred", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="smoke", help=f"one of {sorted(PRESETS)} (smoke)")
    p.add_argument("--out", type=Path, required=True, help="experiment directory")
    p.add_argument("--grid", action="append", default=[], metavar="FIELD=V1,V2,...",
                   help="a grid axis (repeatable); replaces the preset's grid")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="a fixed override of every grid point (repeatable)")
    args = p.parse_args(argv)
    if args.preset not in PRESETS:
        raise ConfigError(f"unknown preset {args.preset!r}; choose one of {sorted(PRESETS)}")
    check_out(args.out)
    config, mp, axes = PRESETS[args.preset]
    fixed = dict(parse_assignment(s, "--set", split=False) for s in args.set)
    fixed = {k: v[0] for k, v in fixed.items()}
    if args.grid:
        axes = [parse_assignment(g, "--grid", split=True) for g in args.grid]
    keys = [k for k, _ in axes]
    for k in keys:
        if keys.count(k) > 1 or k in fixed:
            raise ConfigError(f"--grid {k} is given twice (or also in --set)")
        if k in DATA_FIELDS:
            raise ConfigError(f"--grid {k}: the games are shared by every grid point, so "
                              f"{k} can only be --set")
    config, mp = apply(config, mp, fixed)
    points = []
    for s in grid_points(axes):
        c, m = apply(config, mp, dict(s))
        check(c, m)
        points.append((s, c, m))
    return args, (config, mp), points


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args, (config, mp), points = parse(argv)
        for s, c, m in points:
            done = args.out / "settings" / slug(s) / "record.json"
            if done.exists():
                rec = json.loads(done.read_text())
                if (Config.from_dict(rec["config"]) != c
                        or MovePredConfig(**rec["movepred"]) != m):
                    raise ConfigError(f"{done.parent} was run with another config; choose "
                                      "another --out")
        if mp.records and not (args.out / "data" / "games.json").exists():
            check_records(Path(mp.records), config.game.size)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # argparse: usage error (already printed) or --help
        return int(e.code or 0)

    command = shlex.join(["python", "-m", "experiments.studies.movepred", *argv])
    try:
        return run(args, config, mp, points, command)
    except KeyboardInterrupt:
        print(f"interrupted: the finished settings and the games made are kept in {args.out} "
              f"(the setting in progress is lost); continue with the same command: {command}",
              file=sys.stderr)
        return INTERRUPTED


def run(args, config: Config, mp: MovePredConfig, points: list, command: str) -> int:
    """The experiment after its command line checked (KeyboardInterrupt on Ctrl-C)."""
    from agz_jax.base.cache import enable_compilation_cache

    enable_compilation_cache()
    from agz_jax.game import records
    from agz_jax.studies import movepred, movepred_report

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "movepred.json").write_text(json.dumps({
        "command": command,
        "preset": args.preset, "base": config.to_dict(), "movepred": mp.to_dict(),
        "settings": [label(s) for s, _, _ in points]}, indent=2))
    print(f"movepred {args.out}: {len(points)} settings, preset {args.preset}", flush=True)
    t0 = time.perf_counter()
    try:
        games = movepred.load_or_make_games(config, mp, args.out / "data")
    except (ConfigError, records.RecordError) as e:  # a record's illegal move: on replay
        print(f"error: {e}", file=sys.stderr)
        return 2
    recs = []
    for i, (s, c, m) in enumerate(points, 1):
        d = args.out / "settings" / slug(s)
        name = f"[{i}/{len(points)}] {label(s)}"
        if (d / "record.json").exists():
            print(f"{name}: done before, skipped", flush=True)
            recs.append(json.loads((d / "record.json").read_text()))
            continue
        print(f"{name}:", flush=True)
        rec = movepred.run_setting(c, m, games, d)
        recs.append(rec)
        held = rec["heldout"]
        shown = "".join(f", score {x['score']:.3f} at rank {x['rank']}"
                        for x in rec["strength"])
        print(f"{name}: top1 {held['top1']:.3f}, top5 {held['top5']:.3f}{shown}, "
              f"{rec['time']['total_s']:.0f} s", flush=True)
    labels = [label(s) for s, _, _ in points]
    rows = movepred_report.table_rows(labels, recs)
    written = movepred_report.write_tables(rows, recs, args.out)
    written += movepred_report.plot(labels, recs, args.out)
    print()
    print((args.out / "table.md").read_text())
    print(f"wall {time.perf_counter() - t0:.0f} s; written: "
          + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
