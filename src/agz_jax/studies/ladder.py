"""The rating ladder (``python -m experiments.play.ladder``): candidates play a
fixed pool (``DEFAULT_POOL`` and more), every match appended to the ledger
(``agz_jax.studies.ledger``), an outside engine's games too (``agz_jax.studies.outside``);
then one Elo fit over the whole ledger, written beside it as ladder.md and
ladder.png (``agz_jax.studies.ladder_report``)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from agz_jax.config.schema import ConfigError
from agz_jax.play import players
from agz_jax.studies import outside, outside_report
from agz_jax.studies.ladder_report import plot, table
from agz_jax.studies.ledger import (
    CAMPAIGN_LEDGER,
    append_line,
    campaign_progress,
    check_board,
    done_key,
    plan,
    selfplay_progress,
)

DEFAULT_POOL = ("random", "mentor:0", "mentor:1", "mentor:2", "mentor:3",
                "policy:curriculum", "mcts:curriculum:400")


def check_outside(args: argparse.Namespace) -> None:
    """With ``--outside``: its engine, node levels, clocks and the ledger's
    openings checked (ConfigError) before anything is played; sets
    ``args.outside_argv`` and ``args.outside_nodes_list`` (None without)."""
    args.outside_argv = args.outside_nodes_list = None
    if args.outside is None:
        return
    args.outside_nodes_list = outside.parse_nodes(args.outside_nodes, "--outside-nodes")
    outside.check_turn_ms(args.turn_ms, args.outside_turn_ms)
    args.outside_argv = outside.outside_argv(args.outside)
    outside.require_openings(args)


def parse_player(text: str, flag: str) -> players.Spec:
    """The arena's spec, loaded; a bare directory gets told how to become one."""
    try:
        spec = players.parse_spec(text, flag)
    except ConfigError:
        if Path(text).is_dir():
            raise ConfigError(f"{flag} {text!r} is a directory, not a player: say how it "
                              f"plays, mcts:{text}:400 or policy:{text}") from None
        raise
    return players.load_spec(spec, flag)


class Player(NamedTuple):
    name: str  # in the ledger: the spec, with @itN for a run directory's checkpoint
    loaded: players.Loaded
    sims: int | None
    progress: dict | None  # selfplay_progress, for a run directory's checkpoint


def load_players(specs: list[tuple[str, players.Spec]], rules
                 ) -> tuple[dict[str, Player], list[str]]:
    """The players by name, and the name of each spec in order (a run
    directory's name carries the iteration of the checkpoint actually read)."""
    from agz_jax.nets import checkpoint, models

    by_name: dict[str, Player] = {}
    names = []
    for flag, spec in specs:
        try:
            loaded = players.make_player(spec, rules)
        except (checkpoint.CheckpointError, models.ModelError) as e:
            raise ConfigError(f"{flag} {spec.text!r}: {e}") from None
        name, progress = spec.text, None
        if loaded.step is not None:
            name = f"{spec.text}@it{loaded.step}"
            progress = selfplay_progress(spec.run_dir, loaded.step)
        elif spec.run_dir is not None and (spec.run_dir / CAMPAIGN_LEDGER).is_file():
            progress = campaign_progress(spec.run_dir)
            name = f"{spec.text}@g{progress['games']}"
        by_name.setdefault(name, Player(name, loaded, spec.sims, progress))
        names.append(name)
    return by_name, names


def play_ladder(args: argparse.Namespace, lines: list[dict]) -> int:
    """Play the missing pairings, appending each to the ledger file and to
    ``lines`` (the ledger read so far); the number played."""
    pool_texts = ([] if args.no_default_pool else list(DEFAULT_POOL)) + args.pool
    outside_on = args.outside_argv is not None
    if not pool_texts and not outside_on:
        raise ConfigError("the pool is empty: give --pool SPEC, or drop --no-default-pool")
    if not args.candidate and args.pairs != "all":
        raise ConfigError("nothing to play: give --candidate SPEC, or --pairs all to fill "
                          "the pool's missing pairs, or --table-only to redraw the table")
    if outside_on and not args.candidate and not pool_texts:
        raise ConfigError("nothing to play: the outside engine plays the candidates; "
                          "give --candidate SPEC")
    if pool_texts and not outside_on and not plan(
            args.candidate, pool_texts, args.pairs == "all", 0, args.games, set()):
        raise ConfigError(f"nothing to play: {pool_texts[0]} is the only player (pool and "
                          "candidates alike); give it an opponent with --pool SPEC or "
                          "--candidate SPEC")
    specs = ([("--pool", parse_player(t, "--pool")) for t in pool_texts]
             + [("--candidate", parse_player(t, "--candidate")) for t in args.candidate])
    if outside_on:  # refused before anything is played
        for flag, spec in specs[len(pool_texts):]:
            outside.check_spec(spec, flag)
    size, rule = players.board_of(specs, args)
    check_board(lines, args.ledger, size, rule)
    openings = players.opening_set(args, size)

    from agz_jax.base.cache import enable_compilation_cache
    from agz_jax.game.gomoku import Rules
    from agz_jax.match import arena

    enable_compilation_cache()
    rules = Rules(size, rule)
    by_name, names = load_players(specs, rules)
    pool = list(dict.fromkeys(names[:len(pool_texts)]))
    candidates = list(dict.fromkeys(names[len(pool_texts):]))
    done = {done_key(x["a"], x["b"], x["games"], x["seed"]) for x in lines}
    todo = plan(candidates, pool, args.pairs == "all", args.seed, args.games, done)
    try:
        args.ledger.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--ledger {args.ledger}: cannot make its directory ({e}); "
                          "name a ledger file in a directory") from None
    print(f"{len(todo)} matches to play on {size}x{size} {rule}, {args.games} games each "
          f"(ledger {args.ledger})", flush=True)
    for i, p in enumerate(todo, 1):
        a, b = by_name[p.a], by_name[p.b]
        print(f"[{i}/{len(todo)}] {p.a} vs {p.b}, seed {p.seed}", flush=True)
        result, wall = players.play(rules, a.loaded, b.loaded, p.seed, args.games,
                                    args.opening_plies, args.chunk, openings)
        s = arena.score(result)
        line = {"a": p.a, "b": p.b, "wins": s.wins, "draws": s.draws, "losses": s.losses,
                "games": s.games, "seed": p.seed, "ladder_seed": args.seed,
                "sims": [a.sims, b.sims], "size": size, "rule": rule,
                "openings": args.openings, "opening_plies": args.opening_plies,
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "seconds": round(wall, 1)}
        progress = {q.name: q.progress for q in (a, b) if q.progress is not None}
        if progress:
            line["selfplay"] = progress
        append_line(args.ledger, json.dumps(line))
        lines.append(line)
        # Every pairing compiles its own players; a long ladder that kept them all
        # ran out of memory maps for XLA's code (LLVM "Unable to allocate section
        # memory" after 23 matches of 15x15), so each match's are dropped.
        arena.drop_compiled()
        print(f"  {s.wins} wins / {s.draws} draws / {s.losses} losses for {p.a} "
              f"(score {s.score:.3f}), {wall:.0f} s", flush=True)
    if outside_on:
        theirs = [outside.candidate(spec, args.turn_ms, name) for (_, spec), name
                  in zip(specs[len(pool_texts):], names[len(pool_texts):], strict=True)]
        outside.play(list({c.name: c for c in theirs}.values()), args.outside_argv,
                      args.outside_nodes_list, seed=args.seed, games=args.games,
                      turn_ms=args.turn_ms, outside_turn_ms=args.outside_turn_ms,
                      openings=openings, openings_name=args.openings, ledger=args.ledger,
                      lines=lines)
    return len(todo)


def write_outputs(lines: list[dict], ledger: Path) -> tuple[Path, Path]:
    """Fit every game of the ledger; write ladder.md and ladder.png beside it
    (and outside.md when it holds games against an outside engine)."""
    from agz_jax.base import rating

    if not lines:
        raise ConfigError(f"{ledger} holds no match: play some first (drop --table-only)")
    check_board(lines, ledger)
    if any(outside.is_outside(x) for x in lines):
        outside_report.write_table(lines, ledger)
        lines = outside_report.as_matches(lines)  # an outside match's games as one line
    fit = rating.fit(rating.Match(x["a"], x["b"], x["wins"], x["draws"], x["losses"])
                     for x in lines)
    md, png = ledger.parent / "ladder.md", ledger.parent / "ladder.png"
    md.write_text(table(fit, lines, ledger))
    plot(fit, lines, png)
    return md, png


