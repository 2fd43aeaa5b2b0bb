"""A rating ladder: candidates play a fixed pool, every match goes into a
ledger, and one maximum-likelihood Elo fit over the whole ledger rates them all.

    python -m experiments.ladder --candidate mcts:runs/campaign:400
    python -m experiments.ladder --candidate policy:runs/campaign --pairs all --games 40
    python -m experiments.ladder --table-only
    python -m experiments.ladder --no-default-pool --pool random --candidate mentor:0 \\
        --size 7 --games 4 --ledger /tmp/ladder/games.jsonl

Players are the arena's SPECs (``python -m experiments.arena --help``). The
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
campaign model (``models/campaign``, rewritten by ``experiments.campaign
export``) is named ``SPEC@gN`` by its self-play games so far;
the ledger also keeps that iteration's cumulative self-play games and training
time (from the run's metrics.jsonl) for the plot.

With ``--outside PATH`` (or the environment's ``AGZ_JAX_OUTSIDE``), an
outside engine, Rapfi, joins the pool as ``rapfi:N`` for each N of
``--outside-nodes`` (its node limit per move): each candidate, played by
``pbrain-agz`` with ``--turn-ms`` per move, plays it over the Piskvork
protocol from the ledger's opening set (``experiments.outside``, which says
how; the ledger needs ``--openings SET --opening-plies 0``). Those games go in
the ledger one line each, a killed ladder losing only the game it was playing,
and outside.md beside it has their table and each candidate's rung.

After playing (or with ``--table-only``, without) the Elo fit
(``agz_jax.rating``) of every game in the ledger is written beside it:
ladder.md (player, Elo, 95% interval, games, score) and ladder.png (the
self-play runs' Elo against their self-play games and training time, the
other players as horizontal lines; ``experiments.ladder_report``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from agz_jax.config import ConfigError
from experiments import arena as arena_cli
from experiments import outside
from experiments.ladder_report import DEFAULT_LEDGER, plot, table

DEFAULT_POOL = ("random", "mentor:0", "mentor:1", "mentor:2", "mentor:3",
                "policy:curriculum", "mcts:curriculum:400")
# Fields every ledger line must carry (the rest are informative).
REQUIRED = {"a": str, "b": str, "wins": int, "draws": int, "losses": int, "games": int,
            "seed": int, "size": int, "rule": str}


class Pairing(NamedTuple):
    a: str
    b: str
    seed: int  # the match's seed


def pairing_seed(seed: int, a: str, b: str) -> int:
    """The match seed of a pairing: a hash of the ladder's seed and the two names,
    in either order, so that every pairing gets its own games, fixed before
    anything is played, and the same ones on every rerun or machine."""
    text = "\n".join([str(seed), *sorted((a, b))])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") >> 1


def done_key(a: str, b: str, games: int, seed: int) -> tuple:
    return frozenset((a, b)), games, seed


def plan(candidates: list[str], pool: list[str], all_pairs: bool, seed: int, games: int,
         done: set) -> list[Pairing]:
    """The pairings still to play: each candidate against every pool member (or,
    with ``all_pairs``, every pair of pool and candidates), minus those in
    ``done`` (``done_key``s of the ledger)."""
    if all_pairs:
        players = list(dict.fromkeys(pool + candidates))
        pairs = [(a, b) for i, a in enumerate(players) for b in players[i + 1:]]
    else:
        pairs = [(c, p) for c in candidates for p in pool if c != p]
    out, seen = [], set()
    for a, b in pairs:
        s = pairing_seed(seed, a, b)
        key = done_key(a, b, games, s)
        if key not in done and key not in seen:
            seen.add(key)
            out.append(Pairing(a, b, s))
    return out


def read_ledger(path: Path) -> list[dict]:
    """The ledger's matches, in order; ConfigError naming the first bad line."""
    if path.is_dir():
        raise ConfigError(f"{path} is a directory, not a ledger file; name the ledger "
                          f"file, e.g. {path / DEFAULT_LEDGER.name}")
    if not path.exists():
        return []
    try:
        content = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} is not a readable ledger ({e}); fix it, or name "
                          "another ledger file") from None
    lines = []
    for n, text in enumerate(content.splitlines(), 1):
        if not text.strip():
            continue
        where = f"{path} line {n}"
        fix = "fix or delete that line"
        try:
            line = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{where} is not JSON ({e}); {fix}") from None
        if not isinstance(line, dict):
            raise ConfigError(f"{where} is not a JSON object; {fix}")
        for field, kind in REQUIRED.items():
            value = line.get(field)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ConfigError(f"{where}: field {field!r} must be a {kind.__name__}, "
                                  f"got {value!r}; {fix}")
        counts = [line[k] for k in ("wins", "draws", "losses")]
        if min(counts) < 0 or sum(counts) != line["games"] or line["games"] < 1:
            raise ConfigError(f"{where}: wins + draws + losses must equal games (>= 1), "
                              f"got {counts} and {line['games']}; {fix}")
        if not line["a"] or line["a"] == line["b"]:
            raise ConfigError(f"{where}: a and b must be two named players; {fix}")
        lines.append(line)
    return lines


def append_line(path: Path, text: str) -> None:
    """Append one line, starting a new one if a hand edit left the last line open
    (else two matches would share a line and the ledger would stop parsing)."""
    with path.open("ab+") as f:  # appends go to the end whatever the position
        end = f.seek(0, 2)
        if end:
            f.seek(end - 1)
            if f.read(1) != b"\n":
                f.write(b"\n")
        f.write(text.encode() + b"\n")


# How a ledger's games start, and a new ledger's default: (ladder seed, opening
# set, random opening plies), as the ledger's lines and the flags name them.
PROTOCOL = (("ladder_seed", "--seed", "seed"), ("openings", "--openings", "openings"),
            ("opening_plies", "--opening-plies", "opening_plies"))
NEW_LEDGER_PROTOCOL = {"seed": 0, "openings": None, "opening_plies": 2}


def protocol_flags(values: dict) -> str:
    """``{"seed": 1, ...}`` as the flags that ask for it."""
    return " ".join(f"{flag} {values[attr]}" for _, flag, attr in PROTOCOL
                    if values[attr] is not None)  # no --openings: no set


def resolve_protocol(args: argparse.Namespace, lines: list[dict], path: Path) -> None:
    """Fill the protocol flags left out (None) from the ledger's matches, or for a
    new ledger from ``NEW_LEDGER_PROTOCOL``; ConfigError, before anything is
    played, for flags that would start games otherwise than the ledger's."""
    kept = [{attr: line.get(field) for field, _, attr in PROTOCOL}
            for line in lines if "ladder_seed" in line]
    protocols = list({tuple(sorted(k.items())): k for k in kept}.values())
    base = protocols[0] if len(protocols) == 1 else NEW_LEDGER_PROTOCOL
    given = {attr for _, _, attr in PROTOCOL if getattr(args, attr) is not None}
    for attr in {attr for _, _, attr in PROTOCOL} - given:
        setattr(args, attr, base[attr])
    asked = {attr: getattr(args, attr) for _, _, attr in PROTOCOL}
    if protocols and asked not in protocols:
        theirs = " or ".join(protocol_flags(p) for p in protocols)
        raise ConfigError(
            f"{path}: its {len(kept)} matches were played with {theirs}; this ladder "
            f"asks for {protocol_flags(asked)}: leave those flags out (or give the "
            "ledger's), or give the other protocol its own --ledger")


def check_board(lines: list[dict], path: Path, size: int | None = None,
                rule: str | None = None) -> tuple[int, str] | None:
    """The one board of every ledger line (and of this ladder's players, when
    given): a fit across boards would rate nothing."""
    for n, line in enumerate(lines):
        if size is None:
            size, rule = line["size"], line["rule"]
        if (line["size"], line["rule"]) != (size, rule):
            raise ConfigError(
                f"{path}: match {n + 1} ({line['a']} vs {line['b']}) is "
                f"{line['size']}x{line['size']} {line['rule']}, not {size}x{size} {rule} as "
                f"{'this ladder' if n == 0 else 'the matches before it'}; "
                "give each board its own --ledger")
    return None if size is None else (size, rule)


def shown(path: Path) -> str:
    """``path`` as the ledger keeps it: relative to the working directory when it
    is under it (``models/campaign``, not this machine's absolute path), else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def selfplay_progress(run_dir: Path, iteration: int) -> dict | None:
    """A self-play run's progress through ``iteration``: its cumulative
    ``selfplay/games`` and wall time (``agz_jax.run.wall_seconds``, stops left out: the whole
    iterations, checkpoints included, where logged, else the sum of every
    ``time/*_s``, self-play, training, gating and evaluation; in hours), from
    its metrics.jsonl (the
    initial net, iteration 0, has played none); None when the directory has no
    such log."""
    from agz_jax import run

    try:
        rows = run.MetricsLog(run_dir, keep_through=iteration, write=False).read()
        if not rows:
            return None
        rows = [r for r in rows if r["iteration"] <= iteration]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ConfigError(f"{run_dir / 'metrics.jsonl'} is not readable ({e!r})") from None
    seconds = sum(run.wall_seconds(r) for r in rows)
    return {"run": shown(run_dir), "iteration": iteration,
            "games": sum(r.get("selfplay/games", 0) for r in rows), "hours": seconds / 3600}


CAMPAIGN_LEDGER = "campaign.json"  # experiments.campaign's ledger in a model directory


def campaign_progress(model_dir: Path) -> dict:
    """A campaign model's progress (``experiments.campaign``'s ledger): the
    campaign's self-play games and hours when its current nets were made
    (``nets``; the totals for a ledger without it). The model directory is
    rewritten as the campaign goes on, so its player is named by those games
    (``SPEC@gN``): the same nets keep their name while rejected runs go by."""
    try:
        ledger = json.loads((model_dir / CAMPAIGN_LEDGER).read_text())
        totals = ledger["totals"]
        nets = ledger.get("nets") or {
            "games": totals["games"],
            "hours": float(totals["cpu_hours"]) + float(totals["gpu_minutes"]) / 60}
        games, hours = int(nets["games"]), float(nets["hours"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{model_dir / CAMPAIGN_LEDGER} is not readable ({e!r})") from None
    return {"run": shown(model_dir), "iteration": int(totals.get("iterations", 0)),
            "games": games, "hours": hours}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.ladder", description=__doc__,
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
    arena_cli.add_match_args(parser, games=20, ledger=True)  # resolve_protocol fills them
    outside.add_args(parser, "--outside-nodes")
    return parser.parse_args(argv)


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


def parse_player(text: str, flag: str) -> arena_cli.Spec:
    """The arena's spec, loaded; a bare directory gets told how to become one."""
    try:
        spec = arena_cli.parse_spec(text, flag)
    except ConfigError:
        if Path(text).is_dir():
            raise ConfigError(f"{flag} {text!r} is a directory, not a player: say how it "
                              f"plays, mcts:{text}:400 or policy:{text}") from None
        raise
    return arena_cli.load_spec(spec, flag)


class Player(NamedTuple):
    name: str  # in the ledger: the spec, with @itN for a run directory's checkpoint
    loaded: arena_cli.Loaded
    sims: int | None
    progress: dict | None  # selfplay_progress, for a run directory's checkpoint


def load_players(specs: list[tuple[str, arena_cli.Spec]], rules
                 ) -> tuple[dict[str, Player], list[str]]:
    """The players by name, and the name of each spec in order (a run
    directory's name carries the iteration of the checkpoint actually read)."""
    from agz_jax import checkpoint, models

    players: dict[str, Player] = {}
    names = []
    for flag, spec in specs:
        try:
            loaded = arena_cli.make_player(spec, rules)
        except (checkpoint.CheckpointError, models.ModelError) as e:
            raise ConfigError(f"{flag} {spec.text!r}: {e}") from None
        name, progress = spec.text, None
        if loaded.step is not None:
            name = f"{spec.text}@it{loaded.step}"
            progress = selfplay_progress(spec.run_dir, loaded.step)
        elif spec.run_dir is not None and (spec.run_dir / CAMPAIGN_LEDGER).is_file():
            progress = campaign_progress(spec.run_dir)
            name = f"{spec.text}@g{progress['games']}"
        players.setdefault(name, Player(name, loaded, spec.sims, progress))
        names.append(name)
    return players, names


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
    size, rule = arena_cli.board_of(specs, args)
    check_board(lines, args.ledger, size, rule)
    openings = arena_cli.opening_set(args, size)

    import jax

    from agz_jax import arena
    from agz_jax.cache import enable_compilation_cache
    from agz_jax.gomoku import Rules

    enable_compilation_cache()
    rules = Rules(size, rule)
    players, names = load_players(specs, rules)
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
        a, b = players[p.a], players[p.b]
        print(f"[{i}/{len(todo)}] {p.a} vs {p.b}, seed {p.seed}", flush=True)
        result, wall = arena_cli.play(rules, a.loaded, b.loaded, p.seed, args.games,
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
        arena._chunk_fn.cache_clear()
        jax.clear_caches()
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
    from agz_jax import rating

    if not lines:
        raise ConfigError(f"{ledger} holds no match: play some first (drop --table-only)")
    check_board(lines, ledger)
    if any(outside.is_outside(x) for x in lines):
        outside.write_table(lines, ledger)
        lines = outside.as_matches(lines)  # an outside match's games as one line
    fit = rating.fit(rating.Match(x["a"], x["b"], x["wins"], x["draws"], x["losses"])
                     for x in lines)
    md, png = ledger.parent / "ladder.md", ledger.parent / "ladder.png"
    md.write_text(table(fit, lines, ledger))
    plot(fit, lines, png)
    return md, png


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
        lines = read_ledger(args.ledger)
        resolve_protocol(args, lines, args.ledger)
        arena_cli.check_match_args(args)
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
