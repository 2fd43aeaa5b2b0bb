"""Import strong human Go games (the TYGEM 9-dan set, or SGF files) as compact
move sequences (``go.tygem``, ``go.games``).

    python -m experiments.go.import_records --source computer-go-dataset --out data/go19
    python -m experiments.go.import_records --source TYGEM/Kifu/2005-11.zip --out data/go19-small
    python -m experiments.go.import_records --source my-sgf-folder --out data/go19-sgf --seed 1

``--source``: a clone of github.com/yenw/computer-go-dataset (its ``TYGEM``
section: ``Kifu/YYYY-MM.zip`` and ``index/KifuYYYY.zip``), a folder of those
zips, single kifu zips, or SGF files and folders of them (searched
recursively). Zips are streamed, never unpacked. Only 19x19 even games with a
result, at least ``--min-moves`` long and legal under ``go.rules`` (positional
superko) are kept, each once; every other game is counted under its reason.
Games are split train/valid/test by a hash of their moves and ``--seed``.

One shard per zip (or per 2,000 SGF files) is written as it finishes, so an
interrupted import continues where it stopped when started again with the same
arguments; ``games.json`` (the counts) is written last. Read the games with
``agz_jax.go.games.load_games(OUT, "train")``. See docs/go_data.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agz_jax.go import games, play, tygem


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.go.import_records",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--source", type=Path, required=True, nargs="+",
                   help="a clone of the dataset repository, folders of zips, zips, SGF "
                        "files or folders of them")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0, help="fixes the train/valid/test split")
    p.add_argument("--valid", type=float, default=0.02, help="fraction of games in valid")
    p.add_argument("--test", type=float, default=0.02, help="fraction of games in test")
    p.add_argument("--min-moves", type=int, default=50, help="shorter games are dropped")
    p.add_argument("--limit-zips", type=int, default=None,
                   help="import only the first N kifu zips (by name)")
    args = p.parse_args(argv)
    if not (0 <= args.valid < 1 and 0 <= args.test < 1 and args.valid + args.test < 1):
        p.error(f"--valid and --test must be fractions >= 0 summing below 1, got "
                f"{args.valid} and {args.test}")
    if args.min_moves < 1:
        p.error(f"--min-moves must be >= 1, got {args.min_moves}")
    if args.limit_zips is not None and args.limit_zips < 1:
        p.error(f"--limit-zips must be >= 1, got {args.limit_zips}")
    problem = play.out_dir_problem(args.out)
    if problem:
        p.error(problem)
    for s in args.source:
        if not s.exists():
            p.error(f"--source {s}: no such file or directory")
    try:
        tygem.find_units(args.source, args.limit_zips)
    except tygem.SourceError as e:
        p.error(f"--source {e}")
    return play.resumable(lambda: run(args),
                          f"the shards written so far are kept in {args.out}")


def run(args) -> int:
    try:
        tygem.import_games(args.source, args.out, seed=args.seed, valid=args.valid,
                           test=args.test, min_moves=args.min_moves,
                           limit_zips=args.limit_zips, say=lambda s: print(s, flush=True))
    except (tygem.SourceError, games.GamesError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
