"""A stand-in Piskvork engine for the outside-engine tests (pure Python, no
JAX): it plays a greedy five-maker, and misbehaves on request.

    python tests/fake_piskvork.py [MODE] [--after N] [--window-ms MS]

Other arguments are ignored, so that it can stand in for ``pbrain-agz --model M``.

MODE (or the environment's ``FAKE_PISKVORK_MODE``) is one of:

- ``normal``: every move is the empty point that makes the longest line of its
  own (a five first), else blocks the opponent's longest, nearest the centre.
- ``illegal``: after N moves of its own, plays the opponent's last stone.
- ``offboard``: after N moves, plays a point off the board.
- ``crash``: after N moves, exits (code 3) instead of answering.
- ``hang``: answers ``START``, ``BOARD`` and ``BEGIN`` but never a ``TURN``.
- ``error``: after N moves, answers ``TURN`` with ``ERROR``.
- ``slowreply``: like Rapfi, drops the command word of a line read within
  ``--window-ms`` (default 50) of its last output, and reads the rest of the
  line as a command of its own (``ERROR Unknown command: 7,8``).

N is ``--after`` (default 3). With ``--debug`` (as ``pbrain-agz`` is run by
the outside yardstick) a ``DEBUG search: N simulations ... in T ms`` line in
``pbrain-agz``'s form comes before each move, N 100 times the moves made so far.

It speaks START, RESTART, INFO, BEGIN, TURN,
BOARD ... DONE, ABOUT and END, with notes (``MESSAGE``, ``DEBUG``) before
some replies as real engines print them; its move's ``MESSAGE`` carries an
``Eval`` (``evaluation``) as Rapfi's does.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

MODES = ("normal", "illegal", "offboard", "crash", "hang", "error", "slowreply")
LINES = ((1, 0), (0, 1), (1, 1), (1, -1))


class Fake:
    def __init__(self, mode: str, after: int, window_s: float, debug: bool = False):
        self.mode, self.after, self.window_s, self.debug = mode, after, window_s, debug
        self.size = 15
        self.fields: dict[tuple[int, int], int] = {}  # (x, y) -> 1 own, 2 opponent
        self.moves_made = 0
        self.last_opponent: tuple[int, int] | None = None
        self.last_output = 0.0
        self.block: list[str] | None = None

    def say(self, line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        self.last_output = time.monotonic()

    def run(self) -> None:
        for raw in sys.stdin:
            line = raw.strip()
            if not line:
                continue
            if (self.mode == "slowreply" and self.block is None
                    and time.monotonic() - self.last_output < self.window_s):
                # Rapfi, still finishing its reply, loses the command word.
                rest = line.split(None, 1)[1:]
                if rest:
                    self.say(f"ERROR Unknown command: {rest[0]}")
                continue
            if self.command(line):
                return

    def command(self, line: str) -> bool:
        """Handle one line; True at END."""
        if self.block is not None:
            if line.upper() == "DONE":
                self.fields = {}
                for stone in self.block:
                    x, y, field = (int(v) for v in stone.split(","))
                    self.fields[(x, y)] = field
                    if field == 2:
                        self.last_opponent = (x, y)
                self.block = None
                self.play()
            else:
                self.block.append(line)
            return False
        word, _, arg = line.partition(" ")
        word = word.upper()
        if word == "END":
            return True
        if word == "START":
            self.size = int(arg)
            self.fields = {}
            self.say("OK")
        elif word == "RESTART":
            self.fields = {}
            self.say("OK")
        elif word == "INFO":
            pass
        elif word == "BEGIN":
            self.play()
        elif word == "BOARD":
            self.block = []
        elif word == "TURN":
            if self.mode == "hang":
                while True:
                    time.sleep(60)
            x, y = (int(v) for v in arg.split(","))
            self.fields[(x, y)] = 2
            self.last_opponent = (x, y)
            self.play()
        elif word == "ABOUT":
            self.say('name="fake_piskvork", version="1"')
        else:
            self.say(f"UNKNOWN {word}")
        return False

    def play(self) -> None:
        if self.moves_made >= self.after:
            if self.mode == "crash":
                print("fake_piskvork: crashing on purpose", file=sys.stderr, flush=True)
                sys.exit(3)
            if self.mode == "error":
                self.say("ERROR fake_piskvork: refusing to move")
                return
            if self.mode == "illegal" and self.last_opponent is not None:
                self.say("{},{}".format(*self.last_opponent))
                return
            if self.mode == "offboard":
                self.say(f"{self.size + 4},{self.size + 4}")
                return
        x, y = self.choose()
        self.fields[(x, y)] = 1
        self.moves_made += 1
        if self.debug:  # pbrain-agz's form, carried visits from the second move on
            carried = f" (+{self.moves_made * 10} carried)" if self.moves_made > 1 else ""
            self.say(f"DEBUG search: {100 * self.moves_made} simulations{carried} in 5 ms "
                     "(budget 300 ms), value +0.000; fake")
        self.say(f"MESSAGE thinking done | Eval {self.evaluation()}")
        self.say(f"{x},{y}")

    def evaluation(self) -> int:
        """A made-up evaluation, as Rapfi prints one: 10 x (the opponent's stones'
        x sum - its own), a function of the position alone."""
        return 10 * sum(x if who == 2 else -x for (x, _), who in self.fields.items())

    def run_length(self, x: int, y: int, who: int) -> int:
        """The longest line of ``who``'s stones through (x, y) if it played there."""
        best = 0
        for dx, dy in LINES:
            n = 1
            for sign in (1, -1):
                k = 1
                while self.fields.get((x + sign * k * dx, y + sign * k * dy)) == who:
                    n += 1
                    k += 1
            best = max(best, n)
        return best

    def choose(self) -> tuple[int, int]:
        centre = (self.size - 1) / 2
        best, pick = None, None
        for y in range(self.size):
            for x in range(self.size):
                if (x, y) in self.fields:
                    continue
                own, theirs = self.run_length(x, y, 1), self.run_length(x, y, 2)
                key = (own >= 5, theirs >= 5, max(own, theirs), own,
                       -abs(x - centre) - abs(y - centre), -y, -x)
                if best is None or key > best:
                    best, pick = key, (x, y)
        return pick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", nargs="?", default=os.environ.get("FAKE_PISKVORK_MODE", "normal"),
                        choices=MODES)
    parser.add_argument("--after", type=int, default=3)
    parser.add_argument("--window-ms", type=float, default=50.0)
    parser.add_argument("--debug", action="store_true")
    args, _ = parser.parse_known_args()  # e.g. pbrain-agz's --model, when standing in for it
    Fake(args.mode, args.after, args.window_ms / 1000.0, args.debug).run()


if __name__ == "__main__":
    main()
