"""``pbrain-agz``: a Gomocup / Piskvork engine ("brain") speaking the Piskvork
protocol on stdin/stdout.

    pbrain-agz [--model default] [--sims 1600] [--debug]
    python -m agz_jax.brain --model models/default

One command a line (CRLF or LF); one reply a line, flushed. Coordinates are
0-based ``x,y`` with ``x`` the column. Supported: ``START n``, ``RECTSTART w,h``
(square only), ``RESTART``, ``BEGIN``, ``TURN x,y``, ``BOARD`` ... ``x,y,field``
... ``DONE`` (field 1 own stone, 2 opponent's), ``TAKEBACK x,y``, ``INFO key
value``, ``ABOUT``, ``END``. Anything else gets ``UNKNOWN``; a known command with
bad arguments, out of order, or a position that cannot be played gets
``ERROR <reason>`` and the engine keeps serving. It never prints an illegal move.

Rules: ``INFO rule`` bit 1 (``rule & 1``) asks for *exactly five* (the
``standard`` rule), otherwise five or more wins (``freestyle``). The search and
the tactical guard follow the game's rule whatever rule the model was trained
on (said in a ``MESSAGE`` when they differ); renju and caro (bits 4 and 8) are
not supported (``ERROR``, and play goes on without forbidden moves). The board
size must be the model's (the net's heads are sized for it).

Time: a move's budget is ``min(timeout_turn, time_left / moves_to_go)`` less a
safety reserve, counted from the moment its command was read; the search runs
in chunks of simulations and stops when the next chunk would overrun it.
``timeout_turn 0`` means "as fast as possible" (the net's own choice, guarded).
Without any time limit the search runs ``--sims`` simulations. Everything is
compiled at ``START`` (once for both rules: the rule is a run-time flag) and
kept in the persistent XLA cache, so the next process starts faster.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable

import numpy as np

ABOUT = 'name="agz_jax", version="{version}", author="agz_jax authors", country="-"'
MAX_LINE = 4096
# INFO values that are integers (milliseconds, bytes, flags).
# Other keys (folder, evaluate, ...) are ignored, as the protocol asks.
INT_INFO = ("timeout_turn", "timeout_match", "time_left", "max_memory", "game_type", "rule")
_INT = re.compile(r"^[+-]?[0-9]{1,12}$")  # ASCII digits only


class ProtocolError(Exception):
    """Bad input: the message is sent as ``ERROR <message>``."""


def _int(text: str, what: str) -> int:
    text = text.strip()
    if not _INT.match(text):
        raise ProtocolError(f"{what} must be an integer, got {text!r}")
    return int(text)


def _coords(arg: str, what: str, count: int = 2) -> list[int]:
    parts = arg.split(",")
    if len(parts) != count:
        raise ProtocolError(f"{what}: expected {count} comma-separated integers, got {arg!r}")
    return [_int(p, what) for p in parts]


class Brain:
    """The protocol state machine. ``handle(line)`` returns the reply lines.

    ``engine_factory`` builds the analysis engine (or raises with a reason that
    every ``START`` then reports). The position is kept as a board of fields
    (0 empty, 1 own, 2 opponent) and the order the stones arrived in (for the
    net's last-move plane and for ``TAKEBACK``).
    """

    def __init__(self, engine_factory: Callable[[], object], *, simulations: int | None = None,
                 debug: bool = False, version: str = "0"):
        self._engine_factory = engine_factory
        self.engine = None
        self.engine_error: str | None = None
        self.simulations = simulations
        self.debug = debug
        self.version = version
        self.size: int | None = None
        self.fields: np.ndarray | None = None  # int8[A]: 0 empty, 1 own, 2 opponent
        self.order: list[int] = []  # actions in the order they were placed
        self.rule_bits = 0
        self.timeout_turn: int | None = None  # ms
        self.timeout_match: int | None = None
        self.time_left: int | None = None
        self.used_ms = 0.0  # our thinking time this game (for timeout_match alone)
        self.board_lines: list[tuple[int, int]] | None = None  # inside BOARD
        self.board_problem: str | None = None
        self.finished = False
        self._warm = False

    # -- helpers ---------------------------------------------------------------------------

    def rule(self) -> str:
        return "standard" if self.rule_bits & 1 else "freestyle"

    def rules(self):
        return self.engine.rules(self.rule())

    def _need_game(self, command: str):
        if self.fields is None:
            raise ProtocolError(f"{command} before START: no game")

    def _point(self, x: int, y: int, what: str) -> int:
        if not (0 <= x < self.size and 0 <= y < self.size):
            raise ProtocolError(f"{what} {x},{y} is off the {self.size}x{self.size} board "
                                f"(coordinates are 0..{self.size - 1})")
        return y * self.size + x

    def _fmt(self, action: int) -> str:
        y, x = divmod(int(action), self.size)
        return f"{x},{y}"

    def _new_game(self):
        self.fields = np.zeros(self.size * self.size, np.int8)
        self.order = []
        self.used_ms = 0.0
        self.board_lines = None

    # -- the commands ----------------------------------------------------------------------

    def handle(self, line: str, t_read: float | None = None) -> list[str]:
        """Replies to one input line (without its line ending)."""
        t_read = time.perf_counter() if t_read is None else t_read
        line = line.strip()
        if not line:
            return []  # the protocol's managers ignore empty lines too
        try:
            if self.board_lines is not None:
                return self._board_line(line, t_read)
            command, _, arg = line.partition(" ")
            command, arg = command.upper(), arg.strip()
            handler = getattr(self, f"_cmd_{command.lower()}", None) if command.isascii() else None
            if not (command.isascii() and command.isalpha()) or handler is None:
                return [f"UNKNOWN command {_show(command)} is not supported"]
            return handler(arg, t_read)
        except ProtocolError as e:
            return [f"ERROR {_one_line(str(e))}"]
        except Exception as e:  # never die on a line: say what broke and go on
            return [f"ERROR internal error: {type(e).__name__}: {_one_line(str(e))}"]

    def _no_args(self, command: str, arg: str):
        if arg:
            raise ProtocolError(f"{command} takes no arguments, got {arg!r}")

    def _cmd_start(self, arg: str, t_read: float) -> list[str]:
        return self._start(_int(arg, "START size"), "START")

    def _cmd_rectstart(self, arg: str, t_read: float) -> list[str]:
        width, height = _coords(arg, "RECTSTART width,height")
        if width != height:
            raise ProtocolError(f"RECTSTART {width},{height}: only square boards are supported")
        return self._start(width, "RECTSTART")

    def _start(self, size: int, command: str) -> list[str]:
        self._ensure_engine()
        if size != self.engine.size:
            raise ProtocolError(f"{command}: unsupported size {size}: the model "
                                f"{self.engine.model.name!r} plays only "
                                f"{self.engine.size}x{self.engine.size}")
        self.size = size
        self._new_game()
        if not self._warm:
            self.engine.warmup()  # both rules: one compilation
            self._warm = True
        return ["OK"]

    def _ensure_engine(self):
        if self.engine is None and self.engine_error is None:
            try:
                self.engine = self._engine_factory()
            except Exception as e:
                self.engine_error = f"{type(e).__name__}: {e}" if not str(e) else str(e)
        if self.engine is None:
            raise ProtocolError(f"cannot play: {self.engine_error}")

    def _cmd_restart(self, arg: str, t_read: float) -> list[str]:
        self._no_args("RESTART", arg)
        self._need_game("RESTART")
        self._new_game()
        return ["OK"]

    def _cmd_begin(self, arg: str, t_read: float) -> list[str]:
        self._no_args("BEGIN", arg)
        self._need_game("BEGIN")
        if self.order:
            raise ProtocolError(f"BEGIN on a board with {len(self.order)} stones; "
                                "BEGIN starts a game on the empty board (use BOARD)")
        return self._think(t_read)

    def _cmd_turn(self, arg: str, t_read: float) -> list[str]:
        self._need_game("TURN")
        x, y = _coords(arg, "TURN x,y")
        action = self._point(x, y, "TURN")
        if self.fields[action]:
            owner = "your" if self.fields[action] == 2 else "my"
            raise ProtocolError(f"TURN {x},{y}: the point is occupied by {owner} stone")
        self._check_playable("TURN")
        self.fields[action] = 2
        self.order.append(action)
        try:
            return self._think(t_read)
        except Exception:
            self.fields[action] = 0  # a move that cannot be answered is not kept
            self.order.pop()
            raise

    def _cmd_board(self, arg: str, t_read: float) -> list[str]:
        self._no_args("BOARD", arg)
        self._need_game("BOARD")
        self.board_lines = []
        self.board_problem = None
        return []

    def _board_line(self, line: str, t_read: float) -> list[str]:
        command = line.split(" ", 1)[0].upper()
        if command == "DONE":
            return self._board_done(line, t_read)
        if command == "END":
            self.board_lines = None
            return self._cmd_end("", t_read)
        try:
            x, y, field = _coords(line, "BOARD line x,y,field", 3)
            action = self._point(x, y, "BOARD stone")
            if field not in (1, 2):
                raise ProtocolError(
                    f"BOARD {x},{y},{field}: field must be 1 (own) or 2 (opponent)"
                    + ("; continuous games (field 3) are not supported" if field == 3 else ""))
            if any(a == action for a, _ in self.board_lines):
                raise ProtocolError(f"BOARD {x},{y}: the point is given twice")
        except ProtocolError as e:
            if self.board_problem is None:
                self.board_problem = str(e)
            self.board_lines.append((-1, 0))
            raise
        self.board_lines.append((action, field))
        return []

    def _board_done(self, line: str, t_read: float) -> list[str]:
        stones, problem = self.board_lines, self.board_problem
        self.board_lines = None
        if line.strip().upper() != "DONE":
            raise ProtocolError(f"BOARD rejected: DONE takes no arguments, got {line!r}; "
                                "the position is unchanged")
        if problem is not None:
            raise ProtocolError(f"BOARD rejected ({problem}); the position is unchanged")
        fields = np.zeros_like(self.fields)
        for action, field in stones:
            fields[action] = field
        own, opp = int((fields == 1).sum()), int((fields == 2).sum())
        if own not in (opp, opp - 1):
            raise ProtocolError(
                f"BOARD rejected: {own} own and {opp} opponent stones cannot be a position "
                "where it is my turn (own must equal opponent or opponent - 1)")
        board = self._colour_board(fields)
        wins = self.engine.check_board(self.rules(), board)
        if wins:
            raise ProtocolError(f"BOARD rejected: the game is already over (five at "
                                f"{self._fmt(wins[0])})")
        self.fields = fields
        self.order = [a for a, _ in stones]
        return self._think(t_read)

    def _cmd_done(self, arg: str, t_read: float) -> list[str]:
        raise ProtocolError("DONE without BOARD")

    def _cmd_takeback(self, arg: str, t_read: float) -> list[str]:
        self._need_game("TAKEBACK")
        x, y = _coords(arg, "TAKEBACK x,y")
        action = self._point(x, y, "TAKEBACK")
        if not self.fields[action]:
            raise ProtocolError(f"TAKEBACK {x},{y}: there is no stone there")
        self.fields[action] = 0
        self.order.remove(action)
        return ["OK"]

    def _cmd_info(self, arg: str, t_read: float) -> list[str]:
        key, _, value = arg.partition(" ")
        key, value = key.lower(), value.strip()
        if not key:
            raise ProtocolError("INFO needs a key and a value")
        if key not in INT_INFO:
            return []
        number = _int(value, f"INFO {key}")
        if number < 0:
            raise ProtocolError(f"INFO {key} must be >= 0, got {number}")
        if key == "rule":
            return self._set_rule(number)
        if key in ("timeout_turn", "timeout_match", "time_left"):
            setattr(self, key, number)
        return []

    def _set_rule(self, bits: int) -> list[str]:
        self.rule_bits = bits
        replies = []
        unsupported = [name for bit, name in ((4, "renju"), (8, "caro")) if bits & bit]
        if unsupported:
            replies.append(f"ERROR rule {bits}: {' and '.join(unsupported)} not supported; "
                           f"playing {self.rule()} without {unsupported[0]}'s restrictions")
        trained = self.engine.model.rules.rule if self.engine is not None else self.rule()
        if self.rule() != trained:
            wins = "exactly five" if self.rule() == "standard" else "five or more"
            replies.append(f"MESSAGE rule {bits}: playing {self.rule()} ({wins} wins) with a "
                           f"model trained on {trained}: the search and the tactical guard "
                           "follow the game's rule, the net may misjudge overlines")
        return replies

    def _cmd_about(self, arg: str, t_read: float) -> list[str]:
        return [ABOUT.format(version=self.version)]

    def _cmd_end(self, arg: str, t_read: float) -> list[str]:
        self.finished = True
        return []

    # -- thinking --------------------------------------------------------------------------

    def _colour_board(self, fields: np.ndarray) -> np.ndarray:
        """int8[A] with +1 black, -1 white, from own/opponent fields (my turn)."""
        own, opp = int((fields == 1).sum()), int((fields == 2).sum())
        me = 1 if own == opp else -1  # black moves when the counts are equal
        return np.where(fields == 1, me, np.where(fields == 2, -me, 0)).astype(np.int8)

    def _check_playable(self, command: str):
        board = self._colour_board(self.fields) if self._counts_ok() else None
        if board is not None and self.engine.check_board(self.rules(), board):
            raise ProtocolError(f"{command}: the game is over (there is a five on the board)")

    def _counts_ok(self) -> bool:
        own, opp = int((self.fields == 1).sum()), int((self.fields == 2).sum())
        return own in (opp, opp - 1)

    def _deadline(self, t_read: float) -> float | None:
        """perf_counter() time by which the move must be printed; None = no limit."""
        budgets = []
        if self.timeout_turn is not None:
            budgets.append(self.timeout_turn)
        left = self.time_left
        if left is None and self.timeout_match:
            left = self.timeout_match - self.used_ms
        if left is not None:
            empty = int((self.fields == 0).sum())
            moves_to_go = min(30, max(5, empty // 2))
            budgets.append(max(0.0, left) / moves_to_go)
        if not budgets:
            return None
        budget = min(budgets)
        # Reserve: printing, the manager's own overhead and clock noise.
        reserve = min(budget, max(40.0, 0.08 * budget))
        return t_read + (budget - reserve) / 1000.0

    def _think(self, t_read: float) -> list[str]:
        own, opp = int((self.fields == 1).sum()), int((self.fields == 2).sum())
        if own not in (opp, opp - 1):
            raise ProtocolError(f"cannot move: I have {own} stones and the opponent {opp}, "
                                "so it is not my turn")
        board = self._colour_board(self.fields)
        rules = self.rules()
        if self.engine.check_board(rules, board):
            raise ProtocolError("the game is over: there is a five on the board")
        if not (board == 0).any():
            raise ProtocolError("the board is full: no move left")
        from agz_jax.engine import make_state

        last = next((a for a in reversed(self.order) if self.fields[a] == 2), -1)
        state = make_state(rules, board, 0 if own == opp else 1, last)
        replies = []
        try:
            analysis = self.engine.analyse(rules, state, simulations=self.simulations,
                                           deadline=self._deadline(t_read))
            action = int(analysis.action)
            if self.debug:
                replies.append(f"DEBUG {analysis.reason}: {analysis.simulations} simulations "
                               f"in {analysis.elapsed * 1000:.0f} ms, value "
                               f"{analysis.value:+.3f}")
        except Exception as e:
            # A move is still better than no move: the empty point nearest the centre.
            action = self._fallback()
            replies.append(f"DEBUG search failed ({type(e).__name__}: {_one_line(str(e))}); "
                           "playing the empty point nearest the centre")
        if self.fields[action]:  # the engine checks this too; never print an illegal move
            action = self._fallback()
        self.fields[action] = 1
        self.order.append(action)
        self.used_ms += (time.perf_counter() - t_read) * 1000.0
        replies.append(self._fmt(action))
        return replies

    def _fallback(self) -> int:
        rows, cols = np.divmod(np.arange(self.size * self.size), self.size)
        centre = (self.size - 1) / 2
        distance = np.abs(rows - centre) + np.abs(cols - centre)
        return int(np.argmin(np.where(self.fields == 0, distance, np.inf)))


def _show(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]


def serve(brain: Brain, stdin, stdout) -> int:
    """Read commands from the binary ``stdin`` until END or end of input."""
    while not brain.finished:
        raw = stdin.readline()
        t_read = time.perf_counter()
        if not raw:
            break
        if len(raw) > MAX_LINE:
            replies = [f"ERROR line too long ({len(raw)} bytes; at most {MAX_LINE})"]
        else:
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if "\x00" in text:
                replies = ["ERROR line contains a NUL byte"]
            else:
                replies = brain.handle(text, t_read)
        for reply in replies:
            stdout.write(reply + "\n")
        stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pbrain-agz", description="agz_jax as a Gomocup/Piskvork brain (stdin/stdout).")
    parser.add_argument("--model", default="default",
                        help="model name (models/<name>), model directory or run directory")
    parser.add_argument("--sims", type=int, default=1600,
                        help="simulations per move at most (the tree's size; time limits may "
                             "stop the search earlier)")
    parser.add_argument("--chunk", type=int, default=16,
                        help="simulations per jitted step between clock checks")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--debug", action="store_true", help="a DEBUG line before each move")
    args = parser.parse_args(argv)
    if args.sims < 1 or args.chunk < 1:
        parser.error("--sims and --chunk must be positive")

    # The protocol owns the real stdout; anything else printed (by us or a
    # library) goes to stderr so that it cannot be taken for a reply.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", newline="\n")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    from agz_jax import __version__, cache, engine, models

    cache.enable_compilation_cache()

    def factory():
        try:
            model = models.load(args.model)
        except models.ModelError as e:
            print(f"pbrain-agz: {e}", file=sys.stderr)
            raise
        return engine.Engine(model, max_simulations=args.sims, chunk=args.chunk, seed=args.seed)

    brain = Brain(factory, simulations=args.sims, debug=args.debug, version=__version__)
    try:
        brain._ensure_engine()
    except ProtocolError:
        pass  # reported on stderr now and on every START
    return serve(brain, sys.stdin.buffer, protocol_out)


if __name__ == "__main__":
    sys.exit(main())
