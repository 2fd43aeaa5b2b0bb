"""``pbrain-agz``: a Gomocup / Piskvork engine ("brain") speaking the Piskvork
protocol on stdin/stdout.

    pbrain-agz [--model default] [--sims 32] [--max-sims 16384] [--algorithm puct] [--debug]
    python -m agz_jax.play.brain --model models/default

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
``standard`` rule), otherwise five or more wins (``freestyle``); bit 4 asks for
renju (``agz_jax.game.renju``: black's forbidden moves are refused from the manager
and never played). The search and the tactical guard follow the game's rule
whatever rule the model was trained on (said in a ``MESSAGE`` when they
differ), except that renju is played only by a renju model and a renju model
plays only renju (otherwise every move is refused with an ``ERROR`` naming both
rules); continuous games and caro (bits 2 and 8) are not supported (a
``MESSAGE``; play goes on without them).
The board size must be the model's (the net's heads are sized for it).

Time (``move_budget_ms``): a move's budget is ``min(timeout_turn, time_left /
moves_to_go)`` less a safety reserve, counted from the moment its command
(``BOARD``'s first line for a block) was read; ``time_left`` falls back to
``timeout_match`` less the thinking time used this game, and between two
``INFO time_left`` lines it is counted down by the thinking time used. The
search runs in chunks of simulations, each sized to a quarter of the time
left (at most 0.1 s) at the rate the last one ran, and stops when even the
smallest chunk (``--chunk``) would overrun the budget. ``timeout_turn 0``
means "as fast as possible" (the net's own choice, guarded); ``time_left``
may be negative (out of time: as fast as possible) and 2147483647 means
unlimited; ``timeout_match 0`` is no limit.
Everything is compiled at ``START`` (once for freestyle and standard: the
rule is a run-time flag; renju compiles its own set when asked) and kept in
the persistent XLA cache, so the next process starts faster.

Before each search the engine reads wins by continuous fours (``--vcf``, on
by default; ``agz_jax.game.vcf``): it plays its own at once, and when the opponent
has one it searches only among the moves that stop it. With ``--vct`` it also
reads wins by continuous threats (fours and threes; ``agz_jax.game.vct``): its
own is played at once, and after the search the most visited move after which
the opponent has none is played (a quarter of the move's time is kept for it).

Search: under a time limit the search uses the move's whole budget: it runs
until the budget is spent or its tree (``--max-sims``, default
``engine.PLAY_CAPACITY`` = 16384 simulations in each tree) is full, whatever the model's
training simulation count. Its default is PUCT with c_puct 1.5
(``engine.PLAY_C_PUCT``, chosen by measurement; the model's own c_puct is for
self-play's exploration) and subtree reuse: the tree under the engine's move
and the opponent's reply is carried to the next move, and its visits count.
(Gumbel's sequential halving is scheduled for a fixed budget, so a Gumbel
search cut short by the clock has visited its considered moves unevenly;
PUCT has no such schedule.) Without any
time limit a move runs ``--sims`` simulations (default: the model's
``search.num_simulations``) of the model's own search, as trained (compiled at
the first such move). ``--algorithm``, ``--reuse`` and ``--c-puct`` set the
search for every move; ``--leaves K`` has a PUCT search evaluate K leaves a step
in one batched net call, with virtual loss (``mctx_loop.parallel_steps``);
``--threads T`` has PUCT grow T trees of the position at once, one a thread
and each under another board symmetry, and sum their root visits (root
parallelism: a one-position search keeps about one core busy).
``ABOUT`` names both searches, and with ``--debug`` a ``DEBUG`` line before each
move says what ran: simulations (and the visits carried over), time against the
budget, value, and the search.

This module is the command line and the loop over stdin; the commands are
``agz_jax.play.brain_commands``' and the reading of lines ``agz_jax.play.brain_text``'s.
"""

from __future__ import annotations

import argparse
import os
import sys

from agz_jax.play import flags
from agz_jax.play.brain_commands import Brain
from agz_jax.play.brain_text import MAX_LINE, ProtocolError, read_line


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


def build_parser() -> argparse.ArgumentParser:
    """``pbrain-agz``'s flags (``main`` parses them; ``play_settings`` reads
    them; the experiments that measure the engine as it plays build it from
    them too)."""
    parser = argparse.ArgumentParser(
        prog="pbrain-agz", description="agz_jax as a Gomocup/Piskvork brain (stdin/stdout).")
    parser.add_argument("--model", default="default",
                        help="model name (models/<name>), model directory or run directory")
    parser.add_argument("--sims", type=int, default=None,
                        help="simulations a move when no time limit is set; default: the "
                             "model's own search.num_simulations")
    parser.add_argument("--max-sims", type=int, default=None,
                        help="the tree's capacity: the most simulations a move under a time "
                             "limit (the clock usually ends the search first); default: "
                             f"{flags.PLAY_CAPACITY}, or --sims if larger")
    parser.add_argument("--algorithm", choices=("puct", "gumbel"), default=None,
                        help="search algorithm for every move; default: puct under a time "
                             "limit, the model's own search.algorithm without one")
    parser.add_argument("--reuse", action=argparse.BooleanOptionalAction, default=None,
                        help="keep the subtree under the moves played for the next search "
                             "(PUCT only); default: on for puct under a time limit, the "
                             "model's own search.reuse otherwise")
    parser.add_argument("--c-puct", type=float, default=None,
                        help="PUCT's exploration constant; default: 1.5 under a time limit "
                             "(engine.PLAY_C_PUCT), the model's search.c_puct without one")
    parser.add_argument("--fpu", type=float, default=None, metavar="REDUCTION",
                        help="PUCT's first-play urgency: an unvisited move is valued at its "
                             "position's value less REDUCTION (search.qtransform parent); "
                             "default: the model's search.qtransform (raw: unvisited 0)")
    parser.add_argument("--leaves", type=int, default=0,
                        help="PUCT: leaves a step, evaluated in one batched net call with "
                             "virtual loss (leaf parallelism); 0 (default): one at a time")
    flags.add_threads_flag(parser)
    parser.add_argument("--threat-values", action=argparse.BooleanOptionalAction, default=None,
                        help="value a searched position whose stones force a win within six "
                             "plies by that win (search.threat_values); default: the model's")
    parser.add_argument("--vcf", action=argparse.BooleanOptionalAction, default=True,
                        help="read victories by continuous fours at each move: play one's "
                             "own, and search only among the moves that stop the "
                             "opponent's (default: on)")
    parser.add_argument("--vct", action=argparse.BooleanOptionalAction, default=False,
                        help="read victories by continuous threats (fours and threes): play "
                             "one's own, and after the search the most visited move after "
                             "which the opponent has none (default: off)")
    parser.add_argument("--chunk", type=int, default=16,
                        help="simulations per jitted step between clock checks: under a "
                             "time limit the least (each step is sized to a quarter of "
                             "the time left)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--debug", action="store_true", help="a DEBUG line before each move")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if any(n is not None and n < 1 for n in (args.sims, args.max_sims)) or args.chunk < 1:
        parser.error("--sims, --max-sims and --chunk must be positive")
    if args.leaves < 0:
        parser.error(f"--leaves must be 0 or more, got {args.leaves}")
    if args.sims is not None and args.max_sims is not None and args.sims > args.max_sims:
        parser.error(f"--sims {args.sims} is more than --max-sims {args.max_sims}, the tree's "
                     "capacity: lower --sims or raise --max-sims")
    flags.check_search_flags(parser, args)
    if args.fpu is not None and not 0 <= args.fpu <= 2:
        parser.error(f"--fpu must be in 0..2, got {args.fpu}")

    # The protocol owns the real stdout; anything else printed (by us or a
    # library) goes to stderr so that it cannot be taken for a reply.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", newline="\n")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    from agz_jax import __version__
    from agz_jax.base import cache
    from agz_jax.config.schema import ConfigError
    from agz_jax.nets import models
    from agz_jax.play import engine

    cache.enable_compilation_cache()

    plan: dict = {}

    def searches() -> dict:
        """The engines' settings, from the flags and the model (loaded once)."""
        if not plan:
            try:
                model = models.load(args.model)
            except models.ModelError as e:
                print(f"pbrain-agz: {e}", file=sys.stderr)
                raise
            plan.update(play_settings(model, args))
        return plan

    def make(which: str):
        def factory():
            p = searches()
            try:
                return engine.Engine(p["model"], chunk=args.chunk, seed=args.seed, **p[which])
            except ConfigError as e:
                print(f"pbrain-agz: {e}", file=sys.stderr)
                raise
        return factory

    def untimed():
        return make("untimed")() if searches()["untimed"] is not None else None

    brain = Brain(make("timed"), untimed_factory=untimed, debug=args.debug,
                  version=__version__)
    try:
        brain._ensure_engine()
    except ProtocolError:
        pass  # reported on stderr now and on every START
    if brain.engine is not None:
        brain.simulations = plan["simulations"]  # of a move without a time limit
    return serve(brain, sys.stdin.buffer, protocol_out)


def play_settings(model, args) -> dict:
    """The engines ``pbrain-agz`` plays with, from its flags and the model.

    Returns ``{"model", "simulations", "timed", "untimed"}``: ``timed`` and
    ``untimed`` are ``Engine`` keyword arguments (``untimed`` None when the
    timed engine serves the moves without a time limit too), ``simulations``
    the count of an untimed move.
    """
    from agz_jax.play.engine import PLAY_C_PUCT, PLAY_CAPACITY, default_threads

    own = model.config.search
    sims = own.num_simulations if args.sims is None else args.sims
    capacity = args.max_sims if args.max_sims is not None else max(PLAY_CAPACITY, sims)
    algorithm = args.algorithm or "puct"
    reuse = args.reuse if args.reuse is not None else algorithm == "puct"
    def engine_args(max_simulations: int, algorithm: str, reuse: bool,
                    c_puct: float | None = args.c_puct) -> dict:
        puct = algorithm == "puct"  # leaves, threads and first-play urgency are PUCT's
        return dict(max_simulations=max_simulations, algorithm=algorithm, reuse=reuse,
                    c_puct=c_puct if puct else None, leaves=args.leaves if puct else 0,
                    threads=(args.threads if args.threads is not None else
                             default_threads(algorithm)) if puct else 1,
                    fpu=args.fpu if puct else None, vcf=args.vcf, vct=args.vct,
                    threat_values=args.threat_values)

    timed = engine_args(capacity, algorithm, reuse,
                        PLAY_C_PUCT if args.c_puct is None else args.c_puct)
    untimed_algorithm = args.algorithm or own.algorithm
    untimed_reuse = (args.reuse if args.reuse is not None else own.reuse) \
        if untimed_algorithm == "puct" else False
    untimed = engine_args(sims, untimed_algorithm, untimed_reuse)
    # PUCT has no schedule: a bigger tree runs the same search of ``sims``.
    same = ((untimed_algorithm, untimed_reuse) == (algorithm, reuse) and algorithm == "puct"
            and (untimed["c_puct"] or own.c_puct) == timed["c_puct"])
    return {"model": model, "simulations": sims, "timed": timed,
            "untimed": None if same else untimed}


if __name__ == "__main__":
    sys.exit(main())
