"""The engine's search with and without transpositions, on positions from games.

    python -m experiments.play.transpositions                       # models/default
    python -m experiments.play.transpositions --positions 4 --sims 1024 --json

Each position is an opening of ``--openings`` (every ``--every``-th of the set)
followed by ``--plies`` moves of the engine's own search (512 simulations
each), as positions arise in a game. On each, one tree of ``--sims``
simulations is searched (``engine.Engine``, PUCT, no reuse, no VCF reading)
with transpositions on and off, alternately, ``--repeats`` times each; the
best simulations/s of each is kept. Reported per position: whether the two
searches' root visits were equal, the share of the tree's nodes below the
root whose position an earlier node holds (the evaluations saved) and both
rates; then the mean rate of each and their ratio.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np


def measure(model_name: str, positions: int, every: int, plies: int, sims: int,
            repeats: int, openings_name: str, seed: int) -> dict:
    from agz_jax.game import openings
    from agz_jax.nets import models
    from agz_jax.play import engine

    model = models.load(model_name)
    rules = model.rules
    opening_set = openings.load(openings_name, rules.size)
    capacity = max(sims, 512)
    engines = {on: engine.Engine(model, max_simulations=capacity, chunk=16, algorithm="puct",
                                 reuse=False, vcf=False, threads=1, seed=seed,
                                 transpositions=on)
               for on in (True, False)}
    for e in engines.values():
        e.warmup(rules)
    rows = []
    for i in range(positions):
        moves = [int(a) for a in opening_set[(i * every) % len(opening_set)]]
        state = engine.make_state(rules, np.zeros(rules.num_actions, np.int8), 0)
        for move in moves:
            state = rules.step(state, move)
        for _ in range(plies):
            if bool(state.done):
                break
            engines[False].forget()
            state = rules.step(state, engines[False].analyse(rules, state, simulations=512).action)
        if bool(state.done):
            continue
        rates = {True: 0.0, False: 0.0}
        visits = {}
        for _ in range(repeats):
            for on, e in engines.items():
                e.forget()
                a = e.analyse(rules, state, simulations=sims)
                rates[on] = max(rates[on], a.simulations / a.elapsed)
                visits[on] = np.asarray(a.visits)
        transposed = engines[True].transposed()
        rows.append({"opening": (i * every) % len(opening_set), "stones": int(state.num_moves),
                     "same_visits": bool(np.array_equal(visits[True], visits[False])),
                     "transposed": transposed, "with_sims_per_s": rates[True],
                     "without_sims_per_s": rates[False]})
        print(f"opening {rows[-1]['opening']:3d}, {rows[-1]['stones']} stones: "
              f"{'same' if rows[-1]['same_visits'] else 'other'} root visits, "
              f"{transposed:.0%} transposed, {rates[True]:,.0f} against "
              f"{rates[False]:,.0f} simulations/s", file=sys.stderr, flush=True)
    with_mean = float(np.mean([r["with_sims_per_s"] for r in rows]))
    without_mean = float(np.mean([r["without_sims_per_s"] for r in rows]))
    return {"model": model_name, "simulations": sims, "plies": plies, "repeats": repeats,
            "rows": rows, "with_mean": with_mean, "without_mean": without_mean,
            "ratio": with_mean / without_mean,
            "ratio_range": [min(r["with_sims_per_s"] / r["without_sims_per_s"] for r in rows),
                            max(r["with_sims_per_s"] / r["without_sims_per_s"] for r in rows)],
            "machine": platform.processor() or platform.machine(),
            "date": time.strftime("%Y-%m-%d")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.play.transpositions",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="default", help="a model name or directory (default)")
    p.add_argument("--positions", type=int, default=10, help="positions (10)")
    p.add_argument("--every", type=int, default=6, help="every n-th opening of the set (6)")
    p.add_argument("--plies", type=int, default=6, help="engine moves after the opening (6)")
    p.add_argument("--sims", type=int, default=4096, help="simulations a search (4096)")
    p.add_argument("--repeats", type=int, default=2, help="searches of each kind (2)")
    p.add_argument("--openings", default="balanced15", help="opening set (balanced15)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    for name in ("positions", "every", "sims", "repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be a positive integer, got {getattr(args, name)}")
    if args.plies < 0:
        p.error(f"--plies must be 0 or more, got {args.plies}")
    try:
        out = measure(args.model, args.positions, args.every, args.plies, args.sims,
                      args.repeats, args.openings, args.seed)
    except (FileNotFoundError, ValueError) as e:
        print(f"transpositions: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        lo, hi = out["ratio_range"]
        print(f"{len(out['rows'])} positions: {out['with_mean']:,.0f} simulations/s with "
              f"transpositions, {out['without_mean']:,.0f} without: x{out['ratio']:.2f} "
              f"(x{lo:.2f} to x{hi:.2f} a position)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
