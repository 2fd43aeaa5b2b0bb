"""How well ``pbrain-agz`` keeps to the protocol's clock.

    python -m experiments.play.brain_timing --model campaign --turns 200,500,1000 --moves 20
    python -m experiments.play.brain_timing --report    # docs/brain_timing.md from the ledger

One ``pbrain-agz`` process (the real program, over stdin/stdout, as a manager
runs it) plays ``--moves`` moves of one game per setting against a fixed
sequence of replies; each reply's wall time is measured from the moment the
command is written to the moment the move is read. Settings: ``INFO
timeout_turn T`` for each T of ``--turns``, and one game under
``INFO timeout_match`` / ``time_left`` (``--match`` ms for the whole game,
counted down as the manager would). The ledger (``--ledger``, default
``docs/brain_timing.jsonl``) gets, per setting, the mean and largest move time,
how many moves went over the limit, and the machine's load average while it
ran; the report, brain_timing.md, is written beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "docs" / "brain_timing.jsonl"
REPORT = ROOT / "docs" / "brain_timing.md"


class Brain:
    def __init__(self, model: str, extra: list[str]):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agz_jax.play.brain", "--model", model, *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1, cwd=ROOT)

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def reply(self) -> str:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("pbrain-agz exited")
            line = line.strip()
            if line.split(" ")[0] not in ("MESSAGE", "DEBUG"):
                return line

    def close(self) -> None:
        self.send("END")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def play(brain: Brain, size: int, moves: int, infos: list[str], match_ms: float | None,
         rng: np.random.Generator) -> list[float]:
    """Games in which the brain moves first and our replies are random empty
    points near its move, until the brain has made ``moves`` moves (a new game
    when one ends). Returns the brain's move times in ms."""
    times: list[float] = []
    while len(times) < moves:
        brain.send("RESTART")
        assert brain.reply() == "OK"
        for info in infos:
            brain.send(info)
        board = np.zeros((size, size), bool)
        left, command = match_ms, "BEGIN"
        while len(times) < moves:
            if left is not None:
                brain.send(f"INFO time_left {int(left)}")
            t0 = time.perf_counter()
            brain.send(command)
            reply = brain.reply()
            if reply.startswith("ERROR"):  # our last reply ended the game
                break
            ms = (time.perf_counter() - t0) * 1000.0
            times.append(ms)
            if left is not None:
                left -= ms
            x, y = (int(v) for v in reply.split(","))
            board[y, x] = True
            near = [(x + dx, y + dy) for dx in range(-2, 3) for dy in range(-2, 3)
                    if 0 <= x + dx < size and 0 <= y + dy < size and not board[y + dy, x + dx]]
            if not near:
                break
            rx, ry = near[rng.integers(len(near))]
            board[ry, rx] = True
            command = f"TURN {rx},{ry}"
    return times


def measure(model: str, turns: list[int], match_ms: float | None, moves: int,
            seed: int) -> list[dict]:
    from agz_jax.nets import models

    size = models.load(model).rules.size
    brain = Brain(model, ["--sims", "4096"])  # the clock, not the tree, ends each search
    brain.send(f"START {size}")
    if brain.reply() != "OK":
        raise RuntimeError("START failed")
    rows = []
    settings = [(f"timeout_turn {t}", [f"INFO timeout_turn {t}"], None, t) for t in turns]
    if match_ms:
        settings.append((f"timeout_match {match_ms:g} (time_left counted down)",
                         [f"INFO timeout_match {int(match_ms)}"], match_ms, None))
    for name, infos, match, limit in settings:
        load0 = os.getloadavg()[0]
        times = play(brain, size, moves, infos, match, np.random.default_rng(seed))
        load1 = os.getloadavg()[0]
        rows.append({"setting": name, "limit_ms": limit, "moves": len(times),
                     "mean_ms": float(np.mean(times)), "max_ms": float(np.max(times)),
                     "over": int(sum(t > limit for t in times)) if limit else None,
                     "total_ms": float(np.sum(times)), "match_ms": match,
                     "load": round((load0 + load1) / 2, 1), "model": model,
                     "date": time.strftime("%Y-%m-%d %H:%M")})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    brain.close()
    return rows


def report_path(ledger: Path) -> Path:
    """Where the report of ``ledger`` goes: brain_timing.md beside it."""
    return ledger.parent / REPORT.name


def report(ledger: Path = LEDGER, out: Path | None = None) -> str:
    """Write the table of ``ledger``'s rows to ``out`` (default ``report_path``)
    and return it."""
    out = report_path(ledger) if out is None else out
    rows = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    lines = ["# pbrain-agz and the clock", "",
             "Move times of the real `pbrain-agz` process, from writing the command to",
             "reading the move (`python -m experiments.play.brain_timing`; this file:",
             "`--report`). `load`: the machine's 1-minute load average meanwhile (2 cores).",
             "", "| setting | model | moves | mean ms | max ms | over the limit | "
             "whole game ms | load |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        over = "-" if r["over"] is None else f"{r['over']} / {r['moves']}"
        game = (f"{r['total_ms']:.0f} of {r['match_ms']:.0f}" if r["match_ms"]
                else f"{r['total_ms']:.0f}")
        lines.append(f"| {r['setting']} | {r['model']} | {r['moves']} | {r['mean_ms']:.0f} | "
                     f"{r['max_ms']:.0f} | {over} | {game} | {r['load']} |")
    text = "\n".join(lines) + "\n"
    out.write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.play.brain_timing",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="campaign")
    p.add_argument("--turns", default="200,500,1000", help="timeout_turn values, ms")
    p.add_argument("--match", type=float, default=20000.0, help="timeout_match, ms (0: skip)")
    p.add_argument("--moves", type=int, default=20, help="brain moves per setting")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ledger", type=Path, default=LEDGER,
                   help=f"the rows, one JSON line each (default {LEDGER.relative_to(ROOT)}); "
                        f"{REPORT.name} is written beside it")
    p.add_argument("--report", action="store_true",
                   help="measure nothing: rewrite the report from the ledger")
    args = p.parse_args(argv)
    from agz_jax.training import cli

    if args.ledger.is_dir() or cli.file_in_the_way(args.ledger.parent) is not None:
        print(f"error: --ledger {args.ledger} is not a file path; give a .jsonl file",
              file=sys.stderr)
        return 2
    if report_path(args.ledger).resolve() == args.ledger.resolve():
        print(f"error: --ledger {args.ledger} is the name of the report written beside it; "
              "give a .jsonl file", file=sys.stderr)
        return 2
    if args.report:
        if not args.ledger.is_file():
            print(f"error: --ledger {args.ledger} not found; measure first (leave out "
                  "--report)", file=sys.stderr)
            return 2
        print(report(args.ledger))
        return 0
    try:
        turns = [int(t) for t in args.turns.split(",") if t]
    except ValueError:
        print(f"error: --turns wants comma-separated milliseconds, got {args.turns!r}",
              file=sys.stderr)
        return 2
    if any(t < 0 for t in turns) or args.moves < 1:
        print("error: --turns must be >= 0 and --moves >= 1", file=sys.stderr)
        return 2
    from agz_jax.nets import models

    try:
        rows = measure(args.model, turns, args.match or None, args.moves, args.seed)
    except models.ModelError as e:
        print(f"error: --model: {e}", file=sys.stderr)
        return 2
    args.ledger.parent.mkdir(parents=True, exist_ok=True)
    with args.ledger.open("a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(report(args.ledger))
    return 0


if __name__ == "__main__":
    sys.exit(main())
