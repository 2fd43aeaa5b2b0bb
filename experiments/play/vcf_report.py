"""Read an outside ledger's games with the VCF reader (``agz_jax.game.vcf``), or
with ``--reader vct`` the VCT reader (``agz_jax.game.vct``: fours and threes):
where a candidate faced a win by continuous fours (threats), whether it stopped
it, and how long the reading takes.

    python -m experiments.play.vcf_report --ledger docs/outside/games.jsonl \\
        --candidate 'pbrain:default[--no-vcf]@1000ms' --lost

For each game (``--lost``: only the candidate's losses), at each of the
candidate's moves from the fifth stone on, the opponent's VCF threat is read
(``vcf.defences``: the line it would have if it were to move, and the moves
that stop every one) and the move played is marked:

- ``D``: it faced a threat and played a move that stops it;
- ``X``: it faced a threat that a move would have stopped, and played another;
- ``U``: it faced a threat no move stops (lost against best play);
- ``W``: it had a VCF of its own (``vcf.solve``) and did not play its first four.

With ``--reader vct`` the same marks are read with ``vct.solve`` and
``vct.defences``: ``X`` is then a move after which the reader finds the
opponent a win by threats, played where a move existed after which it finds
none.

The summary counts the games with each mark, and the reading's time per
position (``vcf.solve``, then ``vcf.defences`` when there is no own win: what
the engine reads before each search) over every position read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def marks(moves: list[int], candidate_black: bool, size: int, rule: str,
          times: list[float], reader: str = "vcf") -> list[str]:
    import importlib

    vcf = importlib.import_module(f"agz_jax.game.{reader}")

    me = 1 if candidate_black else -1
    board = np.zeros(size * size, np.int8)
    out = []
    for i, m in enumerate(moves):
        colour = 1 if i % 2 == 0 else -1
        if colour == me and i >= 4:
            t0 = time.perf_counter()
            own = vcf.solve(board, me, size, rule)
            threat = vcf.defences(board, me, size, rule) if own is None else None
            times.append(time.perf_counter() - t0)
            if own is not None and m != own[0]:
                out.append(f"W{i}")
            elif threat is not None:
                stops, _ = threat
                out.append(("D" if m in stops else "X" if stops else "U") + str(i))
        board[m] = colour
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.play.vcf_report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ledger", type=Path, default=Path("docs/outside/games.jsonl"))
    p.add_argument("--candidate", required=True, help="the ledger's name of the player")
    p.add_argument("--opponent", default=None, help="only games against this one")
    p.add_argument("--lost", action="store_true", help="only the candidate's losses")
    p.add_argument("--reader", choices=("vcf", "vct"), default="vcf",
                   help="wins by continuous fours (default) or threats (fours and threes)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="the first N games")
    args = p.parse_args(argv)
    try:
        lines = [json.loads(x) for x in args.ledger.read_text().splitlines() if x.strip()]
    except (OSError, json.JSONDecodeError) as e:
        print(f"error: --ledger {args.ledger}: {e}", file=sys.stderr)
        return 2
    games = [x for x in lines if x["a"] == args.candidate
             and (args.opponent is None or x["b"] == args.opponent)
             and (not args.lost or x["losses"] == 1)][:args.limit]
    if not games:
        names = sorted({x["a"] for x in lines})
        print(f"error: no games of {args.candidate!r} in {args.ledger}; its players: "
              f"{', '.join(names)}", file=sys.stderr)
        return 2
    if any(x["rule"] == "renju" for x in games):
        print("error: renju ledgers are not read (the forbidden points need the engine)",
              file=sys.stderr)
        return 2
    times: list[float] = []
    counts = {k: 0 for k in "DXUW"}
    missed = 0  # games with an X before their first U
    for x in games:
        o = x["outside"]
        found = marks(o["moves"], o["a_black"], x["size"], x["rule"], times, args.reader)
        for k in counts:
            counts[k] += any(f.startswith(k) for f in found)
        first_u = next((i for i, f in enumerate(found) if f[0] == "U"), len(found))
        missed += any(f[0] == "X" for f in found[:first_u])
        result = "win" if x["wins"] else "loss" if x["losses"] else "draw"
        print(f"{x['b']} {'black' if o['a_black'] else 'white'} {result} "
              f"{len(o['moves'])} stones: {' '.join(found) or '-'}")
    t = np.asarray(times) * 1000
    print(f"{len(games)} games; with D {counts['D']}, X {counts['X']}, U {counts['U']}, "
          f"W {counts['W']}; an X before the first U {missed}; "
          f"reading per position ({len(t)}): mean {t.mean():.1f} ms, "
          f"99th percentile {np.percentile(t, 99):.0f} ms, max {t.max():.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
