"""The tree's capacity against what a timed move searches: ``pbrain-agz``'s
engine at several capacities on the same positions of one game.

    python -m experiments.play.tree_capacity                     # 8192,16384,32768; 20 moves at 1 s
    python -m experiments.play.tree_capacity --capacities 8192,16384 --moves 10 --json

The game is fixed first, so that every capacity searches the same positions:
an opening of ``--openings`` (``--opening``), then up to ``2 * --moves``
plies of an untimed search of ``--game-sims`` simulations (one tree, the same
seed) for both sides (fewer if the game ends). Then each capacity's engine,
built as ``pbrain-agz`` builds its timed engine (``brain.play_settings`` from
``--max-sims`` = the capacity and ``--brain-flags``), in a process of its own
as ``pbrain-agz`` runs, searches each position of the side to move after the
opening under ``INFO timeout_turn --turn-ms`` (the budget, reserve included,
of ``move_time.move_budget_ms``). The engine keeps its trees between its
moves, so the subtree under the game's two moves since its last search is
carried as in a game (the game's move may not be the engine's own choice, so
less may be carried than in a game of its own). ``--rounds R`` repeats this
R times, the capacities in reverse order every other round, so that a drift
of the machine's pace falls on all of them.

Reported per capacity: the new simulations over the moves (one total a
round), the moves at which the trees were full (new and carried simulations
filling every tree: the search stopped before its time was up), the largest
overrun of a move's budget, and the longest carry of a subtree; per move,
the same with the carried visits (``--json``).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fixed_game(model, rules, opening: list[int], plies: int, sims: int, seed: int) -> list[int]:
    """The opening's moves, then ``plies`` moves of an untimed PUCT search of
    ``sims`` simulations for both sides (fewer if the game ends)."""
    from agz_jax.play import engine

    player = engine.Engine(model, max_simulations=sims, algorithm="puct", reuse=False,
                           threads=1, seed=seed)
    moves = [int(move) for move in opening]
    state = rules.from_moves(moves)
    for _ in range(plies):
        if bool(state.done):
            break
        move = player.analyse(rules, state, simulations=sims).action
        state = rules.step(state, move)
        moves.append(move)
    return moves


def measure_one(model, capacity: int, game: list[int], first: int, budget_ms: float, *,
                seed: int = 0, brain_flags: list[str] = (), clock=time.perf_counter,
                log=None) -> list[dict]:
    """One capacity's engine, compiled first, on the positions ``game[:ply]``
    for ply = first, first + 2, ...: a row a move."""
    from agz_jax.play import engine
    from agz_jax.play.brain import build_parser, play_settings

    rules = model.rules
    plan = play_settings(model, build_parser().parse_args(
        ["--max-sims", str(capacity), "--seed", str(seed), *brain_flags]))["timed"]
    e = engine.Engine(model, chunk=16, seed=seed, clock=clock, **plan)
    e.warmup(rules)
    rows = []
    for ply in range(first, len(game), 2):
        state = rules.from_moves(game[:ply])
        if bool(state.done):
            break
        start = clock()
        a = e.analyse(rules, state, deadline=start + budget_ms / 1000.0)
        elapsed_ms = (clock() - start) * 1000.0
        full = a.simulations + a.carried >= capacity * e.threads
        rows.append({"ply": ply, "threads": e.threads, "simulations": a.simulations,
                     "carried": a.carried, "full": bool(full), "reason": a.reason,
                     "elapsed_ms": elapsed_ms, "overrun_ms": elapsed_ms - budget_ms,
                     "carry_ms": e.carry_seconds * 1000.0})
        if log:
            log(f"capacity {capacity}, ply {ply}: {a.simulations} new, {a.carried} carried"
                f"{', full' if full else ''}, {elapsed_ms:.0f} ms")
    return rows


def _in_process(model_name: str, capacity: int, game: list[int], first: int, budget_ms: float,
                seed: int, brain_flags: list[str]) -> list[dict]:
    """``measure_one`` in a process of its own, as ``pbrain-agz`` runs (one
    engine in its process: another engine's trees would share its memory)."""
    command = [sys.executable, "-m", "experiments.play.tree_capacity", "--model", model_name,
               "--worker", str(capacity), "--game", ",".join(map(str, game)),
               "--worker-first", str(first), "--worker-budget-ms", repr(budget_ms),
               "--seed", str(seed), f"--brain-flags={' '.join(brain_flags)}"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the worker for capacity {capacity} failed: {tail}")
    return json.loads(done.stdout)


def measure(model, *, capacities: list[int], moves: int, turn_ms: float, opening: list[int],
            game_sims: int, rounds: int = 1, seed: int = 0, brain_flags: list[str] = (),
            clock=time.perf_counter, log=None, processes: str | None = None) -> dict:
    """The rows ``main`` prints (the module's docstring). Each round runs the
    capacities in turn, in reverse order every other round (so that a drift
    of the machine's pace falls on all of them); with ``processes`` (the
    model's name) each in a process of its own, else here, on ``clock`` (a
    test passes a fake one)."""
    from agz_jax.play.move_time import move_budget_ms

    rules = model.rules
    game = fixed_game(model, rules, opening, 2 * moves, game_sims, seed)
    first = len(opening)
    budget_ms = move_budget_ms(timeout_turn=turn_ms, timeout_match=None, time_left=None,
                               used_ms=0.0, empty=rules.num_actions)
    rows = {c: [] for c in capacities}
    totals = {c: [] for c in capacities}
    for r in range(rounds):
        for c in (capacities if r % 2 == 0 else capacities[::-1]):
            if processes:
                mine = _in_process(processes, c, game, first, budget_ms, seed, brain_flags)
            else:
                mine = measure_one(model, c, game, first, budget_ms, seed=seed,
                                   brain_flags=brain_flags, clock=clock)
            rows[c] += [{"round": r, **m} for m in mine]
            totals[c].append(sum(m["simulations"] for m in mine))
            if log:
                log(f"round {r}, capacity {c}: {totals[c][-1]:,} new simulations over "
                    f"{len(mine)} moves, full at {sum(m['full'] for m in mine)}")
    summary = []
    for c in capacities:
        mine = rows[c]
        summary.append({
            "capacity": c, "threads": mine[0]["threads"] if mine else None,
            "new_simulations": totals[c],
            "moves": len(mine) // rounds,
            "full_moves": sum(m["full"] for m in mine),
            "largest_overrun_ms": max((m["overrun_ms"] for m in mine), default=0.0),
            "longest_carry_ms": max((m["carry_ms"] for m in mine), default=0.0)})
    return {"capacities": summary, "moves": rows, "budget_ms": budget_ms, "turn_ms": turn_ms,
            "game": game, "opening_plies": first, "game_sims": game_sims, "rounds": rounds,
            "brain_flags": list(brain_flags), "processes": bool(processes),
            "machine": platform.processor() or platform.machine(),
            "date": time.strftime("%Y-%m-%d")}


def table(out: dict) -> str:
    """The summary as a Markdown table."""
    lines = ["| capacity a tree | new simulations over the moves | moves with every tree full "
             "| largest overrun of the budget | longest carry |", "|--:|--:|--:|--:|--:|"]
    for s in out["capacities"]:
        runs = " and ".join(f"{n:,}" for n in s["new_simulations"])
        lines.append(f"| {s['capacity']:,} | {runs} | {s['full_moves']} of "
                     f"{s['moves'] * out['rounds']} | {s['largest_overrun_ms']:.1f} ms "
                     f"| {s['longest_carry_ms']:.1f} ms |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.play.tree_capacity",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="default", help="a model name or directory (default)")
    p.add_argument("--capacities", default="8192,16384,32768",
                   help="tree capacities, comma-separated (8192,16384,32768)")
    p.add_argument("--moves", type=int, default=20, help="moves searched a capacity (20)")
    p.add_argument("--turn-ms", type=float, default=1000.0,
                   help="INFO timeout_turn of each move, ms (1000)")
    p.add_argument("--openings", default="rapfi15", help="opening set (rapfi15)")
    p.add_argument("--opening", type=int, default=0, help="the opening's index in the set (0)")
    p.add_argument("--game-sims", type=int, default=256,
                   help="simulations of the untimed search that makes the game (256)")
    p.add_argument("--rounds", type=int, default=1, help="times the game is played (1)")
    p.add_argument("--brain-flags", default="",
                   help="more pbrain-agz flags for the engines, e.g. '--threads 1'")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--in-process", action="store_true",
                   help="run every capacity in this process (default: each in its own)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    for hidden, kind in (("--worker", int), ("--game", str), ("--worker-first", int),
                         ("--worker-budget-ms", float)):
        p.add_argument(hidden, type=kind, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker is not None:  # one capacity, for measure's processes
        from agz_jax.nets import models

        game = [int(a) for a in args.game.split(",")]
        print(json.dumps(measure_one(models.load(args.model), args.worker, game,
                                     args.worker_first, args.worker_budget_ms, seed=args.seed,
                                     brain_flags=args.brain_flags.split())))
        return 0
    try:
        capacities = [int(c) for c in args.capacities.split(",") if c.strip()]
    except ValueError:
        p.error(f"--capacities must be comma-separated integers, got {args.capacities!r}")
    if not capacities or min(capacities) < 1:
        p.error(f"--capacities must be positive integers, got {args.capacities!r}")
    for name in ("moves", "game_sims", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be a positive integer, "
                    f"got {getattr(args, name)}")
    if not args.turn_ms > 0:
        p.error(f"--turn-ms must be positive, got {args.turn_ms}")
    from agz_jax.game import openings
    from agz_jax.nets import models
    from agz_jax.play.brain import build_parser

    unknown = build_parser().parse_known_args(args.brain_flags.split())[1]
    if unknown:
        p.error(f"--brain-flags: {' '.join(unknown)} are not pbrain-agz's flags")

    try:
        model = models.load(args.model)
        opening_set = openings.load(args.openings, model.rules.size)
    except (models.ModelError, FileNotFoundError, ValueError) as e:
        print(f"tree_capacity: {e}", file=sys.stderr)
        return 2
    if not 0 <= args.opening < len(opening_set):
        p.error(f"--opening must be 0 to {len(opening_set) - 1} for {args.openings}, "
                f"got {args.opening}")
    out = measure(model, capacities=capacities, moves=args.moves, turn_ms=args.turn_ms,
                  opening=[int(a) for a in opening_set[args.opening]],
                  game_sims=args.game_sims, rounds=args.rounds, seed=args.seed,
                  brain_flags=args.brain_flags.split(),
                  log=lambda s: print(s, file=sys.stderr, flush=True),
                  processes=None if args.in_process else args.model)
    print(json.dumps(out, indent=1) if args.json else table(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
