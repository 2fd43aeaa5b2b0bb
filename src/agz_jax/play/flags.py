"""The search flags ``pbrain-agz`` and the web board share, read before
anything heavy is imported (a bad flag fails at once)."""

from __future__ import annotations

MAX_THREADS = 8
"""One tree a board symmetry (``symmetry.NUM_SYMMETRIES``; a test keeps them equal)."""

PLAY_CAPACITY = 16384
"""Each tree's capacity (simulations a move at most) for time-limited play
(``pbrain-agz``, the web board; ``engine.PLAY_CAPACITY``, ``--max-sims``). Its
arrays are ``[1, N, 225]``: about 6.6 KB a node on a 15x15 board, 108 MB a
tree. On a 2-core Zen 4 at 0.92 s a move, trees of 8192 filled at 8 of 20
moves of a game, carried visits included, and stopped searching; trees of
16384 searched 1.3-1.4 times the new simulations and filled at 4; trees of
32768 never filled, but a carry cost up to 186 ms and a move overran its
budget by 28 ms (``experiments.play.tree_capacity``;
docs/pbrain.md, "The tree's capacity")."""


def add_threads_flag(parser) -> None:
    """The front ends' ``--threads`` (``Engine(threads=...)``)."""
    parser.add_argument("--threads", type=int, default=None,
                        help="PUCT: trees of the position searched at once, one a thread, "
                             "each under another board symmetry, their visits summed (root "
                             f"parallelism, 1 to {MAX_THREADS}); default: 2 on a machine "
                             "with 2 or more cores, else 1")


def check_search_flags(parser, args) -> None:
    """``parser.error`` (one line) for a ``--threads`` or ``--c-puct`` the
    engine cannot take."""
    if args.threads is not None and not 1 <= args.threads <= MAX_THREADS:
        parser.error(f"--threads must be 1 to {MAX_THREADS} (one tree a board symmetry), "
                     f"got {args.threads}")
    if args.c_puct is not None and not args.c_puct > 0:
        parser.error(f"--c-puct must be positive, got {args.c_puct}")
