"""The ablation sweep's matches: each snapshot and final net against the pool
and, within a seed, against the other arms' nets at equal game equivalents
(``agz_jax.studies.ablation.pairings``), played into the sweep's ladder-format ledger;
players of one kind share compiled programs."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from agz_jax.config.presets import get_preset

# ------------------------------------------------------------------ matches


def spec_of(name: str, index: dict, out: Path, sims: int) -> str:
    for r in index["runs"]:
        for s in r["snapshots"]:
            if s["player"] == name:
                return f"mcts:{out / s['model']}:{sims}"
    return name  # a pool player's name is its spec


def progress_of(name: str, index: dict, out: Path) -> dict | None:
    for r in index["runs"]:
        for s in r["snapshots"]:
            if s["player"] == name:
                return {"run": str(out / s["model"]), "iteration": s["iteration"],
                        "games": s["games"], "hours": s["cpu_s"] / 3600}
    return None


class Matches:
    """Plays matches, reusing compiled programs: two snapshots whose configs differ
    only in seed and iterations play through the same compiled chunks
    (``arena.play_match_compact`` keeps its compilations per ``players``
    function), so the matches of an arm against one opponent compile once, not
    once per snapshot. At most ``keep`` pairs of player kinds are kept compiled
    (a long ladder that kept every match's ran out of memory maps); then all
    are dropped, as the ladder drops each match's."""

    def __init__(self, rules, keep: int = 12):
        self.rules, self.keep = rules, keep
        self.players: dict[tuple, object] = {}
        self.scans: dict[tuple, object] = {}

    def kind(self, spec: str) -> str:
        """What a player's compiled program depends on: a pool player's spec, or a
        snapshot's game, nets, features, search and decay (``players.load_spec``
        builds its searcher from those alone, not from the training sections in
        which the arms of a recipe sweep differ) and simulations."""
        if not spec.startswith("mcts:"):
            return spec
        from agz_jax.nets import models

        config = models.read_config(Path(spec.split(":")[1])).to_dict()
        played = {k: config[k] for k in PLAYED_SECTIONS}
        return json.dumps([played, spec.rsplit(":", 1)[1]], sort_keys=True)

    def play(self, specs: list[str], seed: int, games: int, opening_plies: int, chunk: int):
        """(arena.MatchResult, wall seconds) of specs[0] against specs[1]."""
        import jax

        from agz_jax.match import arena
        from agz_jax.play import players

        loaded = [players.make_player(players.load_spec(players.parse_spec(s, s), s),
                                      self.rules) for s in specs]
        pair = tuple(self.kind(s) for s in specs)
        if pair not in self.players:
            if len(self.players) >= self.keep:
                self.clear()
            a, b = loaded
            self.players[pair] = lambda v: (a.make(v[0]), b.make(v[1]))
        both = self.players[pair]
        variables = (loaded[0].variables, loaded[1].variables)
        t0 = time.perf_counter()
        key = jax.random.PRNGKey(seed)
        if chunk:
            result = arena.play_match_compact(self.rules, both, variables, key, games,
                                              opening_plies, chunk=chunk)
        else:
            result = jax.device_get(self.scan(pair, games, opening_plies)(key, variables))
        return result, time.perf_counter() - t0

    def scan(self, pair: tuple, games: int, opening_plies: int):
        """``chunk = 0``: the whole match in one jitted scan, compiled once per shape."""
        import jax

        from agz_jax.match import arena

        key = (pair, games, opening_plies)
        if key not in self.scans:
            players = self.players[pair]
            self.scans[key] = jax.jit(lambda k, v: arena.play_match(
                self.rules, *players(v), k, games, opening_plies))
        return self.scans[key]

    def clear(self) -> None:
        from agz_jax.match import arena

        self.players.clear()
        self.scans.clear()
        arena.drop_compiled()


PLAYED_SECTIONS = ("game", "net", "features", "search", "decay")
"""The config sections a snapshot's player is built from."""


def drop_compiled(state: dict) -> None:
    """Drop every compiled program: the matches' players and what the last run
    compiled (``arena.drop_compiled``). A sweep that kept every run's programs
    in its one process reached ``vm.max_map_count`` (65,530) after three runs
    of the recipe sweep; the runner calls this after each snapshot's matches
    (the next segment of training compiles its programs again anyway)."""
    from agz_jax.match import arena

    if "matches" in state:
        state["matches"].clear()
    else:
        arena.drop_compiled()


def play_missing(plan, out: Path, index: dict, state: dict, verbose: bool, say) -> int:
    """Play every pairing the index calls for that the ledger lacks; the number played."""
    from agz_jax.game.gomoku import Rules
    from agz_jax.match import arena
    from agz_jax.studies import ablation
    from agz_jax.studies.ledger import append_line, done_key, pairing_seed

    ev = plan.evaluation
    lines: list[dict] = state["lines"]
    done = {done_key(x["a"], x["b"], x["games"], x["seed"]) for x in lines}
    todo = []
    for a, b, games in ablation.pairings(plan, index):
        seed = pairing_seed(ev.seed, a, b)
        if done_key(a, b, games, seed) not in done:
            todo.append((a, b, games, seed))
    if not todo:
        return 0
    base = get_preset(plan.preset).replace(**plan.common)
    size, rule = base.game.size, base.game.rule
    if "matches" not in state:
        state["matches"] = Matches(Rules(size, rule))
    matches: Matches = state["matches"]
    ledger = out / "games.jsonl"
    todo = [(a, b, games, seed, [spec_of(n, index, out, ev.sims) for n in (a, b)])
            for a, b, games, seed in todo]
    # those of one pair of kinds together (they share compiled programs), in the
    # order the kinds first come
    kinds = [tuple(matches.kind(x) for x in t[4]) for t in todo]
    first = {k: i for i, k in reversed(list(enumerate(kinds)))}
    todo = [t for _, t in sorted(zip(kinds, todo, strict=True), key=lambda kt: first[kt[0]])]
    for i, (a, b, games, seed, specs) in enumerate(todo, 1):
        with contextlib.redirect_stderr(sys.stderr if verbose else io.StringIO()):
            result, wall = matches.play(specs, seed, games, ev.opening_plies, ev.chunk)
        s = arena.score(result)
        line = {"a": a, "b": b, "wins": s.wins, "draws": s.draws, "losses": s.losses,
                "games": s.games, "seed": seed, "ladder_seed": ev.seed, "size": size,
                "rule": rule, "openings": None, "opening_plies": ev.opening_plies,
                "specs": specs, "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "seconds": round(wall, 1)}
        progress = {n: p for n in (a, b) if (p := progress_of(n, index, out))}
        if progress:
            line["selfplay"] = progress
        append_line(ledger, json.dumps(line))
        lines.append(line)
        state["dirty"] = True
        say(f"    match {i}/{len(todo)}: {a} vs {b}: {s.wins}-{s.draws}-{s.losses} "
            f"({s.score:.2f}), {wall:.0f} s")
    return len(todo)
