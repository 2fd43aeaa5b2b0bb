"""``pbrain-agz``: a Gomocup / Piskvork engine ("brain") speaking the Piskvork
protocol on stdin/stdout.

    pbrain-agz [--model default] [--sims 1600] [--debug]
    python -m agz_jax.brain --model models/default

Lines: a command a line, ended by LF or CR LF; a line may hold at most
``MAX_LINE`` bytes (its ending not counted). Replies are ASCII, one a line,
flushed. Coordinates are 0-based ``x,y`` with ``x`` the column. Supported:
``START n``, ``RECTSTART w,h`` (square only), ``RESTART``, ``BEGIN``, ``TURN
x,y``, ``BOARD`` ... ``x,y,field`` ... ``DONE`` (field 1 own stone, 2
opponent's), ``TAKEBACK x,y``, ``INFO key value``, ``ABOUT``, ``END``.

Exactly one reply per command, as a manager that reads one reply per command
expects (``MESSAGE`` and ``DEBUG`` lines may come before it; they are not
replies):

- ``INFO`` and ``END`` get no reply, as the protocol says. A bad ``INFO`` value
  (or an unsupported rule) is ignored, and said in a ``MESSAGE`` line before the
  next reply (the protocol: "wait with the output of the problem until the
  manager sends the first command not having an INFO form").
- ``BOARD`` ... ``DONE`` is one command, answered once, after ``DONE``: a move,
  or one ``ERROR`` that names the first bad line (``BOARD rejected (stone line
  3 '1,1,7': ...)``); then the position is as before the block. Every line up to
  ``DONE`` belongs to the block (other commands there are bad lines), except
  ``END``. ``BOARD`` with arguments or before ``START`` is answered so at
  ``DONE`` as well. ``SWAP2BOARD`` ... ``DONE`` gets one ``UNKNOWN``.
- Every other command gets one reply: its answer, ``UNKNOWN`` for a command
  word that is not supported, ``ERROR <reason>`` for a known command with bad
  arguments, out of order, or a position that cannot be played. The engine
  keeps serving, and it never prints an illegal move.
- Empty lines (nothing, or only spaces and tabs) are ignored, inside a block too.
- Command words are ASCII letters and digits, any case (ASCII case only:
  ``ſtart`` and ``begın`` are not commands); integers are ASCII digits; fields
  may be padded with spaces and tabs. A line with a NUL byte, a CR anywhere but
  just before its LF, or more than ``MAX_LINE`` bytes (the rest of it is read
  and dropped) is a bad line: ``ERROR``, or inside a block, a rejected block.
  Its command word still counts (it ends at a space, tab, CR or NUL): a bad
  ``INFO`` line gets no reply, a bad ``DONE`` line still ends its block.

Rules: ``INFO rule`` bit 1 (``rule & 1``) asks for *exactly five* (the
``standard`` rule), otherwise five or more wins (``freestyle``). The search and
the tactical guard follow the game's rule whatever rule the model was trained
on (said in a ``MESSAGE`` when they differ); continuous games, renju and caro
(bits 2, 4 and 8) are not supported (a ``MESSAGE``; play goes on without them).
The board size must be the model's (the net's heads are sized for it).

Time (``move_budget_ms``): a move's budget is ``min(timeout_turn, time_left /
moves_to_go)`` less a safety reserve, counted from the moment its command
(``BOARD``'s first line for a block) was read; ``time_left`` falls back to
``timeout_match`` less the thinking time used this game, and between two
``INFO time_left`` lines it is counted down by the thinking time used. The
search runs in chunks of simulations and stops when the next chunk would
overrun the budget. ``timeout_turn 0`` means "as fast as possible" (the net's
own choice, guarded); ``time_left`` may be negative (out of time: as fast as
possible) and 2147483647 means unlimited; ``timeout_match 0`` is no limit.
Without any time limit the search runs ``--sims`` simulations. Everything is
compiled at ``START`` (once for both rules: the rule is a run-time flag) and
kept in the persistent XLA cache, so the next process starts faster.

This module is the command line and the loop over stdin; the commands are
``agz_jax.brain_commands``' and the reading of lines ``agz_jax.brain_text``'s.
"""

from __future__ import annotations

import argparse
import os
import sys

from agz_jax.brain_commands import Brain
from agz_jax.brain_text import MAX_LINE, ProtocolError, read_line


def serve(brain: Brain, stdin, stdout) -> int:
    """Read commands from the binary ``stdin`` until END or end of input."""
    while not brain.finished:
        line = read_line(stdin)
        t_read = brain.clock()
        if line is None:
            break
        raw, length = line
        problem = (f"the line is too long ({length} bytes; at most {MAX_LINE})"
                   if length > MAX_LINE else None)
        replies = brain.handle(raw.decode("utf-8", errors="replace"), t_read, problem=problem)
        for reply in replies:
            stdout.write(reply + "\n")
        stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pbrain-agz", description="agz_jax as a Gomocup/Piskvork brain (stdin/stdout).")
    parser.add_argument("--model", default="default",
                        help="model name (models/<name>), model directory or run directory")
    parser.add_argument("--sims", type=int, default=None,
                        help="simulations per move at most (the tree's size; time limits may "
                             "stop the search earlier); default: the model's own "
                             "search.num_simulations")
    parser.add_argument("--algorithm", choices=("puct", "gumbel"), default=None,
                        help="search algorithm; default: the model's own search.algorithm")
    parser.add_argument("--reuse", action=argparse.BooleanOptionalAction, default=None,
                        help="keep the subtree under the moves played for the next search "
                             "(PUCT only); default: the model's own search.reuse")
    parser.add_argument("--chunk", type=int, default=16,
                        help="simulations per jitted step between clock checks")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--debug", action="store_true", help="a DEBUG line before each move")
    args = parser.parse_args(argv)
    if (args.sims is not None and args.sims < 1) or args.chunk < 1:
        parser.error("--sims and --chunk must be positive")

    # The protocol owns the real stdout; anything else printed (by us or a
    # library) goes to stderr so that it cannot be taken for a reply.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", newline="\n")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    from agz_jax import __version__, cache, engine, models
    from agz_jax.config import ConfigError

    cache.enable_compilation_cache()

    def factory():
        try:
            model = models.load(args.model)
        except models.ModelError as e:
            print(f"pbrain-agz: {e}", file=sys.stderr)
            raise
        try:
            return engine.Engine(model, max_simulations=args.sims, chunk=args.chunk,
                                 seed=args.seed, algorithm=args.algorithm, reuse=args.reuse)
        except ConfigError as e:
            print(f"pbrain-agz: {e}", file=sys.stderr)
            raise

    brain = Brain(factory, simulations=args.sims, debug=args.debug, version=__version__)
    try:
        brain._ensure_engine()
    except ProtocolError:
        pass  # reported on stderr now and on every START
    return serve(brain, sys.stdin.buffer, protocol_out)


if __name__ == "__main__":
    sys.exit(main())
