"""The outside yardstick's report: its ledger's games (``agz_jax.studies.outside``)
summed into one row per match, each candidate's rung, and outside.md, the table
beside the ledger."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from agz_jax.config.schema import ConfigError
from agz_jax.studies.outside import DEFAULT_LEDGER, LABEL, is_outside


def as_matches(lines: list[dict]) -> list[dict]:
    """The ledger with each outside match's games summed into one line (for the
    Elo fit and its table); other lines unchanged."""
    out, merged = [], {}
    for x in lines:
        if not is_outside(x):
            out.append(x)
            continue
        key = (x["a"], x["b"], x["seed"])
        if key not in merged:
            merged[key] = {k: v for k, v in x.items() if k != "outside"}
            out.append(merged[key])
        else:
            for field in ("wins", "draws", "losses", "games", "seconds"):
                merged[key][field] += x[field]
    return out


class Row(NamedTuple):
    candidate: str
    opponent: str
    nodes: int
    of: int  # games in the match (the largest --games it was played with)
    games: int  # played so far
    black: tuple[int, int, int]  # the candidate's wins, draws, losses as black
    white: tuple[int, int, int]
    failures: list[str]  # "rapfi:1000 timeout", ...
    simulations: tuple = ()  # of each of the candidate's moves that ran a full search

    @property
    def median_simulations(self) -> float | None:
        """The median simulations of the candidate's searched moves (``searched``
        with reason ``search``), None where the ledger holds none."""
        return float(np.median(self.simulations)) if self.simulations else None

    @property
    def score(self) -> float:
        w, d = self.black[0] + self.white[0], self.black[1] + self.white[1]
        return (w + d / 2) / self.games


def rows(lines: list[dict]) -> list[Row]:
    """One row per outside match of the ledger, candidates in the order first
    played, opponents by node count."""
    acc: dict[tuple, dict] = {}
    for x in lines:
        if not is_outside(x):
            continue
        o = x["outside"]
        key = (x["a"], x["b"], x["seed"])
        r = acc.setdefault(key, {"black": [0, 0, 0], "white": [0, 0, 0], "failures": [],
                                 "nodes": o["nodes"], "games": 0, "of": 0, "sims": []})
        r["sims"] += [s[1] for s in o.get("searched", ()) if s and s[0] == "search"]
        r["of"] = max(r["of"], o["of"])
        side = r["black" if o["a_black"] else "white"]
        for i, field in enumerate(("wins", "draws", "losses")):
            side[i] += x[field]
        r["games"] += x["games"]
        if o.get("failed"):
            r["failures"].append(f"{o['failed']} {o.get('failure') or 'failed'}")
    order = list(dict.fromkeys(k[0] for k in acc))
    out = [Row(k[0], k[1], r["nodes"], r["of"], r["games"], tuple(r["black"]),
               tuple(r["white"]), r["failures"], tuple(r["sims"])) for k, r in acc.items()]
    return sorted(out, key=lambda r: (order.index(r.candidate), r.nodes, r.of))


def rung(its: list[Row]) -> Row | None:
    """The row of the largest node count scored at least 50% against."""
    good = [r for r in its if r.score >= 0.5]
    return max(good, key=lambda r: r.nodes) if good else None


def table(lines: list[dict], ledger: Path) -> str:
    """outside.md: a table and a rung per candidate."""
    from agz_jax.match.arena import wilson

    all_rows = rows(lines)
    if not all_rows:
        raise ConfigError(f"{ledger} holds no game against an outside engine: play some first")
    first = next(x for x in lines if is_outside(x))
    o = first["outside"]
    again = "python -m experiments.play.outside --table-only" + (
        "" if ledger == DEFAULT_LEDGER else f" --ledger {ledger}")
    out = [
        "# Outside yardstick: Rapfi at node limits",
        "",
        f"Our players against Rapfi (`{LABEL}:N`: `INFO max_node N`, one thread, its "
        f"built-in classical evaluation, a {o['outside_turn_ms'] / 1000:g} s turn limit "
        "that the node count reaches first), both sides Piskvork engines run by "
        f"`agz_jax.play.piskvork`, on {first['size']}x{first['size']} {first['rule']}. Games "
        f"start from the `{first['openings']}` openings, each played twice, the candidate "
        "black and then white. A candidate's name ends in its clock: `@1000ms` is "
        "`INFO timeout_turn 1000`, `@untimed` its simulations alone. Score: the "
        "candidate's points per game (a draw half); as black / as white: its wins-draws-"
        "losses with that colour; 95% CI: the Wilson interval of the score. An engine "
        "that crashed, timed out, answered ERROR or played an illegal move lost that "
        "game (failures). Simulations: the median over the candidate's searched moves "
        "of the simulations its search ran (its trees together, `pbrain-agz --debug`), "
        "which says how fast the machine searched during the match; - where the "
        f"ledger does not hold them. Games: `{ledger.name}` beside this file; regenerate: "
        f"`{again}`.",
    ]
    for name in dict.fromkeys(r.candidate for r in all_rows):
        its = [r for r in all_rows if r.candidate == name]
        out += ["", f"## `{name}`", "",
                "| opponent | games | score | as black W-D-L | as white W-D-L | 95% CI "
                "| failures | simulations |",
                "|:--|--:|--:|:-:|:-:|:-:|:--|--:|"]
        for r in its:
            low, high = wilson(r.score, r.games)
            games = str(r.games) if r.games == r.of else f"{r.games} of {r.of}"
            fails = ", ".join(f"{n}× {f}" for f, n in _counts(r.failures)) or "-"
            median = r.median_simulations
            sims = "-" if median is None else f"{median:,.0f}"
            out.append(f"| `{r.opponent}` | {games} | {r.score:.3f} | "
                       f"{'-'.join(map(str, r.black))} | {'-'.join(map(str, r.white))} | "
                       f"{low:.2f} .. {high:.2f} | {fails} | {sims} |")
        best = rung(its)
        if best is None:
            out += ["", f"Rung: none (under 50% against every `{LABEL}` level played, the "
                        f"lowest {min(r.nodes for r in its)} nodes)."]
        else:
            partial = "" if best.games == best.of else f", {best.games} of {best.of} games"
            out += ["", f"Rung: **`{best.opponent}`**, the largest max_node scored at least "
                        f"50% against ({best.score:.3f}{partial})."]
    return "\n".join(out) + "\n"


def _counts(items: list[str]) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    for item in items:
        seen[item] = seen.get(item, 0) + 1
    return list(seen.items())


def table_path(ledger: Path) -> Path:
    """The table beside a ledger: ``outside.md`` for the default ledger's name
    (``games.jsonl``), else the ledger's name with ``.md`` (``renju.jsonl`` ->
    ``renju.md``), so that two ledgers in one folder keep their own tables."""
    return ledger.parent / ("outside.md" if ledger.name == DEFAULT_LEDGER.name
                            else ledger.with_suffix(".md").name)


def write_table(lines: list[dict], ledger: Path) -> Path:
    """The table beside the ledger (``table_path``)."""
    path = table_path(ledger)
    path.write_text(table(lines, ledger))
    return path
