"""agz_jax.clock: the main job's times leave out the time it was stopped.

The accounting is checked on fake clocks, the main job's loop with a fake
iteration in which the job is stopped for an hour, and the real thing once: a
process stopped with SIGSTOP for a few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest
from rich.console import Console

from agz_jax import clock, run
from agz_jax.presets import get_preset
from experiments import selfplay as job

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


def test_only_a_gap_without_cpu_time_counts_as_stopped():
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
    # Stopped for a minute: the gap less one period, less the CPU time in it.
    c.work(1.0)
    c.wall += 60.0
    c.cpu += 0.25
    assert c.watch.stopped() == pytest.approx(60.0 - clock.PERIOD - 0.25)
    assert c.watch.running() == pytest.approx(c.wall - c.watch.stopped())
    # It is counted once: later looks add nothing.
    c.work(3.0)
    assert c.watch.stopped() == pytest.approx(60.0 - clock.PERIOD - 0.25)


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
    args = argparse.Namespace(out=tmp_path, quiet=True, save_games=0)
    start = c.wall
    assert job.loop(args, config, None, FakeState(0), FakeSaver(), False,
                    Console(file=open(os.devnull, "w"))) == 0
    lines = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in lines] == [1, 2, 3]
    assert [m[run.ITERATION_S] for m in lines] == pytest.approx([3.0, 3.0 + clock.PERIOD, 3.0])
    assert [m[run.STOPPED_S] for m in lines] == pytest.approx([0.0, 3600.0 - clock.PERIOD, 0.0])
    # Every second is in one of the two.
    assert sum(m[run.ITERATION_S] + m[run.STOPPED_S] for m in lines) == c.wall - start
    assert sum(run.wall_seconds(m) for m in lines) == pytest.approx(9.0 + clock.PERIOD)


STOPPED_CHILD = """
import sys, time
from agz_jax import clock
t0, s0 = clock.running(), clock.stopped()
print("ready", flush=True)
time.sleep(float(sys.argv[1]))
print(clock.running() - t0, clock.stopped() - s0, flush=True)
"""


def test_a_process_stopped_with_sigstop_counts_the_stop_as_stopped():
    proc = subprocess.Popen([sys.executable, "-c", STOPPED_CHILD, "9"], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    time.sleep(1.0)
    proc.send_signal(signal.SIGSTOP)
    time.sleep(6.0)
    proc.send_signal(signal.SIGCONT)
    out, _ = proc.communicate(timeout=60)
    running, stopped = (float(v) for v in out.split())
    assert proc.returncode == 0
    # Stopped 6 s (less at most a period); it slept 9 s of wall time in all.
    assert 6.0 - clock.PERIOD - 0.2 <= stopped <= 6.0 + 0.2
    assert running + stopped == pytest.approx(9.0, abs=1.0)
