"""Cross-check ``agz_jax.go.rules`` against GnuGo 3.8 over GTP on random games.

    python -m experiments.go.referee                          # 9x9, 13x13, 19x19
    python -m experiments.go.referee --sizes 9 --games 64 --simple-ko
    python -m experiments.go.referee --out runs/go_referee.json

For each board size, ``--games`` random games are played in JAX (``go.referee``:
uniform legal moves that never fill one's own eye, a pass with probability
``--pass-prob`` or when nothing else is left, ended by two passes) and replayed
in GnuGo (``--chinese-rules --forbid-suicide``, with ``--positional-superko``
unless ``--simple-ko``), comparing at every position the legal moves
(``all_legal``) and the board after the move (``list_stones``), and at the end of
every game that was passed out and where GnuGo sees no dead stone the area score
(``final_score``; nor on an empty board, which GnuGo does not score as area).
``--jobs`` GnuGo processes run at once. ``--out`` is not replaced unless
``--force``. Exits 1 on any disagreement (the first ones are printed).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import jax

from agz_jax.go import gtp, play, referee
from agz_jax.go.rules import Rules
from agz_jax.training import cli


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m experiments.go.referee",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="9,13,19", help="board sizes, comma-separated")
    p.add_argument("--games", default="512,160,80",
                   help="games per size (one number, or one per size)")
    p.add_argument("--chunk", type=int, default=64, help="games generated per jitted call")
    p.add_argument("--simple-ko", action="store_true",
                   help="simple ko (GnuGo --simple-ko) instead of positional superko")
    p.add_argument("--pass-prob", type=float, default=0.01)
    p.add_argument("--komi", type=float, default=7.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2, help="GnuGo processes at once")
    p.add_argument("--gnugo", default=None, help="path of the gnugo program")
    p.add_argument("--out", default=None,
                   help="write the tallies as JSON here (an existing file only with --force)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    args = p.parse_args(argv)
    try:
        args.sizes, args.games = play.sizes_and_games(args.sizes, args.games,
                                                      "--sizes 9,13 --games 64,32")
    except ValueError as e:
        p.error(str(e))
    for name in ("chunk", "jobs"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if not 0 <= args.pass_prob <= 1:  # False for nan too
        p.error(f"--pass-prob must be a probability in 0..1, got {args.pass_prob}")
    if not math.isfinite(args.komi) or (2 * args.komi) % 1:
        p.error(f"--komi must be a whole or half number, got {args.komi}")
    if args.seed < 0:
        p.error(f"--seed must be >= 0, got {args.seed}")
    problem = play.engine_path_problem(args.gnugo, "--gnugo")
    if problem:
        p.error(problem)
    if args.out is not None:
        problem = cli.out_file_problem(Path(args.out), args.force)
        if problem:
            p.error(f"--out {args.out}: {problem}")
    return args


def check_size(size: int, games: int, args) -> dict:
    rules = Rules(size=size, komi=args.komi, superko=not args.simple_ko)
    key = jax.random.fold_in(jax.random.PRNGKey(args.seed), size)
    tally, started, gen_seconds = referee.Tally(), time.time(), 0.0
    engines = [gtp.gnugo(rules.superko, rules.komi, args.gnugo) for _ in range(args.jobs)]
    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for first in range(0, games, args.chunk):
                n = min(args.chunk, games - first)
                t = time.time()
                batch = referee.random_games(rules, jax.random.fold_in(key, first), n,
                                             args.pass_prob)
                gen_seconds += time.time() - t

                def check(g, batch=batch):
                    engine = engines[g % args.jobs]
                    return referee.check_game(rules, batch, g, engine)

                # one game per engine at a time: map over rounds of ``jobs`` games
                for round_start in range(0, n, args.jobs):
                    ids = range(round_start, min(n, round_start + args.jobs))
                    for part in pool.map(check, ids):
                        tally.add(part)
    finally:
        for e in engines:
            e.close()
    seconds = time.time() - started
    row = dataclasses.asdict(tally)
    row["disagreements"] = [list(map(str, d)) for d in tally.disagreements[:20]]
    row.update(size=size, num_disagreements=len(tally.disagreements),
               seconds=round(seconds, 1), generate_seconds=round(gen_seconds, 1))
    return row


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except KeyboardInterrupt:
        print("\ninterrupted: nothing is kept (the sizes finished were printed above"
              + ("; --out was not written)" if args.out else ")"), file=sys.stderr)
        return 130


def run(args) -> int:
    path = gtp.find_gnugo() if args.gnugo is None else args.gnugo
    if path is None:
        print("error: gnugo is not installed: apt-get install gnugo (or `make gnugo` as root)",
              file=sys.stderr)
        return 2
    version = gtp.GtpEngine([path, "--mode", "gtp"])
    engine_version = version.send("version")
    version.close()
    rows = []
    print(f"GnuGo {engine_version}, {'simple ko' if args.simple_ko else 'positional superko'}, "
          f"komi {args.komi}, seed {args.seed}", flush=True)
    for size, games in zip(args.sizes, args.games, strict=True):
        row = check_size(size, games, args)
        rows.append(row)
        print(f"{size}x{size}: {row['games']} games, {row['positions']:,} positions, "
              f"{row['legal_checks']:,} legal-move checks, {row['captures']:,} stones captured, "
              f"{row['ko_positions']:,} ko positions, {row['superko_positions']:,} where "
              f"superko forbids a move simple ko allows, {row['scores']} scores compared "
              f"({row['scores_skipped']} skipped: dead stones or an empty board), "
              f"{row['forgotten_superko']} "
              f"superko repetitions GnuGo's 500-move history misses, "
              f"{row['num_disagreements']} disagreements ({row['seconds']} s)", flush=True)
        for d in row["disagreements"][:5]:
            print("   ", " ".join(d))
    total = sum(r["positions"] for r in rows)
    bad = sum(r["num_disagreements"] for r in rows)
    print(f"total: {total:,} positions, {bad} disagreements")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(
            dict(gnugo=engine_version, superko=not args.simple_ko, komi=args.komi,
                 seed=args.seed, pass_prob=args.pass_prob, sizes=rows), indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
