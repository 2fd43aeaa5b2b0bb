"""agz_jax.base.clock: the main job's times leave out the time it was stopped.

The accounting is checked on fake clocks, the main job's loop with a fake
iteration in which the job is stopped for an hour, and the real thing once: a
process stopped with SIGSTOP for a few seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from rich.console import Console

from agz_jax.base import clock
from agz_jax.config.presets import get_preset
from agz_jax.match import arena
from agz_jax.nets import checkpoint
from agz_jax.training import driver as job
from agz_jax.training import report, run

ROOT = Path(__file__).resolve().parents[1]


class Clocks:
    """A fake wall clock and CPU clock, and a StopWatch that reads them."""

    def __init__(self):
        self.wall = self.cpu = 0.0
        self.watch = clock.StopWatch(clock=lambda: self.wall, cpu=lambda: self.cpu)

    def work(self, seconds: float, cores: float = 1.0) -> None:
        """Compute for ``seconds``, the watch looking every half second."""
        for _ in range(round(seconds / clock.PERIOD)):
            self.wall += clock.PERIOD
            self.cpu += cores * clock.PERIOD
            self.watch.look()


def test_a_gap_counts_as_stopped_unless_a_thread_computed_through_it():
    c = Clocks()
    c.work(10.0, cores=2.0)
    assert c.watch.stopped() == 0.0 and c.watch.running() == 10.0
    # The watch thread waited 12 s for the GIL while the main thread computed.
    c.wall += 12.0
    c.cpu += 12.0
    assert c.watch.stopped() == 0.0
    # A gap under GAP is a late look, whatever the CPU did.
    c.wall += clock.GAP
    assert c.watch.stopped() == 0.0
    # Stopped for a minute: the gap less one period.
    c.work(1.0)
    c.wall += 60.0
    c.cpu += 0.25
    assert c.watch.stopped() == 60.0 - clock.PERIOD
    assert c.watch.running() == c.wall - c.watch.stopped()
    # It is counted once: later looks add nothing.
    c.work(3.0)
    assert c.watch.stopped() == 60.0 - clock.PERIOD
    # On 16 busy cores: 10 s stopped after half a second of computing (8 CPU-s).
    c.work(2.0, cores=16.0)
    c.wall += 10.5
    c.cpu += 8.0
    assert c.watch.stopped() == 60.0 + 10.0 - clock.PERIOD


def test_a_phase_and_a_checkpoint_leave_out_a_stop_in_them(tmp_path, monkeypatch):
    c = Clocks()
    monkeypatch.setattr(clock, "running", c.watch.running)

    def stopped_for_a_minute(*args, **kwargs):
        c.work(2.0)
        c.wall += 60.0
        c.work(1.0)

    won = arena.MatchResult(winner=np.array([0, 1]), a_black=np.array([True, False]),
                            length=np.array([9, 10]), moves=np.zeros((10, 2), np.int32))

    class Components:
        def evaluate(self, variables, key):
            stopped_for_a_minute()
            return won, won

    metrics = run.evaluate(Components(), None, None)
    assert metrics["eval/vs_random_score"] == 1.0
    assert metrics["time/eval_s"] == 3.0
    with checkpoint.Saver(tmp_path) as saver:
        monkeypatch.setattr(saver._mngr, "save", stopped_for_a_minute)
        monkeypatch.setattr(saver._mngr, "wait_until_finished", lambda: None)
        assert saver.save(1, {}, {}) == 3.0


class FakeState(NamedTuple):
    iteration: int


class FakeSaver:
    def save(self, step, state, meta) -> float:
        return 0.0

    def wait(self) -> float:
        return 0.0


def test_the_main_jobs_lines_leave_out_a_stop_and_log_it_apart(tmp_path, monkeypatch):
    c = Clocks()
    monkeypatch.setattr(clock, "running", c.watch.running)
    monkeypatch.setattr(clock, "stopped", c.watch.stopped)
    monkeypatch.setattr(run, "params_hash", lambda state: "0" * 64)

    def iteration(comps, state):
        c.work(2.0)  # self-play
        if state.iteration == 1:  # the second iteration: stopped for an hour, then on
            c.wall += 3600.0
        c.work(1.0)
        return FakeState(state.iteration + 1), {"time/selfplay_s": 2.0, "train/trained": 0.0}

    monkeypatch.setattr(run, "run_iteration", iteration)
    config = get_preset("smoke").replace(**{"iterations": 3, "eval.every": 0})
    start = c.wall
    assert job.loop(config, tmp_path, None, FakeState(0), FakeSaver(), False,
                    Console(file=open(os.devnull, "w")), quiet=True).iterations == 3
    lines = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in lines] == [1, 2, 3]
    assert [m[run.ITERATION_S] for m in lines] == [3.0, 3.0, 3.0]
    assert [m[run.STOPPED_S] for m in lines] == [0.0, 3600.0, 0.0]
    # Every second is in one of the two.
    assert sum(m[run.ITERATION_S] + m[run.STOPPED_S] for m in lines) == c.wall - start
    assert sum(run.wall_seconds(m) for m in lines) == 9.0
    # The console line says so, and says nothing when the job ran throughout.
    shown = {"speed/games_per_s": 1.0, "speed/sims_per_s": 1.0, "selfplay/mean_length": 9.0,
             "selfplay/black_wins": 0.5, "selfplay/white_wins": 0.5, "selfplay/draws": 0.0,
             "replay/size": 8.0}
    assert report.fmt_line(2, 3, {**shown, **lines[1]}).endswith(" | stopped 3600 s")
    assert "stopped" not in report.fmt_line(1, 3, {**shown, **lines[0]})


STOPPED_CHILD = """
import sys, time
from agz_jax.base import clock
t0, s0 = clock.running(), clock.stopped()
print("ready", flush=True)
time.sleep(float(sys.argv[1]))
print(clock.running() - t0, clock.stopped() - s0, flush=True)
"""


@pytest.mark.long
def test_a_process_stopped_with_sigstop_counts_the_stop_as_stopped():
    proc = subprocess.Popen([sys.executable, "-c", STOPPED_CHILD, "9"], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    time.sleep(1.0)
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGSTOP)
    time.sleep(7.0)
    proc.send_signal(signal.SIGCONT)
    held = time.perf_counter() - t0  # at least 7 s, more on a loaded machine
    out, _ = proc.communicate(timeout=60)
    running, stopped = (float(v) for v in out.split())
    assert proc.returncode == 0
    # The stop, less a period or so; it slept 9 s of wall time in all.
    assert held - 2 * clock.PERIOD - 0.2 <= stopped <= held + 0.1
    assert running + stopped == pytest.approx(max(9.0, held + 1.0), abs=1.5)
