"""A rating ladder: candidates play a fixed pool, every match goes into a
ledger, and one maximum-likelihood Elo fit over the whole ledger rates them all.

    python -m experiments.play.ladder --candidate mcts:runs/campaign:400
    python -m experiments.play.ladder --candidate policy:runs/campaign --pairs all --games 40
    python -m experiments.play.ladder --table-only
    python -m experiments.play.ladder --no-default-pool --pool random --candidate mentor:0 \\
        --size 7 --games 4 --ledger /tmp/ladder/games.jsonl

Players are the arena's SPECs (``python -m experiments.play.arena --help``). The
pool is random, mentor:0..3 and models/curriculum (a fixed copy of the shipped
net) as policy:curriculum and mcts:curriculum:400, plus every ``--pool``
SPEC (``--no-default-pool``: only those). Each ``--candidate`` plays every
pool member; ``--pairs all`` plays every pair of pool and candidates instead.
A match has ``--games`` games with the colours alternated by halves, and its
seed is fixed before it starts: derived from ``--seed`` and the two players'
names, and written down.

A ledger keeps one protocol, how its games start: ``--seed``, ``--openings``
and ``--opening-plies``. Left out, they are taken from the ledger's matches
(the shipped ledger's: ``--seed 1 --openings balanced15 --opening-plies 0``),
or are 0, no set and 2 for a new ledger; given and different from the
ledger's, they are refused before anything is played: a second protocol goes
in a ledger of its own.

Every finished match is appended to the LEDGER (``--ledger``, default
docs/ladder/games.jsonl) as one JSON line. A pairing already in it with the
same games and seed is skipped, so a killed ladder loses only the match it was
playing, and rerunning it resumes. A player whose net is a self-play run
directory's latest checkpoint is named ``SPEC@itN`` (N the checkpoint's
iteration), since the run goes on and its next checkpoint is another player; a
campaign model (``models/campaign``, rewritten by ``experiments.training.campaign
export``) is named ``SPEC@gN`` by its self-play games so far;
the ledger also keeps that iteration's cumulative self-play games and training
time (from the run's metrics.jsonl) for the plot.

With ``--outside PATH`` (or the environment's ``AGZ_JAX_OUTSIDE``), an
outside engine, Rapfi, joins the pool as ``rapfi:N`` for each N of
``--outside-nodes`` (its node limit per move): each candidate, played by
``pbrain-agz`` with ``--turn-ms`` per move, plays it over the Piskvork
protocol from the ledger's opening set (``experiments.play.outside``, which says
how; the ledger needs ``--openings SET --opening-plies 0``). Those games go in
the ledger one line each, a killed ladder losing only the game it was playing,
and outside.md beside it has their table and each candidate's rung.

After playing (or with ``--table-only``, without) the Elo fit
(``agz_jax.base.rating``) of every game in the ledger is written beside it:
ladder.md (player, Elo, 95% interval, games, score) and ladder.png (the
self-play runs' Elo against their self-play games and training time, the
other players as horizontal lines; ``agz_jax.studies.ladder_report``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agz_jax.config.schema import ConfigError
from agz_jax.play import players
from agz_jax.studies import outside
from agz_jax.studies.ladder import check_outside, play_ladder, write_outputs
from agz_jax.studies.ledger import DEFAULT_LEDGER, read_ledger, resolve_protocol


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.play.ladder", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidate", action="append", default=[], metavar="SPEC",
                        help="a player to rate (repeatable)")
    parser.add_argument("--pool", action="append", default=[], metavar="SPEC",
                        help="one more pool member (repeatable)")
    parser.add_argument("--no-default-pool", action="store_true",
                        help="the pool is only the --pool players")
    parser.add_argument("--pairs", choices=("candidates", "all"), default="candidates",
                        help="candidates: each candidate against every pool member (default); "
                             "all: every pair of pool and candidates")
    parser.add_argument("--ledger", type=Path, default=DEFAULT_LEDGER,
                        help=f"the matches, one JSON line each (default {DEFAULT_LEDGER}); "
                             "ladder.md and ladder.png are written beside it")
    parser.add_argument("--table-only", action="store_true",
                        help="play nothing: rewrite the table and plot from the ledger")
    players.add_match_args(parser, games=20, ledger=True)  # resolve_protocol fills them
    outside.add_args(parser, "--outside-nodes")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
        lines = read_ledger(args.ledger)
        resolve_protocol(args, lines, args.ledger)
        players.check_match_args(args)
        if not args.table_only:
            check_outside(args)
        if args.table_only:
            if not args.ledger.exists():
                raise ConfigError(f"{args.ledger} not found: play some matches first "
                                  "(drop --table-only), or name the ledger with --ledger")
        else:
            played = play_ladder(args, lines)
            print(f"{played} matches played", flush=True)
        md, png = write_outputs(lines, args.ledger)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # argparse: usage error (already printed) or --help
        return int(e.code or 0)
    print(md.read_text(), end="")
    print(f"table {md}, plot {png}")
    if any(outside.is_outside(x) for x in lines):
        print(f"outside engine's table {md.parent / 'outside.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
