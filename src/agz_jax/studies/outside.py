"""An outside engine as a fixed yardstick (``python -m experiments.play.outside``,
and ``python -m experiments.play.ladder --outside``): our players, run as
``pbrain-agz``, against Rapfi at node limits, both sides Piskvork engines
(``agz_jax.play.piskvork``); every game one line of the ladder's ledger
(``agz_jax.studies.ledger``); outside.md, a table and a rung per candidate, is
``agz_jax.studies.outside_report``'s."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import numpy as np

from agz_jax.config.schema import ConfigError
from agz_jax.play import players
from agz_jax.studies import ledger as ladder_ledger

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_LEDGER = Path("docs/outside/games.jsonl")
DEFAULT_NODES = "300,1000,3000,10000,30000,100000"
DEFAULT_OPENINGS = "balanced15"
ENV = "AGZ_JAX_OUTSIDE"
LABEL = "rapfi"  # the outside players' names: rapfi:N
OUTSIDE_TURN_MS = 30000
MAX_FAILS_IN_ROW = 3


class OutsideError(ConfigError):
    """A match cannot go on (an engine failed game after game)."""


# -- arguments -------------------------------------------------------------------------------

def parse_nodes(text: str, flag: str = "--nodes") -> list[int]:
    """``300,1000`` as [300, 1000]: positive, distinct; ConfigError otherwise."""
    nodes = []
    for field in text.split(","):
        try:
            n = int(field.strip())
        except ValueError:
            raise ConfigError(f"{flag} {text!r}: {field.strip()!r} is not an integer; give "
                              "node counts separated by commas, e.g. 300,1000,3000") from None
        if n < 1:
            raise ConfigError(f"{flag} {text!r}: node counts must be at least 1, got {n}")
        if n in nodes:
            raise ConfigError(f"{flag} {text!r}: {n} is given twice")
        nodes.append(n)
    return nodes


def outside_argv(text: str | None, flag: str = "--outside") -> list[str]:
    """The outside engine's argv: a path (or a command line); ConfigError when
    there is none or its program cannot be run."""
    from agz_jax.play import piskvork

    if not text:
        raise ConfigError(f"no outside engine: give {flag} PATH or set {ENV} (Rapfi: "
                          "make rapfi prints its path)")
    command = [text] if Path(text).exists() else text
    try:
        return piskvork.command_argv(command)
    except piskvork.EngineMissing as e:
        raise ConfigError(f"{flag}: {e}") from None


def check_turn_ms(turn_ms: int, outside_turn_ms: int) -> None:
    if turn_ms < 0:
        raise ConfigError(f"--turn-ms must be >= 0 (0: no clock), got {turn_ms}")
    if outside_turn_ms < 1:
        raise ConfigError(f"--outside-turn-ms must be at least 1, got {outside_turn_ms}")


class Candidate(NamedTuple):
    name: str  # in the ledger
    argv: list[str]  # the pbrain-agz command
    size: int
    rule: str


def pbrain_command() -> list[str]:
    """``pbrain-agz`` of this Python (the script beside it, else ``-m agz_jax.play.brain``)."""
    script = Path(sys.executable).parent / "pbrain-agz"
    return [str(script)] if script.exists() else [sys.executable, "-m", "agz_jax.play.brain"]


def when(turn_ms: int) -> str:
    return f"@{turn_ms}ms" if turn_ms else "@untimed"


def check_spec(spec: players.Spec, flag: str = "--candidate") -> None:
    """ConfigError unless ``pbrain-agz`` can play the spec: a model or ``mcts:``
    without ``:plain``."""
    if spec.kind not in ("mcts", "pbrain"):
        raise ConfigError(f"{flag} {spec.text!r}: only our search plays an outside engine "
                          "(over the Piskvork protocol); give a model or mcts:MODEL:SIMS")
    if spec.plain:
        raise ConfigError(f"{flag} {spec.text!r}: pbrain-agz has no :plain search; drop it")


def candidate_spec(text: str, flag: str = "--candidate") -> players.Spec:
    """A candidate's loaded spec: ``mcts:...`` or a bare model (kind ``pbrain``)."""
    kind = text.partition(":")[0]
    if kind in ("mcts", "random", "mentor", "policy"):
        spec = players.parse_spec(text, flag)
    else:
        spec = players.Spec(text, "pbrain", Path(text))
    check_spec(spec, flag)
    return players.load_spec(spec, flag)


def model_name(spec: players.Spec) -> str:
    """The ladder's name of a spec's model: ``@itN`` for a run directory's latest
    checkpoint, ``@gN`` for a campaign model."""
    from agz_jax.nets import checkpoint, models

    path = spec.run_dir
    if not (path / models.VARIABLES_FILE).exists():
        step = checkpoint.latest_step(path)
        return f"{spec.text}@it{step}"
    if (path / ladder_ledger.CAMPAIGN_LEDGER).is_file():
        return f"{spec.text}@g{ladder_ledger.campaign_progress(path)['games']}"
    return spec.text


def candidate(spec: players.Spec, turn_ms: int, name: str | None = None,
              engine_args: str = "") -> Candidate:
    """How a loaded spec plays as a Piskvork engine; ``name``: the ladder's name
    of the spec (default ``model_name``), before the clock is added;
    ``engine_args``: more ``pbrain-agz`` flags (named in the candidate's name)."""
    # --debug: a line before each move saying what its search did, kept in the ledger
    # (``searched``); it changes nothing of the play, so it is not in the name.
    argv = [*pbrain_command(), "--model", str(spec.run_dir), "--debug",
            *shlex.split(engine_args)]
    if spec.kind == "mcts":  # the model's search: at most SIMS simulations in one tree
        argv += ["--sims", str(spec.sims), "--max-sims", str(spec.sims), "--threads", "1",
                 "--c-puct", f"{spec.config.search.c_puct:g}"]
        if spec.algorithm:
            argv += ["--algorithm", spec.algorithm]
    base = name or model_name(spec)
    if spec.kind == "pbrain":
        base = f"pbrain:{base}"
    if engine_args.strip():
        base = f"{base}[{' '.join(shlex.split(engine_args))}]"
    game = spec.config.game
    return Candidate(base + when(turn_ms), argv, game.size, game.rule)


# -- the plan --------------------------------------------------------------------------------

def schedule(seed: int, num_openings: int, games: int) -> list[tuple[int, bool]]:
    """(opening index, candidate is black) of each game of a match: distinct
    openings while the set lasts, each twice in a row, black then white."""
    picks = np.random.default_rng(seed).permutation(num_openings)[np.arange(games // 2)
                                                                  % num_openings]
    return [(int(o), black) for o in picks for black in (True, False)]


def game_key(line: dict) -> tuple:
    """A game's identity: its players, match seed and number. Game k's opening and
    colours do not depend on the match's length (``schedule``), so a match is
    extended by a larger ``--games``, playing only the games it lacks."""
    return line["a"], line["b"], line["seed"], line["outside"]["game"]


def is_outside(line: dict) -> bool:
    return isinstance(line.get("outside"), dict)


class Match(NamedTuple):
    candidate: Candidate
    nodes: int
    seed: int
    todo: list[int]  # the games still to play (0-based)

    @property
    def opponent(self) -> str:
        return f"{LABEL}:{self.nodes}"


def plan(candidates: list[Candidate], nodes: list[int], seed: int, games: int,
         lines: list[dict]) -> list[Match]:
    """The matches with games still to play (games in the ledger skipped)."""
    done = {game_key(x) for x in lines if is_outside(x)}
    out = []
    for c in candidates:
        for n in nodes:
            opponent = f"{LABEL}:{n}"
            s = ladder_ledger.pairing_seed(seed, c.name, opponent)
            todo = [k for k in range(games) if (c.name, opponent, s, k) not in done]
            if todo:
                out.append(Match(c, n, s, todo))
    return out


# -- playing ---------------------------------------------------------------------------------

def play(candidates: list[Candidate], outside: list[str], nodes: list[int], *, seed: int,
         games: int, turn_ms: int, outside_turn_ms: int, openings, openings_name: str,
         ledger: Path, lines: list[dict], quiet_s: float = 0.05, grace_s: float = 3.0) -> int:
    """Play every game still missing, appending each to ``ledger`` and ``lines``;
    the number of games played."""
    from agz_jax.play import piskvork, piskvork_games

    matches = plan(candidates, nodes, seed, games, lines)
    if not matches:
        return 0
    try:
        ledger.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--ledger {ledger}: cannot make its directory ({e}); "
                          "name a ledger file in a directory") from None
    size, rule = candidates[0].size, candidates[0].rule
    referee = piskvork_games.Referee(size, rule)
    total = sum(len(m.todo) for m in matches)
    print(f"{total} games against {LABEL} to play in {len(matches)} matches on {size}x{size} "
          f"{rule} (ledger {ledger})", flush=True)
    played = 0
    outside_dir = Path(outside[0]).resolve().parent if os.sep in outside[0] else None
    ours_settings = piskvork.Settings(
        size=size, rule=piskvork_games.rule_bits(rule), timeout_turn_ms=turn_ms or None,
        thread_num=None, grace_s=grace_s, quiet_s=quiet_s)
    by_candidate: dict[str, list[Match]] = {}
    for m in matches:
        by_candidate.setdefault(m.candidate.name, []).append(m)
    for name, its in by_candidate.items():
        with piskvork.Piskvork(its[0].candidate.argv, name, ours_settings, cwd=ROOT) as ours:
            for m in its:
                theirs_settings = piskvork.Settings(
                    size=size, rule=piskvork_games.rule_bits(rule), timeout_turn_ms=outside_turn_ms,
                    max_node=m.nodes, thread_num=1, grace_s=grace_s, quiet_s=quiet_s,
                    start_timeout_s=60.0)
                with piskvork.Piskvork(outside, m.opponent, theirs_settings,
                                       cwd=outside_dir) as theirs:
                    played += play_match(m, ours, theirs, referee, games, turn_ms,
                                         outside_turn_ms, openings, openings_name, seed,
                                         ledger, lines, played, total)
    return played


def play_match(m: Match, ours, theirs, referee, games: int, turn_ms: int,
               outside_turn_ms: int, openings, openings_name: str, seed: int, ledger: Path,
               lines: list[dict], played: int, total: int) -> int:
    """The games ``m.todo`` of one match; the number played."""
    from agz_jax.play import piskvork_games

    plan_games = schedule(m.seed, len(openings), games)
    fails = {ours.name: 0, theirs.name: 0}
    for k in m.todo:
        index, a_black = plan_games[k]
        black, white = (ours, theirs) if a_black else (theirs, ours)
        game = piskvork_games.play_game(black, white, [int(a) for a in openings[index]], referee)
        ours_colour = piskvork_games.BLACK if a_black else piskvork_games.WHITE
        failed = None
        if game.failed is not None:
            loser = (black, white)[game.failed]
            failed = loser.name
            loser.close()  # a fresh process for the next game
            fails[failed] += 1
            print(f"{failed} failed in game {k + 1} of {m.candidate.name} vs {m.opponent} "
                  f"({game.failure}: {game.reason}); counted as its loss, restarting it",
                  file=sys.stderr, flush=True)
            if fails[failed] >= MAX_FAILS_IN_ROW:
                append_game(ledger, lines, m, k, games, index, a_black, game, failed, turn_ms,
                            outside_turn_ms, openings_name, seed, referee)
                raise OutsideError(f"{failed} failed {MAX_FAILS_IN_ROW} games in a row "
                                   f"(last: {game.reason}); fix it and rerun to resume")
        else:
            fails = dict.fromkeys(fails, 0)
        append_game(ledger, lines, m, k, games, index, a_black, game, failed, turn_ms,
                    outside_turn_ms, openings_name, seed, referee)
        played += 1
        won = "draw" if game.winner < 0 else ("win" if game.winner == ours_colour else "loss")
        colour = "black" if a_black else "white"
        how = "a failure" if failed else game.reason
        print(f"[{played}/{total}] {m.candidate.name} ({colour}) vs {m.opponent}, game "
              f"{k + 1}/{games}, opening {index}: {won} ({how}, {len(game.moves)} stones, "
              f"{game.seconds:.0f} s)", flush=True)
    return len(m.todo)


def append_game(ledger: Path, lines: list[dict], m: Match, k: int, games: int, index: int,
                a_black: bool, game, failed: str | None, turn_ms: int, outside_turn_ms: int,
                openings_name: str, seed: int, referee) -> None:
    """One ledger line: the game as a one-game match of the candidate (a)."""
    ours = 0 if a_black else 1
    result = {"wins": int(game.winner == ours), "draws": int(game.winner < 0),
              "losses": int(game.winner == 1 - ours)}
    line = {"a": m.candidate.name, "b": m.opponent, **result, "games": 1, "seed": m.seed,
            "ladder_seed": seed, "sims": [None, None], "size": referee.rules.size,
            "rule": referee.rules.rule, "openings": openings_name, "opening_plies": 0,
            "outside": {"game": k, "of": games, "opening": index, "a_black": a_black,
                        "nodes": m.nodes, "turn_ms": turn_ms,
                        "outside_turn_ms": outside_turn_ms, "reason": game.reason,
                        "failed": failed, "failure": game.failure, "moves": game.moves,
                        **_searched(game, ours)},
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "seconds": round(game.seconds, 1)}
    ladder_ledger.append_line(ledger, json.dumps(line))
    lines.append(line)


def _searched(game, ours: int) -> dict:
    """``{"searched": [...]}``: the candidate's account of each of its moves
    after the opening (``piskvork_games.searched``: reason, simulations, carried,
    ms; None for a move it said nothing of), or nothing when it said nothing
    (an engine without ``--debug``)."""
    first = len(game.moves) - len(game.searched)  # the opening's stones
    its = [s for i, s in enumerate(game.searched) if (first + i) % 2 == ours]
    return {"searched": its} if any(s is not None for s in its) else {}


# -- the command -----------------------------------------------------------------------------

def add_args(parser: argparse.ArgumentParser, nodes_flag: str) -> None:
    """The options shared with ``experiments.play.ladder``."""
    parser.add_argument("--outside", default=os.environ.get(ENV), metavar="PATH",
                        help=f"the outside engine (Rapfi's pbrain-rapfi; default ${ENV})")
    parser.add_argument(nodes_flag, default=DEFAULT_NODES, metavar="N,N,...",
                        help=f"its max_node levels, one opponent {LABEL}:N each "
                             f"(default {DEFAULT_NODES})")
    parser.add_argument("--turn-ms", type=int, default=1000,
                        help="our side's INFO timeout_turn in ms (0: no clock, its "
                             "simulations decide); default 1000")
    parser.add_argument("--outside-turn-ms", type=int, default=OUTSIDE_TURN_MS,
                        help="the outside engine's INFO timeout_turn; default "
                             f"{OUTSIDE_TURN_MS} (the node count decides)")


def resolve_protocol(args: argparse.Namespace, lines: list[dict], path: Path) -> None:
    """The ladder's protocol check (``agz_jax.studies.ledger.resolve_protocol``) with
    no random opening moves and, for a new ledger, ``DEFAULT_OPENINGS``."""
    args.opening_plies = 0
    if args.openings is None and not any("ladder_seed" in x for x in lines):
        args.openings = DEFAULT_OPENINGS
    ladder_ledger.resolve_protocol(args, lines, path)
    require_openings(args)


def require_openings(args: argparse.Namespace) -> None:
    if args.openings is None or args.opening_plies:
        asked = ladder_ledger.protocol_flags(vars(args))
        raise ConfigError("games against an outside engine start from an opening set as "
                          f"it is: this ledger asks for {asked}; "
                          "give another --ledger (with --openings SET --opening-plies 0)")


