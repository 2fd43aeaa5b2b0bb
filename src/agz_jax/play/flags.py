"""The search flags ``pbrain-agz`` and the web board share, read before
anything heavy is imported (a bad flag fails at once)."""

from __future__ import annotations

MAX_THREADS = 8
"""One tree a board symmetry (``symmetry.NUM_SYMMETRIES``; a test keeps them equal)."""


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
