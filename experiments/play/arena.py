"""A match between two players: scores, the 95% interval and the Elo difference.

    python -m experiments.play.arena --a mcts:runs/cpu:64 --b random --games 20
    python -m experiments.play.arena --a policy:runs/cpu --b mcts:runs/old:32 --games 40 --json
    python -m experiments.play.arena --a random --b random --games 4 --size 9 --out games/

A player SPEC is one of:

    random              uniform over legal moves
    mentor:LEVEL        the rule-based mentor (agz_jax.game.mentor), LEVEL 0..3
    policy:MODEL        the model's net, the raw policy's argmax, no search
    mcts:MODEL:SIMS     the model's net with SIMS simulations of its own search
                        config, no root noise, the most visited move
    mcts:MODEL:SIMS:plain   the same with the hand-written search rules off
                        (search.forced_moves, answer_threats, answer_four_threes,
                        threat_values): the nets and plain search alone
    mcts:MODEL:SIMS:puct    the same nets and rules, searched by PUCT instead of
    mcts:MODEL:SIMS:gumbel  the model's own search.algorithm (or by Gumbel);
                        combines with plain, e.g. mcts:default:400:plain:puct

MODEL is a model name (``default`` = models/default in this repository), a
model directory, a run directory written by ``python -m experiments.selfplay``
(its best net) or one written by ``python -m experiments.training.curriculum``. Player A
is black in the first half of the games and white in the second. With
``--openings SET`` (a shipped opening set such as ``balanced15``, or a file;
``agz_jax.game.openings``) every game starts from an opening of the set, each drawn
opening played once with each colour; then (or from the empty board) the first
``--opening-plies`` moves are random central moves, so that deterministic
players still play distinct games.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from agz_jax.base.cache import enable_compilation_cache
from agz_jax.config.schema import ConfigError
from agz_jax.play import players
from agz_jax.play.players import (
    Spec,
    add_match_args,
    board_of,
    check_match_args,
    load_spec,
    make_player,
    opening_set,
    parse_spec,
)


def check_out(out: Path | None) -> None:
    """Refuse, before anything is played, an ``--out`` that cannot take this
    match's games (ConfigError): a file, a path under a file, or a directory
    that already holds an earlier match's game_NNNN.psq (they would be
    overwritten, or mixed with this match's)."""
    if out is None:
        return
    for place in (out, *out.parents):  # the nearest that exists
        if place.exists():
            break
    if not place.is_dir():
        what = "is" if place == out else f"is under {place}, which is"
        raise ConfigError(f"--out {out} {what} a file, not a directory; give a directory "
                          "for the games")
    if place == out:
        earlier = sorted(out.glob("game_*.psq"))
        if earlier:
            raise ConfigError(f"--out {out} already holds {len(earlier)} games of an earlier "
                              f"match ({earlier[0].name}, ...); give a new directory, or move "
                              "those games away")
    if not os.access(place, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {out}: {place} is not writable; give another directory")


def parse(argv: list[str]) -> tuple[argparse.Namespace, Spec, Spec, int, str]:
    """Parse and validate everything; (args, spec A, spec B, board size, rule)."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.play.arena", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, metavar="SPEC", help="player A")
    parser.add_argument("--b", required=True, metavar="SPEC", help="player B")
    add_match_args(parser)
    parser.add_argument("--out", type=Path, default=None, help="save every game as .psq here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    check_match_args(args)
    check_out(args.out)
    a = load_spec(parse_spec(args.a, "--a"), "--a")
    b = load_spec(parse_spec(args.b, "--b"), "--b")
    size, rule = board_of([("--a", a), ("--b", b)], args)
    args.opening_set = opening_set(args, size)
    return args, a, b, size, rule


def summary_text(stats: dict) -> str:
    a, b = stats["a"], stats["b"]
    lines = [
        f"{stats['games']} games on {stats['size']}x{stats['size']} {stats['rule']} "
        f"(seed {stats['seed']}, {stats['opening_plies']} random opening plies, "
        f"mean length {stats['mean_length']:.1f})",
        f"  A = {a}",
        f"  B = {b}",
        f"  A: {stats['wins']} wins / {stats['draws']} draws / {stats['losses']} losses "
        f"({stats['wins_as_black']} wins as black, {stats['wins_as_white']} as white)",
        f"  score {stats['score']:.3f} (95% CI {stats['low']:.3f}..{stats['high']:.3f}), "
        f"Elo A - B {stats['elo']:+.0f}",
    ]
    if stats.get("out"):
        lines.append(f"  games saved in {stats['out']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args, spec_a, spec_b, size, rule = parse(argv)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # argparse: usage error (already printed) or --help
        return int(e.code or 0)

    enable_compilation_cache()
    import numpy as np

    from agz_jax.game import records
    from agz_jax.game.gomoku import Rules
    from agz_jax.match import arena
    from agz_jax.nets import checkpoint, models

    rules = Rules(size, rule)
    loaded = []
    for flag, spec in (("--a", spec_a), ("--b", spec_b)):
        try:
            loaded.append(make_player(spec, rules))
        except (checkpoint.CheckpointError, models.ModelError) as e:
            print(f"error: {flag} {spec.text!r}: {e}", file=sys.stderr)
            return 2
    player_a, player_b = loaded

    plies = args.opening_plies
    result, wall = players.play(rules, player_a, player_b, args.seed, args.games, plies,
                                args.chunk, args.opening_set)
    s = arena.score(result)
    stats = {"a": spec_a.text, "b": spec_b.text, "seed": args.seed, "size": size, "rule": rule,
             "openings": args.openings, "opening_plies": plies, **s._asdict(),
             "mean_length": float(np.mean(result.length)), "seconds": wall}
    stats["elo"] += 0.0  # no "-0" for an even score
    if args.out is not None:
        records.save_match(args.out, result, size, names=(spec_a.text, spec_b.text), rule=rule)
        stats["out"] = str(args.out)
    if args.json:
        print(json.dumps(stats, sort_keys=True))
    else:
        print(summary_text(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
