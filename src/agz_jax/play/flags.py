"""The search flags ``pbrain-agz`` and the web board share, read before
anything heavy is imported (a bad flag fails at once)."""

from __future__ import annotations

MAX_THREADS = 8
"""One tree a board symmetry (``symmetry.NUM_SYMMETRIES``; a test keeps them equal)."""

PLAY_CAPACITY = 16384
"""Each tree's capacity (simulations a move at most) for time-limited play
(``pbrain-agz``, the web board; ``engine.PLAY_CAPACITY``, ``--max-sims``). Its
arrays are ``[1, N, 225]``: about 6.6 KB a node on a 15x15 board, 105 MB a
tree, and each of the engine's two trees keeps a spare to carry into (420 MB
in all). On a 2-core Intel family-6 model-167 machine at 0.92 s a move,
trees of 16,384 filled at 10 of 20 moves of a game, carried visits included,
and trees of 32,768 at 4, holding 1.5 times the visits at the decisions
(``experiments.play.tree_capacity``); but against Rapfi at 10,000 nodes,
160 games paired with 16,384's, 32,768 scored -0.05 (-0.14 to +0.04), and
the process took 1.7 GB. The full trees are the late, forced moves, where
the decision is already clear (docs/pbrain.md, "The tree's capacity")."""


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
