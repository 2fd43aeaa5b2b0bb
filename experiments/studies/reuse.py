"""Subtree reuse measured: the engine with reuse against the engine without.

    python -m experiments.studies.reuse --model campaign --games 200 --sims 64 --seed 1
    python -m experiments.studies.reuse --model campaign --games 200 --ms 100 --seed 2
    python -m experiments.studies.reuse --report      # docs/reuse.md from docs/reuse.jsonl
    python -m experiments.studies.reuse --report --ledger runs/r.jsonl   # runs/reuse.md

Both players are ``agz_jax.play.engine.Engine`` on the same model and nets, PUCT
(reuse needs it), the engine's own tactics guard included; they differ only in
``reuse``. With reuse an engine keeps its tree after its move and, once the
opponent has replied, searches on from the subtree under both moves, its
visits counting towards the budget (``Engine.analyse``). Games start from an
opening set (each opening played twice, colours swapped: ``--openings``), and
the two engines alternate colours game by game; the seed fixes the openings and
the engines' random streams before the first game. ``--sims N``: both engines
reach N visits at the root (the reusing one runs fewer new simulations);
``--ms T``: both get T milliseconds a move (``--max-sims`` caps the tree).

Each match appends one JSON line to ``docs/reuse.jsonl``: the score of the
reusing engine with its 95% interval, the visits carried per move, the new
simulations per move and the milliseconds per move of each side, and what else
the machine was running is the reader's to note.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "docs" / "reuse.jsonl"
REPORT = ROOT / "docs" / "reuse.md"


def play_game(engines, rules, opening: list[int], *, sims: int | None, ms: float | None,
              stats: list[dict]) -> int:
    """One game from ``opening`` (black first); ``engines`` = (black, white).
    Returns the winner (0 black, 1 white, -1 draw); every move's numbers go to
    ``stats`` as {"side", "carried", "new", "ms"}."""
    from agz_jax.play.engine import make_state, winning_line

    board = np.zeros(rules.num_actions, np.int8)
    for i, move in enumerate(opening):
        board[move] = 1 if i % 2 == 0 else -1
    last = opening[-1] if opening else -1
    for e in engines:
        e.forget()
    to_play = len(opening) % 2
    while True:
        eng = engines[to_play]
        state = make_state(rules, board, to_play, last_action=last)
        t0 = time.perf_counter()
        deadline = None if ms is None else t0 + ms / 1000.0
        a = eng.analyse(rules, state, simulations=sims, deadline=deadline)
        stats.append({"side": id(eng), "carried": a.carried, "new": a.simulations,
                      "ms": (time.perf_counter() - t0) * 1000.0})
        board[a.action] = 1 if to_play == 0 else -1
        last = a.action
        if winning_line(rules, board, a.action):
            return to_play
        if not (board == 0).any():
            return -1
        to_play = 1 - to_play


def run_match(model_name: str, *, games: int, sims: int | None, ms: float | None,
              max_sims: int, openings_name: str, seed: int, chunk: int = 16) -> dict:
    import jax

    from agz_jax.game import openings as opening_sets
    from agz_jax.match import arena
    from agz_jax.nets import models
    from agz_jax.play import engine

    model = models.load(model_name)
    rules = model.rules
    book = opening_sets.load(openings_name, rules.size)  # before anything compiles
    capacity = sims if sims is not None else max_sims
    reusing = engine.Engine(model, max_simulations=capacity, chunk=chunk, seed=seed,
                            algorithm="puct", reuse=True)
    plain = engine.Engine(model, max_simulations=capacity, chunk=chunk, seed=seed + 1,
                          algorithm="puct", reuse=False)
    reusing.warmup()
    plain.warmup()
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(book), size=(games + 1) // 2, replace=len(book) < (games + 1) // 2)
    winners, a_black, stats = [], [], []
    t0 = time.perf_counter()
    for g in range(games):
        opening = [int(m) for m in book[picks[g // 2]]]
        first = g % 2 == 0  # the reusing engine is black in even games
        pair = (reusing, plain) if first else (plain, reusing)
        winners.append(play_game(pair, rules, opening, sims=sims, ms=ms, stats=stats))
        a_black.append(first)
        if (g + 1) % 10 == 0:
            s = arena.score(arena.MatchResult(np.array(winners), np.array(a_black), None, None))
            print(f"{g + 1}/{games} games: reuse scores {s.score:.3f} "
                  f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    s = arena.score(arena.MatchResult(np.array(winners), np.array(a_black), None, None))

    def side(e):
        rows = [r for r in stats if r["side"] == id(e)]
        return {"carried_per_move": float(np.mean([r["carried"] for r in rows])),
                "new_sims_per_move": float(np.mean([r["new"] for r in rows])),
                "ms_per_move": float(np.mean([r["ms"] for r in rows])), "moves": len(rows)}

    return {"model": model_name, "nets_sha": _sha(model), "games": games, "sims": sims,
            "ms": ms, "max_sims": capacity, "openings": openings_name, "seed": seed,
            "reuse_score": s.score, "low": s.low, "high": s.high, "wins": s.wins,
            "draws": s.draws, "losses": s.losses, "reuse": side(reusing),
            "no_reuse": side(plain), "seconds": time.perf_counter() - t0,
            "jax_backend": jax.default_backend(),
            "date": time.strftime("%Y-%m-%d %H:%M")}


def _sha(model) -> str:
    import hashlib

    import jax

    h = hashlib.sha256()
    for leaf in jax.tree.leaves(model.variables):
        h.update(np.asarray(leaf).tobytes())
    return h.hexdigest()[:12]


def report_path(ledger: Path) -> Path:
    """Where the report of ``ledger`` goes: reuse.md beside it (docs/reuse.md for
    the default ledger)."""
    return ledger.parent / REPORT.name


def report(ledger: Path = LEDGER, out: Path | None = None) -> str:
    """Write the table of ``ledger``'s rows to ``out`` (default ``report_path``)
    and return it. ValueError (one line) if the ledger is not the JSON lines of
    this tool."""
    out = report_path(ledger) if out is None else out
    try:
        rows = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"--ledger {ledger} is not a ledger of JSON lines ({e})") from None
    lines = [
        "# Subtree reuse, measured",
        "",
        "The engine with `search.reuse` against the same engine without, same model and",
        "nets, PUCT, colours alternated, openings paired (`python -m experiments.studies.reuse`;",
        "this file: `python -m experiments.studies.reuse --report`). Score is the reusing",
        "engine's, with its 95% Wilson interval. Carried: root visits a search started",
        "with; new: simulations it ran; ms: wall time per move on the machine named.",
        "",
        "| budget | model | games | reuse score (95% CI) | W-D-L | carried / move | "
        "new sims / move (reuse, plain) | ms / move (reuse, plain) | seed | backend |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not isinstance(r, dict) or not {"sims", "ms", "model", "reuse"} <= r.keys():
            raise ValueError(f"--ledger {ledger} holds a line that is not a match of "
                             "experiments.studies.reuse; give its own ledger")
        budget = f"{r['sims']} visits" if r["sims"] else f"{r['ms']:g} ms (≤{r['max_sims']})"
        lines.append(
            f"| {budget} | {r['model']} | {r['games']} | {r['reuse_score']:.3f} "
            f"({r['low']:.2f}–{r['high']:.2f}) | {r['wins']}-{r['draws']}-{r['losses']} | "
            f"{r['reuse']['carried_per_move']:.1f} | {r['reuse']['new_sims_per_move']:.1f}, "
            f"{r['no_reuse']['new_sims_per_move']:.1f} | {r['reuse']['ms_per_move']:.0f}, "
            f"{r['no_reuse']['ms_per_move']:.0f} | {r['seed']} | {r['jax_backend']} |")
    text = "\n".join(lines) + "\n"
    out.write_text(text)
    return text


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.reuse",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="campaign", help="model name or directory")
    p.add_argument("--games", type=int, default=200, help="games (even: colours alternate)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--sims", type=int, help="root visits per move for both engines")
    budget.add_argument("--ms", type=float, help="milliseconds per move for both engines")
    p.add_argument("--max-sims", type=int, default=1024, help="tree size with --ms")
    p.add_argument("--openings", default="balanced15", help="opening set (name or file)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ledger", type=Path, default=LEDGER,
                   help=f"JSON lines appended here (default {LEDGER.relative_to(ROOT)}); "
                        f"{REPORT.name} is written beside it by --report")
    p.add_argument("--report", action="store_true",
                   help="play nothing: write the report beside the ledger and stop")
    args = p.parse_args(argv)
    from agz_jax.training import cli

    if args.ledger.is_dir() or cli.file_in_the_way(args.ledger.parent) is not None:
        return fail(f"--ledger {args.ledger} is not a file path; give a .jsonl file")
    if report_path(args.ledger).resolve() == args.ledger.resolve():
        return fail(f"--ledger {args.ledger} is the name of the report written beside it; "
                    "give a .jsonl file")
    if args.report:
        if not args.ledger.is_file():
            return fail(f"--ledger {args.ledger} not found; play a match first (leave out "
                        "--report)")
        try:
            print(report(args.ledger))
        except ValueError as e:
            return fail(str(e))
        return 0
    if args.sims is None and args.ms is None:
        p.error("give the budget: --sims N (equal visits) or --ms T (equal time)")
    if args.games < 2 or args.games % 2:
        p.error(f"--games must be even and at least 2, got {args.games}")
    if (args.sims is not None and args.sims < 1) or (args.ms is not None and args.ms <= 0):
        p.error("--sims and --ms must be positive")
    if args.max_sims < 1:
        return fail(f"--max-sims must be a positive integer, got {args.max_sims}")

    from agz_jax.base import cache
    from agz_jax.game import openings as opening_sets
    from agz_jax.nets import models

    cache.enable_compilation_cache()
    try:
        result = run_match(args.model, games=args.games, sims=args.sims, ms=args.ms,
                           max_sims=args.max_sims, openings_name=args.openings,
                           seed=args.seed)
    except models.ModelError as e:
        return fail(f"--model: {e}")
    except opening_sets.OpeningsError as e:
        return fail(f"--openings: {e}")
    args.ledger.parent.mkdir(parents=True, exist_ok=True)
    with args.ledger.open("a") as f:
        f.write(json.dumps(result) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
