"""Move prediction in Go (Maddison et al., ICLR 2015): train nets of several
depths on a data set of records and measure top-n accuracy on held-out games.

    python -m experiments.go.movepred --preset smoke --records runs/go-records9 \
        --out runs/go-mp-smoke
    python -m experiments.go.movepred --preset cpu --data runs/go-data9 --out runs/go-mp-cpu
    python -m experiments.go.movepred --preset cpu --data runs/go-data9 --out runs/go-mp-cpu \
        --resume

``--data`` is a data set of ``experiments.go.dataset``; ``--records`` builds one
in ``OUT/data`` first. The games are split once (whole games held out), and one
net per depth of ``--depths`` is trained (``OUT/depth-D``: the model,
``history.json``, ``record.json``); a depth whose ``record.json`` exists is
not trained again, and ``--resume`` continues an interrupted one from its
checkpoint. Then ``OUT/table.md`` (the paper's depth table, Section 5.2, beside ours),
``OUT/results.json``, ``OUT/topn.png`` (Figure 1: the probability that the
record's move is among the net's n best) and ``OUT/by_move.png``.

Presets (data, not code paths): ``smoke`` (one 3-layer net of 16 filters, 20
steps), ``cpu`` (depths 3, 6 and 12, 32 filters, Adam, 9x9) and ``paper`` (19x19
KGS-scale: depths 3, 6, 10, 12 of 128 filters, the 9 rank planes, SGD at 0.128,
batch 128, about 25 epochs of 27.4M positions: not for this machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from agz_jax.base.cache import enable_compilation_cache
from agz_jax.config.schema import ConfigError
from agz_jax.go import dataset, movepred, play, sgf
from agz_jax.go import net as net_lib

PRESETS = {
    "smoke": {"size": 9, "depths": (3,), "filters": 16,
              "train": {"steps": 20, "batch_size": 32, "optimizer": "adam",
                        "learning_rate": 1e-3, "held_out": 0.2, "log_every": 10}},
    "cpu": {"size": 9, "depths": (3, 6, 12), "filters": 32,
            "train": {"steps": 6000, "batch_size": 128, "optimizer": "adam",
                      "learning_rate": 1e-3, "held_out": 0.1, "log_every": 500,
                      "eval_positions": 4000}},
    "paper": {"size": 19, "depths": (3, 6, 10, 12), "filters": 128,
              "train": {"steps": 5_350_000, "batch_size": 128, "optimizer": "sgd",
                        "learning_rate": 0.128, "held_out": 0.068, "log_every": 10_000,
                        "eval_positions": 20_000}},
}

# Maddison et al., the depth table of Section 5.2 (19x19 KGS):
# (layers, filters) -> (% accuracy, % wins vs GnuGo 3.8 level 10)
PAPER = {(3, 16): (37.5, "3.4 ± 1.1"), (3, 128): (48.0, "61.8 ± 2.6"),
         (6, 128): (51.2, "84.4 ± 1.9"), (10, 128): (54.5, "94.7 ± 1.2"),
         (12, 128): (55.2, "97.2 ± 0.9")}


def paper_row(layers: int, filters: int) -> str:
    """The paper's top-1 % for a net of ``layers``: of the same width when the
    paper has one (3 layers of 16 filters, or 128), else of its 128-filter net
    of that depth, with the width said; '' for a depth it did not train."""
    if (layers, filters) in PAPER:
        return f"{PAPER[layers, filters][0]}"
    if (layers, 128) in PAPER:
        return f"{PAPER[layers, 128][0]} (128 filters)"
    return ""


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m experiments.go.movepred",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="smoke")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", type=Path, help="a data set of experiments.go.dataset")
    src.add_argument("--records", type=Path, help="SGF records (the data set is built in OUT/data)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--depths", default=None, help="comma-separated layer counts")
    p.add_argument("--filters", type=int, default=None)
    p.add_argument("--symmetric", action="store_true", help="weight-symmetric filters")
    p.add_argument("--no-position-bias", action="store_true")
    for f in dataclasses.fields(movepred.TrainConfig):
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, default=None,
                       type=type(f.default) if f.name != "optimizer" else str)
    p.add_argument("--resume", action="store_true")
    args = p.parse_args(argv)
    preset = PRESETS[args.preset]
    try:
        args.depths = preset["depths"] if args.depths is None \
            else tuple(int(d) for d in args.depths.split(","))
    except ValueError:
        p.error(f"--depths must be comma-separated integers (such as 3,6), got {args.depths!r}")
    if args.filters is not None and args.filters < 1:
        p.error(f"--filters must be >= 1, got {args.filters}")
    args.filters = preset["filters"] if args.filters is None else args.filters
    problem = play.out_dir_problem(args.out)
    if problem:
        p.error(problem)
    overrides = {f.name: getattr(args, f.name) for f in dataclasses.fields(movepred.TrainConfig)
                 if getattr(args, f.name) is not None}
    try:
        args.train = movepred.TrainConfig(**{**preset["train"], **overrides})
        args.nets = [net_lib.NetConfig(size=preset["size"], layers=d, filters=args.filters,
                                       symmetric=args.symmetric,
                                       position_bias=not args.no_position_bias)
                     for d in args.depths]
    except (ConfigError, ValueError) as e:
        p.error(str(e))
    return args


def net_dir_problem(d: Path, config, tc, resume: bool) -> str | None:
    """What stops training ``config`` in ``d`` (None if nothing): a finished
    net of other settings, or an interrupted run's checkpoint without
    ``--resume``, or with settings other than its own."""
    settings = {"net": config.to_dict(), "train": tc.to_dict()}
    if (d / "record.json").exists():
        rec = json.loads((d / "record.json").read_text())
        if rec["net"] == settings["net"] and rec["train"] == settings["train"]:
            return None
        return f"{d} holds a net of other settings; choose another --out"
    if not (d / "checkpoint.msgpack").exists():
        return None
    if not resume:
        return (f"{d} holds the checkpoint of an interrupted run: pass --resume to continue "
                "it, or pick a new --out")
    if not (d / "settings.json").exists():
        return None
    saved = json.loads((d / "settings.json").read_text())
    for part in ("net", "train"):
        for k, v in settings[part].items():
            if saved.get(part, {}).get(k) != v:
                return (f"--resume: {d} was trained with {k} {saved.get(part, {}).get(k)!r}, "
                        f"now {v!r}: give the same settings, or pick a new --out")
    return None


def main(argv=None) -> int:
    args = parse_args(argv)
    say = lambda s: print(s, flush=True)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    try:
        if args.records is not None:
            dataset.build(args.records, out / "data", say=say)
            data = dataset.load(out / "data")
        else:
            data = dataset.load(args.data)
    except (sgf.SgfError, dataset.DatasetError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    channels = len(data.meta["channels"])
    if data.size != args.nets[0].size:
        say(f"note: the data set is {data.size}x{data.size}; the preset's "
            f"{args.nets[0].size}x{args.nets[0].size} is replaced")
    nets = [dataclasses.replace(c, size=data.size, channels=channels) for c in args.nets]
    tc = args.train
    train_mask, held_mask = movepred.split(data, tc.held_out, tc.split_seed)
    say(f"{len(data.action)} positions of {len(data.sources)} games: "
        f"{int(train_mask.sum())} for training, {int(held_mask.sum())} held out "
        f"({len(set(data.game[held_mask].tolist()))} whole games)")
    for config in nets:  # every net's directory checked before any is trained
        problem = net_dir_problem(out / f"depth-{config.layers}", config, tc, args.resume)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    records = []
    for config in nets:
        d = out / f"depth-{config.layers}"
        if (d / "record.json").exists():
            rec = json.loads((d / "record.json").read_text())
            say(f"depth {config.layers}: done before ({d})")
            records.append(rec)
            continue
        d.mkdir(parents=True, exist_ok=True)
        (d / "settings.json").write_text(json.dumps(
            {"net": config.to_dict(), "train": tc.to_dict()}, indent=1))
        say(f"depth {config.layers}: {config.filters} filters, "
            f"{net_lib.GoNet(config).num_params(net_lib.init(config)):,} parameters")

        def log(r, layers=config.layers):
            say(f"  depth {layers} step {r['step']}: loss {r['train/loss']:.3f}, "
                f"train top-1 {r['train/top1']:.3f}"
                + (f", held-out top-1 {r['heldout/top1']:.3f}" if "heldout/top1" in r else "")
                + f" ({r['train_s']:.0f} s)")

        params, history = movepred.train(config, tc, data, train_mask, d, log, args.resume)
        held = movepred.evaluate(config, params, data.select(held_mask))
        rec = {"net": config.to_dict(), "train": tc.to_dict(),
               "params": net_lib.GoNet(config).num_params(params),
               "train_positions": int(train_mask.sum()), "heldout": held,
               "final_train": history[-1], "data": str(args.data or out / "data")}
        net_lib.save(d, config, params, {"record": {k: rec[k] for k in ("params", "train")},
                                         "heldout": {k: held[k] for k in
                                                     ("top1", "top5", "top10")}})
        (d / "record.json").write_text(json.dumps(rec, indent=2))
        records.append(rec)
        say(f"depth {config.layers}: held-out top-1 {held['top1']:.3f}, top-5 "
            f"{held['top5']:.3f}, top-10 {held['top10']:.3f}")
    write_report(records, out, data)
    say(f"wrote {out / 'table.md'}, {out / 'topn.png'}")
    return 0


def table(records: list[dict], data: dataset.Data) -> str:
    """The depth table, ours beside the paper's (Section 5.2)."""
    lines = ["| depth | filters | params | top-1 % | top-5 % | top-10 % | held-out CE | "
             "train top-1 % (last log) | steps x batch | train s | paper top-1 % (19x19 KGS) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in records:
        n, h, t = r["net"], r["heldout"], r["train"]
        paper = paper_row(n["layers"], n["filters"])
        lines.append(f"| {n['layers']} | {n['filters']} | {r['params']:,} | "
                     f"{100 * h['top1']:.1f} | {100 * h['top5']:.1f} | {100 * h['top10']:.1f} | "
                     f"{h['policy_ce']:.3f} | {100 * r['final_train']['train/top1']:.1f} | "
                     f"{t['steps']} x {t['batch_size']} | {r['final_train']['train_s']:.0f} | "
                     f"{paper} |")
    r = records[0]
    lines += ["", f"Held out: {r['heldout']['games']} whole games, {r['heldout']['positions']} "
              f"positions; trained on {r['train_positions']} positions of the other games "
              f"({data.size}x{data.size}, {len(data.meta['channels'])} input planes). "
              "Accuracy: the record's move is among the net's n most probable legal points."]
    return "\n".join(lines) + "\n"


def write_report(records: list[dict], out: Path, data: dataset.Data) -> None:
    from agz_jax.studies.movepred_report import plot

    labels = [f"{r['net']['layers']} layers, {r['net']['filters']} filters" for r in records]
    (out / "table.md").write_text(table(records, data))
    (out / "results.json").write_text(json.dumps(records, indent=2))
    plot(labels, records, out)


if __name__ == "__main__":
    enable_compilation_cache()
    sys.exit(main())
