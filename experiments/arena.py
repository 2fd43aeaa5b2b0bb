"""A match between two players: scores, the 95% interval and the Elo difference.

    python -m experiments.arena --a mcts:runs/cpu:64 --b random --games 20
    python -m experiments.arena --a policy:runs/cpu --b mcts:runs/old:32 --games 40 --json
    python -m experiments.arena --a random --b random --games 4 --size 9 --out games/

A player SPEC is one of:

    random              uniform over legal moves
    mentor:LEVEL        the rule-based mentor (agz_jax.mentor), LEVEL 0..3
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
(its best net) or one written by ``python -m experiments.curriculum``. Player A
is black in the first half of the games and white in the second. With
``--openings SET`` (a shipped opening set such as ``balanced15``, or a file;
``agz_jax.openings``) every game starts from an opening of the set, each drawn
opening played once with each colour; then (or from the empty board) the first
``--opening-plies`` moves are random central moves, so that deterministic
players still play distinct games.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from agz_jax.cache import enable_compilation_cache
from agz_jax.config import Config, ConfigError
from agz_jax.gomoku import MAX_SIZE, MIN_SIZE, RULES


class Spec(NamedTuple):
    text: str  # as given on the command line
    kind: str  # random | mentor | policy | mcts
    run_dir: Path | None = None  # the model's directory (checkpoint players)
    sims: int | None = None
    level: int | None = None  # mentor
    config: Config | None = None  # the run's config (checkpoint players)
    plain: bool = False  # mcts: the hand-written search rules switched off
    algorithm: str | None = None  # mcts: search.algorithm instead of the model's own


ALGORITHMS = ("puct", "gumbel")  # search.algorithm's values, as mcts SPEC options


def parse_spec(text: str, flag: str) -> Spec:
    """Parse a player SPEC (no file access); raises ConfigError naming the flag."""
    usage = "expected random, mentor:LEVEL, policy:MODEL or mcts:MODEL:SIMS"
    kind, sep, rest = text.partition(":")
    if kind == "random":
        if sep:
            raise ConfigError(f"{flag} {text!r}: 'random' takes no argument")
        return Spec(text, "random")
    if kind == "mentor":
        from agz_jax.mentor import MAX_LEVEL

        try:
            level = int(rest)
        except ValueError:
            raise ConfigError(f"{flag} {text!r}: mentor needs a level, mentor:LEVEL with "
                              f"LEVEL in 0..{MAX_LEVEL}") from None
        if not 0 <= level <= MAX_LEVEL:
            raise ConfigError(f"{flag} {text!r}: mentor level must be in 0..{MAX_LEVEL}, "
                              f"got {level}")
        return Spec(text, "mentor", level=level)
    if kind == "policy":
        if not rest:
            raise ConfigError(f"{flag} {text!r}: policy needs a model, policy:MODEL")
        return Spec(text, "policy", Path(rest))
    if kind == "mcts":
        plain, algorithm = False, None
        while True:  # the options after SIMS, each at most once, in any order
            head, _, option = rest.rpartition(":")
            if option == "plain" and not plain:
                plain = True
            elif option in ALGORITHMS and algorithm is None:
                algorithm = option
            elif option in ("plain", *ALGORITHMS):
                raise ConfigError(f"{flag} {text!r}: the option {option!r} is given twice "
                                  "or with another algorithm; mcts:MODEL:SIMS[:plain]"
                                  "[:puct|:gumbel]")
            else:
                break
            rest = head
        run_dir, sep2, sims = rest.rpartition(":")
        if not sep2 or not run_dir:
            raise ConfigError(f"{flag} {text!r}: mcts needs a model and a number of "
                              "simulations, mcts:MODEL:SIMS")
        try:
            n = int(sims)
        except ValueError:
            fields = rest.split(":")
            counts = [i for i, f in enumerate(fields[1:], 1) if f.strip().lstrip("-").isdigit()]
            if counts:  # SIMS given, then an option that is none of the known ones
                unknown = next(f for f in fields[counts[-1] + 1:]
                               if f not in ("plain", *ALGORITHMS))
                raise ConfigError(
                    f"{flag} {text!r}: unknown option {unknown!r} after SIMS; "
                    f"the options are {', '.join(('plain', *ALGORITHMS))}: "
                    "mcts:MODEL:SIMS[:plain][:puct|:gumbel]") from None
            raise ConfigError(f"{flag} {text!r}: SIMS must be an integer, got {sims!r}") from None
        if n < 1:
            raise ConfigError(f"{flag} {text!r}: SIMS must be at least 1, got {n}")
        return Spec(text, "mcts", Path(run_dir), n, plain=plain, algorithm=algorithm)
    raise ConfigError(f"{flag} {text!r}: unknown player kind {kind!r}; {usage}")


def load_spec(spec: Spec, flag: str) -> Spec:
    """Find a checkpoint player's model and read its config (no compiling)."""
    if spec.run_dir is None:
        return spec
    from agz_jax import checkpoint, models

    try:
        path = models.resolve(spec.run_dir)
        config = models.read_config(path)
    except models.ModelError as e:
        raise ConfigError(f"{flag} {spec.text!r}: {e}") from e
    if (not (path / models.VARIABLES_FILE).exists()
            and checkpoint.latest_step(path) is None):
        raise ConfigError(f"{flag} {spec.text!r}: no checkpoint in {path / 'checkpoints'} "
                          f"and no {models.VARIABLES_FILE} in {path}")
    return spec._replace(run_dir=path, config=config)


def add_match_args(parser: argparse.ArgumentParser, games: int | None = None,
                   ledger: bool = False) -> None:
    """The options of how a match is played, shared with the ladder
    (``experiments.ladder``) so that both play matches the same way;
    ``games``: the default of ``--games`` (None: required). With ``ledger``
    (the ladder) how games start, ``--seed``, ``--openings`` and
    ``--opening-plies``, defaults to None: the ledger's, filled in later."""
    seed, plies = (None, None) if ledger else (0, 2)
    said = (lambda value: ": the ledger's" if ledger else f" {value}")
    parser.add_argument("--games", required=games is None, type=int, default=games,
                        help="games per match (even, >= 2)"
                             + ("" if games is None else f"; default {games}"))
    parser.add_argument("--seed", type=int, default=seed,
                        help=f"match seed (default{said(0)})")
    parser.add_argument("--openings", default=None, metavar="SET",
                        help="start every game from an opening of SET (a shipped set, e.g. "
                             "balanced15, or a file), each drawn opening with both colours"
                             + (" (default: the ledger's)" if ledger else ""))
    parser.add_argument("--opening-plies", type=int, default=plies,
                        help=f"random central moves after the opening (default{said(2)})")
    parser.add_argument("--size", type=int, default=None,
                        help="board size when no player has a checkpoint (default 15); "
                             "otherwise the checkpoint's")
    parser.add_argument("--rule", default=None, choices=RULES,
                        help="rule when no player has a checkpoint (default freestyle)")
    parser.add_argument("--chunk", type=int, default=8,
                        help="plies per jitted chunk; finished games leave the batch between "
                             "chunks (arena.play_match_compact). 0: the whole match in one "
                             "scan, every ply at full batch (arena.play_match). Default 8")


def check_match_args(args: argparse.Namespace) -> None:
    """Validate ``add_match_args``'s options that need no player (ConfigError)."""
    if args.games < 2 or args.games % 2:
        raise ConfigError(f"--games must be even and at least 2, got {args.games}")
    if args.chunk < 0:
        raise ConfigError(f"--chunk must be >= 0, got {args.chunk}")
    if args.opening_plies < 0:
        raise ConfigError(f"--opening-plies must be >= 0, got {args.opening_plies}")
    if args.size is not None and not MIN_SIZE <= args.size <= MAX_SIZE:
        raise ConfigError(f"--size must be in {MIN_SIZE}..{MAX_SIZE}, got {args.size}")


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


def board_of(players: list[tuple[str, Spec]], args: argparse.Namespace) -> tuple[int, str]:
    """The board size and rule that all ``(flag, loaded spec)`` players play: the
    checkpoints' (which must agree with each other and with ``--size`` /
    ``--rule``), else ``--size`` / ``--rule``; ConfigError naming the players
    that disagree."""
    loaded = [(f, s) for f, s in players if s.config is not None]
    if loaded:
        flag, s = loaded[0]
        size, rule = s.config.game.size, s.config.game.rule
        for other_flag, o in loaded[1:]:
            g = o.config.game
            if g.size != size:
                raise ConfigError(f"board sizes differ: {flag} {s.text} plays {size}x{size}, "
                                  f"{other_flag} {o.text} plays {g.size}x{g.size}")
            if g.rule != rule:
                raise ConfigError(f"rules differ: {flag} {s.text} plays {rule}, "
                                  f"{other_flag} {o.text} plays {g.rule}")
        if args.size is not None and args.size != size:
            raise ConfigError(f"--size {args.size} differs from the board of {flag} {s.text} "
                              f"({size}x{size}); drop --size")
        if args.rule is not None and args.rule != rule:
            raise ConfigError(f"--rule {args.rule} differs from the rule of {flag} {s.text} "
                              f"({rule}); drop --rule")
    else:
        size, rule = args.size or 15, args.rule or "freestyle"
    if rule == "standard" and any(s.kind == "mentor" for _, s in players):
        raise ConfigError("the mentor knows freestyle and renju, not standard: this match "
                          "is standard")
    if args.opening_plies > size * size:
        raise ConfigError(f"--opening-plies {args.opening_plies} exceeds the "
                          f"{size * size} points of the board")
    return size, rule


def parse(argv: list[str]) -> tuple[argparse.Namespace, Spec, Spec, int, str]:
    """Parse and validate everything; (args, spec A, spec B, board size, rule)."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.arena", description=__doc__,
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


class Loaded(NamedTuple):
    """A player ready to play: ``make(variables) -> arena.Player`` (built inside
    the jitted chunk, so that the variables are arguments, not constants)."""

    make: Callable
    variables: Any
    step: int | None  # a run directory's checkpoint step (models.Model.step)


def make_player(spec: Spec, rules) -> Loaded:
    """Load a validated spec's player (reads a checkpoint player's variables)."""
    from agz_jax import arena, models
    from agz_jax.search import Searcher

    if spec.kind == "random":
        return Loaded(lambda variables: arena.random_player(rules), None, None)
    if spec.kind == "mentor":
        from agz_jax.mentor import Mentor

        return Loaded(lambda variables: Mentor(rules, spec.level).act, None, None)
    model = models.load(spec.run_dir)
    config = model.config
    if spec.kind == "policy":
        return Loaded(lambda variables: arena.policy_player(rules, model.nets, variables),
                      model.variables, model.step)
    search = config.search
    if spec.plain:
        search = dataclasses.replace(search, forced_moves=False, answer_threats=False,
                                     answer_four_threes=False, threat_values=False)
    if spec.algorithm is not None:
        search = dataclasses.replace(search, algorithm=spec.algorithm)
    searcher = Searcher(rules=rules, nets=model.nets, settings=search, gamma=config.decay.gamma)
    return Loaded(lambda variables: arena.mcts_player(searcher, variables,
                                                      num_simulations=spec.sims),
                  model.variables, model.step)


def opening_set(args: argparse.Namespace, size: int):
    """``--openings``'s set for this board, or None (ConfigError naming the flag)."""
    if args.openings is None:
        return None
    from agz_jax import openings

    try:
        return openings.load(args.openings, size)
    except openings.OpeningsError as e:
        raise ConfigError(f"--openings: {e}") from None


def play(rules, a: Loaded, b: Loaded, seed: int, games: int, opening_plies: int,
         chunk: int, openings=None):
    """Play one match of A against B (colours by halves), the running score on
    stderr after every chunk; (arena.MatchResult of numpy arrays, wall seconds)."""
    import time

    import jax

    from agz_jax import arena

    key = jax.random.PRNGKey(seed)
    t0 = time.perf_counter()
    if chunk:
        def progress(ply, so_far, finished):
            print(progress_text(ply, so_far, finished, time.perf_counter() - t0),
                  file=sys.stderr, flush=True)

        result = arena.play_match_compact(
            rules, lambda v: (a.make(v[0]), b.make(v[1])), (a.variables, b.variables), key,
            games, opening_plies, chunk=chunk, on_chunk=progress, openings=openings)
    else:
        @jax.jit
        def match(key, va, vb):
            return arena.play_match(rules, a.make(va), b.make(vb), key, games, opening_plies,
                                    openings=openings)

        result = jax.device_get(match(key, a.variables, b.variables))
    return result, time.perf_counter() - t0


def progress_text(ply: int, so_far, finished, seconds: float) -> str:
    """One line of a running match: the games over and A's results in them
    (``arena.score`` of those games)."""
    import numpy as np

    from agz_jax import arena

    over = np.asarray(finished)
    wins = draws = losses = 0
    if over.any():
        s = arena.score(arena.MatchResult(np.asarray(so_far.winner)[over],
                                          np.asarray(so_far.a_black)[over], None, None))
        wins, draws, losses = s.wins, s.draws, s.losses
    return (f"ply {ply}: {int(np.sum(~over))} of {len(over)} games playing; "
            f"A {wins} wins / {draws} draws / {losses} losses so far; {seconds:.0f} s")


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

    from agz_jax import arena, checkpoint, models, records
    from agz_jax.gomoku import Rules

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
    result, wall = play(rules, player_a, player_b, args.seed, args.games, plies, args.chunk,
                        args.opening_set)
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
