"""An outside engine as a fixed yardstick: our players against Rapfi at node limits.

    python -m experiments.play.outside --candidate default \\
        --outside /opt/rapfi-src/build/pbrain-rapfi --nodes 1000,3000 --games 20 \\
        --turn-ms 1000 --ledger docs/outside/games.jsonl
    python -m experiments.play.outside --table-only --ledger docs/outside/games.jsonl
    python -m experiments.play.ladder --candidate mcts:default:400 --outside PATH  # in the ladder

Both sides are Piskvork (Gomocup) engines run as subprocesses by
``agz_jax.play.piskvork``, so our side is exactly what a Gomocup manager sees:
``pbrain-agz`` with ``INFO timeout_turn`` = ``--turn-ms`` (0: no clock, the
simulations decide), kept alive across games. A ``--candidate`` is a model
(``default``, a model or run directory: ``pbrain-agz --model MODEL``, which
under a clock searches until its time is spent, and with ``--turn-ms 0``
runs the model's own simulation count) or
``mcts:MODEL:SIMS[:puct|:gumbel]`` (``--sims SIMS``, and the algorithm: at
most SIMS simulations, fewer where the clock runs out first). Its ledger
name says how it played: ``pbrain:default@1000ms``,
``mcts:default:400@1000ms``, ``...@untimed`` for ``--turn-ms 0``; a run
directory's or campaign model's name gets the ladder's ``@itN`` / ``@gN``.

The outside engine (``--outside PATH``, or the environment's
``AGZ_JAX_OUTSIDE``; Rapfi, built by ``make rapfi``) plays as ``rapfi:N``
for each N of ``--nodes``: ``INFO max_node N``, ``INFO thread_num 1`` and a
turn limit of ``--outside-turn-ms`` (default 30 s, far above what 100,000
nodes take, so the node count decides). It runs in its own directory, where
Rapfi finds no config.toml and uses its built-in classical evaluation.

A match is ``--games`` games from the opening set (``--openings``, default
balanced15): each drawn opening is played twice in a row, the candidate black
and then white. The openings are drawn from the match seed, a hash of
``--seed`` and the two names fixed before anything is played
(``agz_jax.studies.ledger.pairing_seed``). Every finished game is appended to the
ledger as one line in the ladder's format (a one-game match, with an
``outside`` field: game number, opening, colours, moves, reason), so a killed
run loses only the game in progress and a rerun skips the games already in
the ledger. An engine that crashes, times out, answers ``ERROR`` or plays an
illegal move loses that game (the reason is kept) and is restarted for the
next one, said in one line on stderr; three such games in a row stop the
match.

outside.md, beside the ledger, has a table per candidate: opponent, games,
score, the results as black and as white (wins-draws-losses), the score's 95%
Wilson interval and the failures; and its rung: the largest max_node that the
candidate scored at least 50% against.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from agz_jax.config.schema import ConfigError
from agz_jax.play import players
from agz_jax.studies import ledger
from agz_jax.studies.outside import (
    DEFAULT_LEDGER,
    DEFAULT_OPENINGS,
    add_args,
    candidate,
    candidate_spec,
    check_turn_ms,
    outside_argv,
    parse_nodes,
    play,
    resolve_protocol,
)
from agz_jax.studies.outside_report import write_table


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.play.outside", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidate", action="append", default=[], metavar="MODEL|SPEC",
                        help="a player to measure: a model, or mcts:MODEL:SIMS (repeatable)")
    add_args(parser, "--nodes")
    parser.add_argument("--engine-args", default="", metavar="'FLAGS'",
                        help="more pbrain-agz flags for every candidate, e.g. '--fpu 0.2', "
                             "or --engine-args=--no-vcf for a flag alone (the candidate's "
                             "name carries them)")
    parser.add_argument("--games", type=int, default=20,
                        help="games per opponent (even, >= 2); default 20")
    parser.add_argument("--seed", type=int, default=None,
                        help="the seed the matches' seeds derive from (default: the "
                             "ledger's, or 0)")
    parser.add_argument("--openings", default=None, metavar="SET",
                        help=f"opening set (default: the ledger's, or {DEFAULT_OPENINGS})")
    parser.add_argument("--ledger", type=Path, default=DEFAULT_LEDGER,
                        help=f"the games, one JSON line each (default {DEFAULT_LEDGER}); "
                             "its table is written beside it (outside.md for games.jsonl, "
                             "NAME.md for NAME.jsonl)")
    parser.add_argument("--table-only", action="store_true",
                        help="play nothing: rewrite the ledger's table")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
        lines = ledger.read_ledger(args.ledger)
        if not args.table_only:
            resolve_protocol(args, lines, args.ledger)
            if args.games < 2 or args.games % 2:
                raise ConfigError(f"--games must be even and at least 2, got {args.games}")
            nodes = parse_nodes(args.nodes)
            check_turn_ms(args.turn_ms, args.outside_turn_ms)
            outside = outside_argv(args.outside)
            if not args.candidate:
                raise ConfigError("nothing to play: give --candidate MODEL (or "
                                  "mcts:MODEL:SIMS), or --table-only")
            specs = [candidate_spec(t) for t in args.candidate]
            size, rule = players.board_of([("--candidate", s) for s in specs],
                                          argparse.Namespace(size=None, rule=None,
                                                             opening_plies=0))
            ledger.check_board(lines, args.ledger, size, rule)
            openings = players.opening_set(args, size)
            candidates = list({c.name: c for c in (candidate(s, args.turn_ms,
                                                             engine_args=args.engine_args)
                                                   for s in specs)}.values())
            t0 = time.monotonic()
            played = play(candidates, outside, nodes, seed=args.seed, games=args.games,
                          turn_ms=args.turn_ms, outside_turn_ms=args.outside_turn_ms,
                          openings=openings, openings_name=args.openings,
                          ledger=args.ledger, lines=lines)
            print(f"{played} games played in {time.monotonic() - t0:.0f} s", flush=True)
        elif not args.ledger.exists():
            raise ConfigError(f"{args.ledger} not found: play some games first (drop "
                              "--table-only), or name the ledger with --ledger")
        md = write_table(lines, args.ledger)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # argparse: usage error (already printed) or --help
        return int(e.code or 0)
    print(md.read_text(), end="")
    print(f"table {md}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
    sys.exit(130)
