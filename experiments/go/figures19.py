"""Maddison et al.'s Figures 1 and 2 at 19x19: how often the move played is
among a net's n best (n = 1..10), and top-1 accuracy by move number, for one or
more Go nets on the same held-out positions of a games store.

    python -m experiments.go.figures19 --games data/go19 --model models/go19 \
        --model RUN --split test --positions 5000 --out docs/go19_figures

``--model`` takes a model directory (``models/go19``, or an
``experiments.go.train19`` run folder) or a name in ``models/``; every net must
read its planes as the others do (the ladder plane zero, as ``train19`` trains
them). The positions: ``--positions`` drawn from ``--split``'s games with
``--seed`` (``go.train19.eval_set``: one position a drawn game, no symmetry).
``OUT``: ``figures.json`` (per net: top-n, accuracy and count per bin of
``--bin`` plies, a bin of fewer than ``--min-count`` positions left out, top-1
with its 95% interval), ``topn.png`` and ``by_move.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from agz_jax.base.cache import enable_compilation_cache
from agz_jax.go import games as games_lib
from agz_jax.go import gtp_engine, train19
from agz_jax.go import net as net_lib
from agz_jax.training import supervised


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.go.figures19",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--games", type=Path, required=True, help="a games store")
    p.add_argument("--model", action="append", required=True,
                   help="a Go model directory or a name in models/ (repeat for more nets)")
    p.add_argument("--split", default="test", choices=games_lib.SPLITS)
    p.add_argument("--positions", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bin", type=int, default=25, help="plies a bin of Figure 2")
    p.add_argument("--min-count", type=int, default=50,
                   help="a bin with fewer positions is left out of Figure 2")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.positions < 1 or args.bin < 1:
        p.error("--positions and --bin must be positive")
    try:
        nets = []
        for m in args.model:
            path = gtp_engine.resolve_model(m)
            config, params, meta = net_lib.load(path)
            if config.size != train19.SIZE or gtp_engine.ladder_plane_read(path, meta):
                raise ValueError(f"{path}: a {config.size}x{config.size} net"
                                 + (" that reads the ladder plane" if config.size == 19 else "")
                                 + ": this draws 19x19 planes with the ladder plane zero")
            nets.append((str(m), config, params))
        store, length, n_games = train19.load_store(args.games, args.split)
    except (OSError, ValueError, games_lib.GamesError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    ev = train19.eval_set(store, length, args.positions, args.seed)
    out: dict = {"games": str(args.games), "split": args.split, "positions": len(ev),
                 "games_drawn_from": n_games, "seed": args.seed, "nets": {}}
    records = []
    for label, config, params in nets:
        rank, ce = train19.ranks(config, params, ev)
        metrics = train19.summary(rank, ce)
        by_move = supervised.per_move_number_accuracy(rank < 1, ev.ply, args.bin)
        by_move["accuracy"] = np.where(by_move["count"] < args.min_count, np.nan,
                                       by_move["accuracy"])
        rec = {"layers": config.layers, "filters": config.filters,
               **{k: metrics[k] for k in ("top1", "top1_lo", "top1_hi", "policy_ce")},
               "topn": [float(np.mean(rank < k)) for k in range(1, 11)],
               "by_move": {k: [None if isinstance(v, float) and np.isnan(v) else v
                               for v in np.asarray(x).tolist()] for k, x in by_move.items()}}
        out["nets"][label] = rec
        records.append({"heldout": rec})
        print(f"{label}: {config.layers} x {config.filters}, top-1 {100 * rec['top1']:.1f}% "
              f"[{100 * rec['top1_lo']:.1f}, {100 * rec['top1_hi']:.1f}], "
              f"top-5 {100 * rec['topn'][4]:.1f}%, CE {rec['policy_ce']:.3f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "figures.json").write_text(json.dumps(out, indent=1))
    from agz_jax.studies.movepred_report import plot

    labels = [f"{Path(label).name} ({c.layers} x {c.filters})" for label, c, _ in nets]
    plot(labels, records, args.out)
    print(f"wrote {args.out / 'figures.json'}, topn.png, by_move.png")
    return 0


if __name__ == "__main__":
    enable_compilation_cache()
    sys.exit(main())
