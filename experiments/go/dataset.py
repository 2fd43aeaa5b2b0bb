"""The move-prediction data set of a directory of SGF records (``go.dataset``).

    python -m experiments.go.dataset --records runs/go-records9 runs/go-records9-open \
        --out runs/go-data9

Every record is parsed first (a malformed one stops the build with its file
and property named, before anything is written, unless ``--skip-malformed``),
replayed with ``go.rules`` (a game that breaks the rules is reported, skipped
and counted) and the Table 1 planes of its positions computed once, in shards
of ``--games-per-shard`` games; started again on the same records, an
interrupted build continues. ``dataset.json`` is written last.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agz_jax.base.cache import enable_compilation_cache
from agz_jax.go import dataset, play, sgf


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.go.dataset",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=Path, required=True, nargs="+",
                   help="directories of .sgf files (or files)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--ranks", type=int, default=0, choices=(0, 9),
                   help="0: a constant plane (records without ranks); 9: dan planes "
                        "from BR/WR")
    p.add_argument("--games-per-shard", type=int, default=64)
    p.add_argument("--skip-malformed", action="store_true",
                   help="report and skip malformed records instead of stopping")
    args = p.parse_args(argv)
    if args.games_per_shard < 1:
        p.error(f"--games-per-shard must be >= 1, got {args.games_per_shard}")
    problem = play.out_dir_problem(args.out)
    if problem:
        p.error(problem)
    try:
        paths = [p for r in args.records for p in dataset.record_paths(r)]
        dataset.build(paths, args.out, args.ranks, args.games_per_shard,
                      args.skip_malformed, say=lambda s: print(s, flush=True))
    except (sgf.SgfError, dataset.DatasetError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    enable_compilation_cache()
    sys.exit(main())
