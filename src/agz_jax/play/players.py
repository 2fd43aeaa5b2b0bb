"""The player SPEC language of matches and the ladder, and playing a match
between two SPECs (``python -m experiments.play.arena`` and
``python -m experiments.play.ladder`` share it).

A SPEC is ``random``, ``mentor:LEVEL``, ``policy:MODEL`` or
``mcts:MODEL:SIMS[:plain][:puct|:gumbel]`` (``python -m experiments.play.arena
--help`` says what each plays). ``parse_spec`` reads one (no file access),
``load_spec`` finds its model and config, ``make_player`` loads its
variables, ``play`` plays a match; ``add_match_args`` / ``check_match_args``
/ ``board_of`` / ``opening_set`` are the options of how a match is played,
shared by the commands.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from agz_jax.config.schema import Config, ConfigError
from agz_jax.game.gomoku import MAX_SIZE, MIN_SIZE, RULES


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
        from agz_jax.game.mentor import MAX_LEVEL

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
    from agz_jax.nets import checkpoint, models

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
    (``experiments.play.ladder``) so that both play matches the same way;
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


class Loaded(NamedTuple):
    """A player ready to play: ``make(variables) -> arena.Player`` (built inside
    the jitted chunk, so that the variables are arguments, not constants)."""

    make: Callable
    variables: Any
    step: int | None  # a run directory's checkpoint step (models.Model.step)


def make_player(spec: Spec, rules) -> Loaded:
    """Load a validated spec's player (reads a checkpoint player's variables)."""
    from agz_jax.match import arena
    from agz_jax.nets import models
    from agz_jax.search.searcher import Searcher

    if spec.kind == "random":
        return Loaded(lambda variables: arena.random_player(rules), None, None)
    if spec.kind == "mentor":
        from agz_jax.game.mentor import Mentor

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
    searcher = Searcher.of(rules, model.nets, search=search, decay=config.decay)
    return Loaded(lambda variables: arena.mcts_player(searcher, variables,
                                                      num_simulations=spec.sims),
                  model.variables, model.step)


def opening_set(args: argparse.Namespace, size: int):
    """``--openings``'s set for this board, or None (ConfigError naming the flag)."""
    if args.openings is None:
        return None
    from agz_jax.game import openings

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

    from agz_jax.match import arena

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

    from agz_jax.match import arena

    over = np.asarray(finished)
    wins = draws = losses = 0
    if over.any():
        s = arena.score(arena.MatchResult(np.asarray(so_far.winner)[over],
                                          np.asarray(so_far.a_black)[over], None, None))
        wins, draws, losses = s.wins, s.draws, s.losses
    return (f"ply {ply}: {int(np.sum(~over))} of {len(over)} games playing; "
            f"A {wins} wins / {draws} draws / {losses} losses so far; {seconds:.0f} s")


