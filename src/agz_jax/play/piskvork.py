"""A Piskvork (Gomocup) manager: another engine as a subprocess, spoken to as
the Gomocup manager does (games between two of them: ``agz_jax.play.piskvork_games``).

    with Piskvork(["/opt/rapfi-src/build/pbrain-rapfi"], "rapfi:1000",
                  Settings(timeout_turn_ms=30000, max_node=1000)) as rapfi:
        rapfi.new_game()
        reply = rapfi.begin()  # its first move on the empty board

``Piskvork`` runs one engine ("brain") over the Piskvork protocol on its
stdin/stdout, as the Gomocup manager does: ``START size`` and the ``INFO``
lines (``timeout_turn``, ``timeout_match``, ``time_left``, ``rule``, and
``thread_num`` / ``max_node`` where set), then per game ``RESTART`` (or
``START`` for a fresh process), the position of an opening as ``BOARD`` ...
``DONE`` or ``BEGIN`` on the empty board, ``TURN x,y`` for each reply, and
``END`` when done. Coordinates are ``x,y`` with ``x`` the column: action
``y * size + x``. Reply lines starting with ``MESSAGE``, ``DEBUG``, ``INFO``
or ``SUGGEST`` are not replies and are skipped.

Two real engines' habits shape it:

- Rapfi drops a command that arrives while it is still finishing its own
  reply (it prints the move, then marks itself idle; a ``TURN`` read in
  between loses its word and its ``x,y`` comes back as ``ERROR Unknown
  command``). So before each command the manager waits until the engine's
  last output line is ``Settings.quiet_s`` (default 0.05 s) old.
- An engine may hang, crash or misbehave. Every reply is awaited with a
  timeout (a reader thread feeds a queue), and each failure raises a typed
  ``EngineError`` whose message is one line: ``EngineMissing`` (no such
  program), ``EngineCrashed`` (it exited or closed its output),
  ``EngineTimeout`` (no reply within ``timeout_turn`` + ``grace_s`` for a
  move, ``start_timeout_s`` for ``START``), ``EngineRefused`` (``ERROR`` or
  ``UNKNOWN``), ``IllegalMove`` (unparsable, off the board, or occupied: the
  manager keeps the position it sent). The process is killed on ``close``
  (and on leaving the ``with`` block); the next game starts a fresh one.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import queue
import re
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from agz_jax.play.move_time import UNLIMITED_MS

NOT_REPLIES = ("MESSAGE", "DEBUG", "INFO", "SUGGEST")  # lines that are not a reply
_MOVE = re.compile(r"^\s*(-?\d+)\s*,\s*(-?\d+)\s*$")


class EngineError(RuntimeError):
    """An engine failed; ``str(e)`` is a one-line reason naming the engine and
    ``kind`` says how it failed."""

    kind = "failed"


class EngineMissing(EngineError):
    """The engine's program does not exist or is not executable."""

    kind = "missing"


class EngineCrashed(EngineError):
    """The engine exited or closed its output."""

    kind = "crashed"


class EngineTimeout(EngineError):
    """No reply within the time allowed."""

    kind = "timeout"


class EngineRefused(EngineError):
    """The engine answered ``ERROR`` or ``UNKNOWN``."""

    kind = "refused"


class IllegalMove(EngineError):
    """The engine played an unparsable, off-board or occupied point."""

    kind = "illegal"


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a manager tells an engine, and how long it waits for it.

    Attributes:
      size: the board (``START size``).
      rule: ``INFO rule``: 0 freestyle (five or more wins), 1 exactly five, 4 renju.
      timeout_turn_ms: ``INFO timeout_turn``; None: not sent (no turn limit).
      timeout_match_ms: ``INFO timeout_match`` (0: no match limit); ``INFO
        time_left`` is sent with it at every game (``UNLIMITED_MS`` for 0).
      max_node: ``INFO max_node`` (Rapfi's node limit per move); None: not sent.
      thread_num: ``INFO thread_num``; None: not sent.
      grace_s: how far past ``timeout_turn`` a move may come before the engine
        has timed out.
      move_limit_s: the wait for a move when no ``timeout_turn`` is sent.
      start_timeout_s: the wait for ``START``'s ``OK`` (a fresh process may
        load and compile first).
      quiet_s: the engine's last output line must be this old before a
        command is sent (Rapfi drops commands sent sooner).
      close_timeout_s: how long ``END`` may take before the process is killed.
    """

    size: int = 15
    rule: int = 0
    timeout_turn_ms: int | None = 1000
    timeout_match_ms: int = 0
    max_node: int | None = None
    thread_num: int | None = 1
    grace_s: float = 3.0
    move_limit_s: float = 600.0
    start_timeout_s: float = 300.0
    quiet_s: float = 0.05
    close_timeout_s: float = 2.0

    def info_lines(self) -> list[str]:
        """The ``INFO`` lines sent after ``START`` and at every new game."""
        lines = []
        if self.timeout_turn_ms is not None:
            lines.append(f"INFO timeout_turn {self.timeout_turn_ms}")
        lines.append(f"INFO timeout_match {self.timeout_match_ms}")
        lines.append(f"INFO time_left {self.timeout_match_ms or UNLIMITED_MS}")
        lines.append(f"INFO rule {self.rule}")
        if self.thread_num is not None:
            lines.append(f"INFO thread_num {self.thread_num}")
        if self.max_node is not None:
            lines.append(f"INFO max_node {self.max_node}")
        return lines

    def move_timeout_s(self) -> float:
        """How long a move may take before the engine has timed out."""
        if self.timeout_turn_ms is None:
            return self.move_limit_s
        return self.timeout_turn_ms / 1000.0 + self.grace_s


def command_argv(command: str | Sequence[str]) -> list[str]:
    """The argv of an engine given as a command line or a list; EngineMissing
    when its program is not an executable file (a bare name is looked up on
    PATH)."""
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise EngineMissing("no engine command given")
    program = argv[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        path = Path(program)
        if not path.exists():
            raise EngineMissing(f"engine {program} does not exist")
        if not path.is_file() or not os.access(path, os.X_OK):
            raise EngineMissing(f"engine {program} is not an executable file")
    elif shutil.which(program) is None:
        raise EngineMissing(f"engine {program!r} is not on PATH; give its path")
    return argv


class Piskvork:
    """One engine process spoken to over the Piskvork protocol (see the module).

    Nothing is started until the first ``new_game``; after a failure (an
    ``EngineError`` from any method) ``close`` it, and the next ``new_game``
    starts a fresh process. ``stones`` is the position the engine was sent
    and played this game (action -> 1 its own stone, 2 the opponent's);
    ``notes`` the lines that are no reply (``MESSAGE``, ``DEBUG``, ...) it
    wrote before its last reply, such as Rapfi's evaluation.
    """

    def __init__(self, command: str | Sequence[str], name: str | None = None,
                 settings: Settings | None = None, *, cwd: str | Path | None = None,
                 env: dict | None = None):
        self.argv = command_argv(command)
        self.name = name or Path(self.argv[0]).name
        self.settings = settings or Settings()
        self.cwd = cwd
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.stones: dict[int, int] = {}
        self.stray: list[str] = []  # unexpected lines found before a command
        self.notes: list[str] = []  # the MESSAGE/DEBUG/... lines before the last reply
        self._lines: queue.Queue = queue.Queue()
        self._last_output = 0.0  # time.monotonic() of the last output line
        self._stderr: collections.deque = collections.deque(maxlen=5)
        self._awaiting: str | None = None  # the command whose reply is due
        self._stderr_reader: threading.Thread | None = None

    # -- the process ----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _spawn(self) -> None:
        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=self.cwd, env=self.env, start_new_session=True)
        except OSError as e:
            raise EngineMissing(f"{self.name}: cannot start {self.argv[0]} ({e})") from None
        # Each process has its own queue and stderr tail: a reader of an earlier
        # process, still ending, cannot put its end of output into this one's.
        self._lines = lines = queue.Queue()
        self._stderr = tail = collections.deque(maxlen=5)
        self._last_output = 0.0

        def on_line(line: str | None) -> None:  # every line, None at end of output
            if line is not None:
                self._last_output = time.monotonic()
            lines.put(line)

        def on_error_line(line: str | None) -> None:  # the last few, for a crash's reason
            if line is not None and line.strip():
                tail.append(line)

        threads = [threading.Thread(target=_pump, args=(stream, sink), daemon=True,
                                    name=f"piskvork {self.name}")
                   for stream, sink in ((self.proc.stdout, on_line),
                                        (self.proc.stderr, on_error_line))]
        for thread in threads:
            thread.start()
        self._stderr_reader = threads[1]

    def close(self) -> None:
        """``END``, then kill the process if it has not exited within
        ``close_timeout_s`` (at once when it is mid-move or broken)."""
        proc, self.proc = self.proc, None
        busy, self._awaiting = self._awaiting, None
        self.stones = {}
        if proc is None:
            return
        try:
            if proc.poll() is None and busy is None:
                try:
                    proc.stdin.write(b"END\n")
                    proc.stdin.flush()
                    proc.wait(timeout=self.settings.close_timeout_s)
                except (OSError, subprocess.TimeoutExpired):
                    pass
        finally:
            if proc.poll() is None:
                try:  # its own session: the engine's children go too
                    os.killpg(proc.pid, 9)
                except OSError:
                    proc.kill()
            proc.wait()
            try:  # its output pipes end with it: their readers close them
                proc.stdin.close()
            except OSError:
                pass

    def __enter__(self) -> Piskvork:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- lines ----------------------------------------------------------------------------

    def _exited(self, doing: str) -> EngineCrashed:
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        if code is not None and self._stderr_reader is not None:
            self._stderr_reader.join(timeout=1.0)  # its last words
        how = "closed its output" if code is None else f"exited with code {code}"
        last = f"; its last error line: {self._stderr[-1].strip()!r}" if self._stderr else ""
        return EngineCrashed(f"{self.name} {how} {doing}{last}")

    def _send(self, line: str) -> None:
        """Write one command line, once the engine has been quiet for ``quiet_s``."""
        if self.proc is None:
            raise EngineCrashed(f"{self.name} is not running")
        while True:
            idle = time.monotonic() - self._last_output
            if idle >= self.settings.quiet_s:
                break
            time.sleep(self.settings.quiet_s - idle)
        while True:  # what came meanwhile: notes, or lines no command asked for
            try:
                early = self._lines.get_nowait()
            except queue.Empty:
                break
            if early is None:
                raise self._exited(f"before {line.split()[0]}")
            if _word(early) not in NOT_REPLIES and early.strip():
                self.stray.append(early)
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            raise self._exited(f"before {line.split()[0]}") from None

    def _reply(self, command: str, timeout_s: float) -> str:
        """The next reply line (notes skipped); EngineCrashed, EngineTimeout,
        or EngineRefused for ``ERROR`` / ``UNKNOWN``."""
        self._awaiting = command
        self.notes = []
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise EngineTimeout(f"{self.name} gave no reply to {command} within "
                                    f"{timeout_s:.1f} s")
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise self._exited(f"after {command}")
            word = _word(line)
            if not line.strip() or word in NOT_REPLIES:
                if line.strip():
                    self.notes.append(line.strip())
                continue
            self._awaiting = None
            if word in ("ERROR", "UNKNOWN"):
                raise EngineRefused(f"{self.name} answered {command} with {_short(line)}")
            return line.strip()

    # -- a game ---------------------------------------------------------------------------

    def new_game(self) -> None:
        """Ready for a game on the empty board: a fresh process gets ``START``,
        a running one ``RESTART``; then the ``INFO`` lines."""
        s = self.settings
        if not self.running:
            if self.proc is not None:
                self.close()
            self._spawn()
            self._send(f"START {s.size}")
            self._expect_ok(f"START {s.size}", s.start_timeout_s)
        else:
            self._send("RESTART")
            self._expect_ok("RESTART", s.move_timeout_s())
        self.stones = {}
        for line in s.info_lines():
            self._send(line)

    def _expect_ok(self, command: str, timeout_s: float) -> None:
        reply = self._reply(command, timeout_s)
        if reply.upper() != "OK":
            raise EngineRefused(f"{self.name} answered {command} with {_short(reply)}, "
                                "not OK")

    def begin(self) -> int:
        """The engine's first move on the empty board."""
        if self.stones:
            raise ValueError("BEGIN is for the empty board; use board()")
        self._send("BEGIN")
        return self._move("BEGIN")

    def board(self, moves: Sequence[int], colour: int) -> int:
        """The engine's move in the position of ``moves`` (actions from the empty
        board, black first), playing ``colour`` (0 black, 1 white)."""
        size = self.settings.size
        self.stones = {}
        self._send("BOARD")
        for i, action in enumerate(moves):
            self._check_point(action, "BOARD")
            field = 1 if i % 2 == colour else 2
            self.stones[int(action)] = field
            y, x = divmod(int(action), size)
            self._send(f"{x},{y},{field}")
        self._send("DONE")
        return self._move(f"BOARD ({len(moves)} stones)")

    def turn(self, action: int) -> int:
        """The engine's answer to the opponent's move ``action``."""
        self._check_point(action, "TURN")
        self.stones[int(action)] = 2
        y, x = divmod(int(action), self.settings.size)
        self._send(f"TURN {x},{y}")
        return self._move(f"TURN {x},{y}")

    def _check_point(self, action: int, command: str) -> None:
        if not 0 <= action < self.settings.size ** 2 or int(action) in self.stones:
            raise ValueError(f"{command}: the point {action} is off the board or occupied")

    def _move(self, command: str) -> int:
        """Read a move, check it against the position, and keep it."""
        reply = self._reply(command, self.settings.move_timeout_s())
        found = _MOVE.match(reply)
        if not found:
            raise IllegalMove(f"{self.name} answered {command} with {_short(reply)}, "
                              "not a move x,y")
        x, y = int(found[1]), int(found[2])
        size = self.settings.size
        if not (0 <= x < size and 0 <= y < size):
            raise IllegalMove(f"{self.name} played {x},{y}, off the {size}x{size} board")
        action = y * size + x
        if action in self.stones:
            raise IllegalMove(f"{self.name} played {x},{y}, an occupied point")
        self.stones[action] = 1
        return action


def _pump(stream, sink) -> None:
    """Read ``stream`` line by line into ``sink``, then ``sink(None)`` and close it."""
    try:
        for raw in iter(stream.readline, b""):
            sink(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
    except (OSError, ValueError):
        pass
    sink(None)
    try:
        stream.close()
    except OSError:
        pass


def _word(line: str) -> str:
    parts = line.split(None, 1)
    return parts[0].upper() if parts else ""


def _short(line: str, limit: int = 120) -> str:
    text = " ".join(line.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")
