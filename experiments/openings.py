"""Make a balanced opening set (``agz_jax.openings``) by searching candidate openings.

    python -m experiments.openings --model curriculum --sims 256 \
        --out src/agz_jax/data/balanced15.txt

The candidates: black's first stone on the centre point, white's and black's
next stones anywhere in the central ``--box`` x ``--box`` square, one opening
per class under the board's 8 symmetries. Each is searched by the model
(``--sims`` simulations of its own search config, no noise) and kept when the
search's value for the side to move (white) lies within ``--max-value`` of 0,
the closest to 0 first, at most ``--count`` of them. The file's header records
the command, the model and every kept opening's value, so the set can be made
again and its source is on record.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def candidates(size: int, box: int) -> np.ndarray:
    """int32[K, 3]: centre, then two more stones in the central box, one per
    symmetry class (the canonical one: smallest under the 8 maps)."""
    from agz_jax import symmetry

    c, h = size // 2, box // 2
    points = [r * size + col for r in range(c - h, c + h + 1) for col in range(c - h, c + h + 1)
              if (r, col) != (c, c)]
    maps = symmetry.permutations(size)
    seen, out = set(), []
    for w in points:
        for b in points:
            if b == w:
                continue
            key = min((int(m[c * size + c]), int(m[w]), int(m[b])) for m in maps)
            if key not in seen:
                seen.add(key)
                out.append([c * size + c, w, b])
    return np.asarray(out, np.int32)


def values(model_name: str, moves: np.ndarray, sims: int, seed: int) -> np.ndarray:
    """float32[K]: the model's search value of each opening for the side to move."""
    import jax

    from agz_jax import models, openings
    from agz_jax.gomoku import Rules
    from agz_jax.run import make_networks
    from agz_jax.search import run_search

    model = models.load(model_name)
    config = model.config
    rules = Rules(config.game.size, config.game.rule)
    nets = make_networks(config)

    @jax.jit
    def value(variables, index, key):
        states = openings.start_states(rules, moves, index)
        out = run_search(config.search, rules, nets, config.decay.gamma, variables, key,
                         states, num_simulations=sims)
        return out.search_tree.node_values[:, 0]

    return np.asarray(value(model.variables, np.arange(len(moves)), jax.random.PRNGKey(seed)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.openings", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="curriculum", help="the judge (a model name or dir)")
    p.add_argument("--sims", type=int, default=256, help="simulations per opening")
    p.add_argument("--box", type=int, default=7, help="side of the central square (odd)")
    p.add_argument("--max-value", type=float, default=0.2,
                   help="keep openings whose |value| for the side to move is at most this")
    p.add_argument("--count", type=int, default=128, help="keep at most this many")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.box < 3 or args.box % 2 == 0:
        print(f"error: --box must be an odd number >= 3, got {args.box}", file=sys.stderr)
        return 2

    from agz_jax import models, openings

    try:
        size = models.load(args.model).config.game.size
    except models.ModelError as e:
        print(f"error: --model: {e}", file=sys.stderr)
        return 2
    moves = candidates(size, args.box)
    v = values(args.model, moves, args.sims, args.seed)
    order = np.argsort(np.abs(v), kind="stable")
    keep = [i for i in order if abs(v[i]) <= args.max_value][:args.count]
    command = "python -m experiments.openings " + " ".join(argv if argv is not None
                                                            else sys.argv[1:])
    header = (f"Balanced 3-stone openings for {size}x{size} freestyle (black, white, black;\n"
              f"white to move). Made by: {command}\n"
              f"Candidates: black on the centre, two stones in the central {args.box}x{args.box}"
              f" square, one per symmetry class ({len(moves)}).\n"
              f"Kept: the {len(keep)} whose search value for white ({args.sims} simulations of "
              f"the model {args.model!r}) is within {args.max_value} of 0, closest first.\n"
              f"Values, in file order: " + " ".join(f"{v[i]:+.3f}" for i in keep))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(openings.format_set(moves[keep], size, header))
    print(f"{len(keep)} of {len(moves)} candidate openings kept (|value| <= {args.max_value}); "
          f"values {v[keep].min():+.3f}..{v[keep].max():+.3f}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
