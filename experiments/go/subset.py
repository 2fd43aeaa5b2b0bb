"""A smaller copy of a games store, to carry into a GPU window (64 MiB a call).

    python -m experiments.go.subset --games /tmp/go19_ship/games --out .go19_gpu/games \
        --train-fraction 0.15

Every shard keeps all its validation and test games and the first share of its
training games (``go.games.subset``): the held-out splits, and the held-out
sample a run draws from them, are the whole store's, so its accuracy is
comparable with runs on the whole store.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agz_jax.go import games


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.go.subset",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--games", type=Path, required=True, help="a finished games store")
    p.add_argument("--out", type=Path, required=True, help="a new folder")
    p.add_argument("--train-fraction", type=float, required=True,
                   help="the share of every shard's training games kept, in (0, 1]")
    args = p.parse_args(argv)
    try:
        meta = games.subset(args.games, args.out, args.train_fraction)
    except games.GamesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in args.out.iterdir())
    splits = ", ".join(f"{v['games']:,} {k}" for k, v in meta["splits"].items())
    print(f"{args.out}: {splits} games, {size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
