"""The rating ladder's ledger (``python -m experiments.play.ladder``): every match
one JSON line, read and checked (``read_ledger``) and appended
(``append_line``); the pairings still to play and their seeds (``plan``,
``pairing_seed``); the one protocol of how a ledger's games start
(``resolve_protocol``) and its one board (``check_board``); and the self-play
progress that names a run's or campaign model's player (``@itN`` / ``@gN``)."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import NamedTuple

from agz_jax.config.schema import ConfigError

DEFAULT_LEDGER = Path("docs/ladder/games.jsonl")
"""``experiments.play.ladder``'s ledger unless ``--ledger`` names another."""
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
    ``selfplay/games`` and wall time (``agz_jax.training.run.wall_seconds``,
    stops left out: the whole iterations, checkpoints included, where logged,
    else the sum of every ``time/*_s``, self-play, training, gating and
    evaluation; in hours), from its metrics.jsonl (the initial net, iteration
    0, has played none); None when the directory has no such log."""
    from agz_jax.training import run

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


CAMPAIGN_LEDGER = "campaign.json"  # experiments.training.campaign's ledger in a model directory


def campaign_progress(model_dir: Path) -> dict:
    """A campaign model's progress (``experiments.training.campaign``'s ledger): the
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


