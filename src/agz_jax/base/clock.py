"""Running time: the wall clock less the time the process was stopped.

A run stopped by ``kill -STOP`` or Ctrl-Z (SIGTSTP) and continued hours later
would log those hours as the wall time of the iteration it was in, and the
campaign's ledger (``experiments.training.campaign``), which sums the iterations'
times, would count them as compute spent. The main job times its phases and
iterations with ``running()`` instead, and logs the stopped seconds apart
(``run.STOPPED_S``).

A stopped process runs no code, so a stop can only be seen afterwards: a
daemon thread looks at the clocks every ``PERIOD`` seconds, and two looks (by
that thread or by any caller of ``running``) more than ``GAP`` seconds apart
mean the process did not run in between, all but about one period of it, if
the process used less CPU time in the gap than one thread busy throughout
would have. That tells a stop from a busy process whose watch thread waited
for the GIL: a thread held it, computing. (``time.perf_counter`` already
leaves out a suspended machine's sleep on Linux.) Two cases are counted
wrongly: a stop no longer than the CPU time the process's threads used in the
moments around it (a few seconds, on many busy cores) is not counted, and a
thread that held the GIL for ``GAP`` seconds while blocked without computing
would be counted as stopped. The main job prints the stopped seconds on its
iteration's line, so that neither goes unseen. In a run of several processes each has its own
watch and process 0 logs its own: a stop of another process is time process 0
waited, and counts as running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

PERIOD = 0.5  # seconds between the watch thread's looks at the clocks
GAP = 5.0  # two looks further apart than this: the process may have been stopped


class StopWatch:
    """Counts the seconds the process was stopped (see the module). ``clock`` is
    the wall clock and ``cpu`` the process's CPU time (fakes in tests, with no
    thread started)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 cpu: Callable[[], float] = time.process_time,
                 period: float = PERIOD, gap: float = GAP):
        self.period, self.gap = period, gap
        self._clock, self._cpu = clock, cpu
        self._lock = threading.Lock()
        self._last, self._last_cpu = clock(), cpu()
        self._stopped = 0.0

    def look(self) -> tuple[float, float]:
        """(now by the wall clock, stopped seconds so far), after counting the gap
        since the last look."""
        with self._lock:
            now, cpu = self._clock(), self._cpu()
            gap = now - self._last
            if gap > self.gap and cpu - self._last_cpu < gap - self.period:
                self._stopped += gap - self.period
            self._last, self._last_cpu = now, cpu
            return now, self._stopped

    def stopped(self) -> float:
        """Seconds the process was stopped so far."""
        return self.look()[1]

    def running(self) -> float:
        """The wall clock less the stopped seconds (differences of it are what count)."""
        now, stopped = self.look()
        return now - stopped

    def watch(self) -> StopWatch:
        """Starts the daemon thread that looks every ``period`` seconds."""
        def loop():
            while True:
                time.sleep(self.period)
                self.look()

        threading.Thread(target=loop, name="agz_jax.base.clock", daemon=True).start()
        return self


_watch: StopWatch | None = None
_start_lock = threading.Lock()


def _the_watch() -> StopWatch:
    global _watch
    with _start_lock:
        if _watch is None:
            _watch = StopWatch().watch()
        return _watch


def running() -> float:
    """Seconds on the process's running clock: the difference of two calls is the
    wall time between them less the time the process was stopped."""
    return _the_watch().running()


def stopped() -> float:
    """Seconds the process has been stopped since its first call here."""
    return _the_watch().stopped()
