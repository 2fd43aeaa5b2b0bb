"""Cross-check black's forbidden moves (``agz_jax.game.renju``) against an
independent referee, the PyPI package ``renju`` (``agz_jax.game.renju_check``).

    python -m experiments.play.renju_check --boards 2000 --out docs/renju/check.json

Each generator (random games, dense squares, lines through one point) gives
``--boards`` boards from ``--seed``; every empty point with a black stone
within 5 on its lines is read by both. Three readings are compared: the
search's (``renju.DEPTH``, ``renju.CANDIDATES``), a deep one (``--depth``,
32 candidates), and the deep one read as the referee reads (``judge``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from agz_jax.base.cache import enable_compilation_cache
from agz_jax.game import renju, renju_check


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.play.renju_check",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--boards", type=int, default=2000, help="boards per generator")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--depth", type=int, default=3, help="the deep reading's recursion depth")
    p.add_argument("--chunk", type=int, default=100, help="boards read at once")
    p.add_argument("--out", type=Path, default=None, help="write the report (JSON) here")
    args = p.parse_args(argv)
    if args.boards < 1 or args.chunk < 1 or not 1 <= args.depth <= 6:
        p.error("--boards and --chunk must be >= 1 and --depth in 1..6")
    try:
        renju_check.referee()
    except renju_check.RefereeMissing as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    readings = {"search": dict(depth=renju.DEPTH, candidates=renju.CANDIDATES),
                "deep": dict(depth=args.depth, candidates=32),
                "deep, read as the referee": dict(depth=args.depth, candidates=32, judge=True)}
    result, t0 = {}, time.time()
    for generator in renju_check.GENERATORS:
        boards = list(renju_check.boards(generator, args.seed, args.boards))
        reports = {name: renju_check.Report() for name in readings}
        for i in range(0, len(boards), args.chunk):
            chunk = boards[i:i + args.chunk]
            verdicts = renju_check.referee_verdicts(chunk)
            for name, how in readings.items():
                renju_check.compare(chunk, report=reports[name], verdicts=verdicts, **how)
            if (i // args.chunk) % 20 == 19:
                print(f"  {generator}: {i + len(chunk)} boards read, {time.time() - t0:.0f} s",
                      flush=True)
        result[generator] = {}
        for name in readings:
            summary = reports[name].as_dict()
            result[generator][name] = summary
            print(f"{generator:13s} {name:27s} boards {summary['boards']:6d} points "
                  f"{summary['points']:8d} forbidden {summary['forbidden']:6d} "
                  f"disagree {summary['disagreements']:4d} (unexplained "
                  f"{summary['unexplained']})", flush=True)
    result["settings"] = dict(vars(args), out=str(args.out), seconds=round(time.time() - t0))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    enable_compilation_cache()
    sys.exit(main())
