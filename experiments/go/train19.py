"""Move prediction on 19x19 human games: train a net on a games store
(``experiments.go.import_records``), the planes made in each training step
(``agz_jax.go.train19``), held-out top-1 on a fixed sample of another split.

    python -m experiments.go.train19 --games data/go19 --out runs/go19-6x64 \
        --layers 6 --filters 64 --batch-size 64 --steps 20000
    python -m experiments.go.train19 --games data/go19 --out runs/go19-6x64 \
        --layers 6 --filters 64 --batch-size 64 --steps 20000 --resume

The net defaults to the paper's 12 layers of 128 filters (its Table 3: 3, 6,
10, 12 layers; 16 or 128 filters). The ladder plane is zero (``--ladder none``,
the default: reading ladders costs about 1 s a batch on a CPU); there are no
rank planes. ``OUT``: ``settings.json``, ``checkpoint.msgpack`` and
``history.json`` (one record per evaluation), and at the end the model
(``go.net.save``) and ``record.json``. ``--resume`` continues an interrupted
run with the same settings (``--steps`` may grow).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agz_jax.base.cache import enable_compilation_cache
from agz_jax.go import games as games_lib
from agz_jax.go import net as net_lib
from agz_jax.go import play, train19


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m experiments.go.train19",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--games", type=Path, required=True,
                   help="a games store (experiments.go.import_records)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--train-split", default="train", choices=games_lib.SPLITS)
    p.add_argument("--eval-split", default="valid", choices=games_lib.SPLITS)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--filters", type=int, default=128)
    d = train19.Config()
    for name, typ in (("steps", int), ("batch_size", int), ("per_game", int),
                      ("optimizer", str), ("learning_rate", float), ("eval_every", int),
                      ("eval_positions", int), ("eval_seed", int), ("seed", int),
                      ("ladder", str)):
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=typ,
                       default=getattr(d, name))
    p.add_argument("--resume", action="store_true")
    p.add_argument("--seconds", type=float, default=None,
                   help="stop after this many seconds of training (evaluations not "
                        "counted), with an evaluation and a checkpoint: a time-boxed "
                        "window; --resume continues")
    args = p.parse_args(argv)
    problem = play.out_dir_problem(args.out)
    if problem:
        p.error(problem)
    try:
        args.cfg = train19.Config(**{k: getattr(args, k) for k in d.to_dict()})
        args.net = train19.net_config(args.layers, args.filters)
    except ValueError as e:
        p.error(str(e))
    return args


def settings_problem(out: Path, settings: dict, resume: bool) -> str | None:
    """What stops training into ``out`` (None: nothing)."""
    if not (out / "checkpoint.msgpack").exists():
        return None
    if not resume:
        return (f"{out} holds a checkpoint: pass --resume to continue it, or pick a new --out")
    if not (out / "settings.json").exists():
        return None
    saved = json.loads((out / "settings.json").read_text())
    changed = [(k, saved.get(part, {}).get(k), v) for part, values in settings.items()
               for k, v in values.items() if k != "steps" and saved.get(part, {}).get(k) != v]
    if not changed:
        return None
    k, was, now = changed[0]
    return (f"--resume: {out} was trained with {k} {was!r}, now {now!r}: give the same "
            "settings (only --steps may change), or pick a new --out")


def main(argv=None) -> int:
    args = parse_args(argv)
    say = lambda s: print(s, flush=True)
    out, cfg, config = args.out, args.cfg, args.net
    settings = {"net": config.to_dict(), "train": cfg.to_dict(),
                "data": {"games": str(args.games), "train_split": args.train_split,
                         "eval_split": args.eval_split}}
    problem = settings_problem(out, settings, args.resume)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        s, length, n_train = train19.load_store(args.games, args.train_split)
        held, held_len, n_held = train19.load_store(args.games, args.eval_split)
    except (games_lib.GamesError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    (out / "settings.json").write_text(json.dumps(settings, indent=1))
    n_params = train19.params_count(config)
    say(f"{n_train:,} {args.train_split} games ({int(s.examples.shape[0]):,} positions, "
        f"longest {length} plies); held out: {cfg.eval_positions} positions drawn from "
        f"{n_held:,} {args.eval_split} games (seed {cfg.eval_seed})")
    say(f"net: {config.layers} layers x {config.filters} filters, {n_params:,} parameters, "
        f"{config.channels} planes; ladder plane: "
        + ("zero (not computed)" if cfg.ladder == "none" else f"read ({cfg.ladder})")
        + "; no rank planes")
    ev = train19.eval_set(held, held_len, cfg.eval_positions, cfg.eval_seed, cfg.ladder)

    def log(r):
        say(f"step {r['step']} ({r['positions']:,} positions): loss {r['train/loss']:.3f}, "
            f"train top-1 {r['train/top1']:.3f}, held-out top-1 {r['heldout/top1']:.3f} "
            f"[{r['heldout/top1_lo']:.3f}, {r['heldout/top1_hi']:.3f}] of "
            f"{r['heldout/positions']}, top-5 {r['heldout/top5']:.3f}, "
            f"CE {r['heldout/policy_ce']:.3f}; {r['steps_per_s']:.3f} steps/s, "
            f"{r['train_s']:.0f} s train, {r['cpu_s']:.0f} s CPU")

    params, history = train19.train(config, cfg, s, length, ev, out, log, args.resume,
                                    seconds=args.seconds)
    last = history[-1]
    rec = {"net": config.to_dict(), "train": cfg.to_dict(), "params": n_params,
           "data": settings["data"], "final": last,
           "paper_top1": train19.PAPER_TOP1.get((config.layers, config.filters))}
    net_lib.save(out, config, params, {"heldout": {"top1": last.get("heldout/top1")}})
    (out / "record.json").write_text(json.dumps(rec, indent=2))
    say(f"done: {last['step']} steps, held-out top-1 {last['heldout/top1']:.3f}; wrote {out}")
    return 0


if __name__ == "__main__":
    enable_compilation_cache()
    sys.exit(main())
