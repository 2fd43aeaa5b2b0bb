"""The commands of ``pbrain-agz`` (``agz_jax.play.brain``): ``Brain`` answers each
line of the Piskvork protocol (``START``, ``BOARD`` ... ``DONE``, ``TURN``,
``INFO``, ...) with exactly one reply, or none where the protocol says so; a
move's thinking time is ``agz_jax.play.move_time``'s.
The protocol as ``pbrain-agz`` speaks it is described in ``agz_jax.play.brain``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from agz_jax.play.brain_text import (
    SPACE,
    ProtocolError,
    command_word,
    damage,
    one_line,
    parse_coords,
    parse_int,
    show,
    split_command,
)
from agz_jax.play.move_time import UNLIMITED_MS, move_budget_ms

ABOUT = 'name="agz_jax", version="{version}", author="agz_jax authors", country="-"'


# INFO values that are integers (milliseconds, bytes, flags).
# Other keys (folder, evaluate, ...) are ignored, as the protocol asks.
INT_INFO = ("timeout_turn", "timeout_match", "time_left", "max_memory", "game_type", "rule")


BLOCKS = ("BOARD", "SWAP2BOARD")  # commands whose lines run up to DONE


@dataclasses.dataclass
class _Block:
    """A ``BOARD`` (or ``SWAP2BOARD``) block being read, up to ``DONE``."""

    command: str
    t_read: float  # when its first line was read: the move's clock starts there
    problem: str | None = None  # the first reason to reject the block
    lines: int = 0  # non-empty lines read after the command
    stones: dict[int, int] = dataclasses.field(default_factory=dict)  # action -> field

    def reject(self, problem: str):
        if self.problem is None:
            self.problem = problem


class Brain:
    """The protocol state machine. ``handle(line)`` returns the output lines for
    one input line: at most one reply, after any ``MESSAGE``/``DEBUG`` lines.

    ``engine_factory`` builds the analysis engine (or raises with a reason that
    every ``START`` then reports); ``untimed_factory``, if given, builds a
    second one for the moves without a time limit (``pbrain-agz``: the model's
    own search). Under a time limit a move searches until its budget is spent
    or the engine's tree is full; without one it runs ``simulations`` (None:
    the engine's capacity). The position is kept as a board of fields (0
    empty, 1 own, 2 opponent) and the order the stones arrived in (for the
    net's last-move plane and for ``TAKEBACK``). ``clock`` (seconds) times the
    moves; the engine's deadlines are on that clock (a test may pass a fake
    clock, with a fake engine or an ``Engine`` built on the same clock).
    """

    def __init__(self, engine_factory: Callable[[], object], *, simulations: int | None = None,
                 untimed_factory: Callable[[], object] | None = None,
                 debug: bool = False, version: str = "0",
                 clock: Callable[[], float] = time.perf_counter):
        self._engine_factory = engine_factory
        self._untimed_factory = untimed_factory
        self.engine = None
        self.untimed_engine = None  # None: ``engine`` plays the untimed moves too
        self.engine_error: str | None = None
        self.simulations = simulations
        self.debug = debug
        self.version = version
        self.clock = clock
        self.size: int | None = None
        self.fields: np.ndarray | None = None  # int8[A]: 0 empty, 1 own, 2 opponent
        self.order: list[int] = []  # actions in the order they were placed
        self.rule_bits = 0
        self.refused: str | None = None  # why the game's rule cannot be played
        self.timeout_turn: int | None = None  # ms
        self.timeout_match: int | None = None
        self.time_left: float | None = None  # counted down by our thinking time
        self.used_ms = 0.0  # our thinking time this game (for timeout_match alone)
        self.block: _Block | None = None  # inside BOARD ... DONE
        self.notes: list[str] = []  # MESSAGE lines waiting for the next reply
        self.finished = False
        self._warm: set[str] = set()  # the rules the engine has compiled (warmup) for

    # -- helpers ---------------------------------------------------------------------------

    def rule(self) -> str:
        if self.rule_bits & 4:
            return "renju"
        return "standard" if self.rule_bits & 1 else "freestyle"

    def _forbidden_check(self, fields: np.ndarray, order: list[int], what: str):
        """Under renju, refuse a black stone of ``order`` (move order) that was on
        a forbidden point when it was placed (``fields``: 1 own, 2 opponent)."""
        if self.rule() != "renju":
            return
        from agz_jax.game import renju

        own, opp = int((fields == 1).sum()), int((fields == 2).sum())
        black = 1 if own == opp else 2  # black has moved as often as white, or once more
        board = np.zeros(fields.size, np.int8)
        for action in order:
            if fields[action] == black:
                code = renju.foul_code(board, action)
                if code:
                    raise ProtocolError(
                        f"{what}: black's stone at {self._fmt(action)} is on a forbidden "
                        f"point ({renju.FOULS[code]}, renju); the position is unchanged")
            board[action] = 1 if fields[action] == black else -1

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

    # -- lines -----------------------------------------------------------------------------

    def handle(self, line: str, t_read: float | None = None, *,
               problem: str | None = None) -> list[str]:
        """The output for one input line (without its line ending); ``problem``:
        why the line could not be read whole (``serve``: too long)."""
        t_read = self.clock() if t_read is None else t_read
        problem = problem or damage(line)
        try:
            if self.block is not None:
                replies = self._block_line(line, problem)
            else:
                replies = self._command_line(line, t_read, problem)
        except ProtocolError as e:
            replies = [f"ERROR {one_line(str(e))}"]
        except Exception as e:  # never die on a line: say what broke and go on
            replies = [f"ERROR internal error: {type(e).__name__}: {one_line(str(e))}"]
        if replies and self.notes:
            replies = [f"MESSAGE {one_line(n)}" for n in self.notes] + replies
            self.notes = []
        return replies

    def _command_line(self, line: str, t_read: float, problem: str | None) -> list[str]:
        text = line.strip(SPACE)
        if not text and problem is None:
            return []  # empty lines are ignored (the protocol's managers do too)
        word, arg = split_command(text)
        command = command_word(word)
        if command == "INFO":  # never a reply: problems wait for the next one
            if problem is not None:
                self.notes.append(f"INFO ignored: {problem}")
            else:
                self._info(arg)
            return []
        if command == "END":
            self.finished = True
            return []
        if command in BLOCKS:
            self.block = block = _Block(command, t_read)
            if problem is not None:
                block.reject(f"the {command} line: {problem}")
            elif arg:
                block.reject(f"{command} takes no arguments, got {show(arg)}")
            elif command == "BOARD" and self.fields is None:
                block.reject("BOARD before START: no game")
            return []
        if problem is not None:
            raise ProtocolError(problem)
        handler = getattr(self, f"_cmd_{command.lower()}", None) if command else None
        if handler is None:
            return [f"UNKNOWN command {show(word)} is not supported"]
        return handler(arg, t_read)

    def _no_args(self, command: str, arg: str):
        if arg:
            raise ProtocolError(f"{command} takes no arguments, got {show(arg)}")

    # -- the commands ----------------------------------------------------------------------

    def _cmd_start(self, arg: str, t_read: float) -> list[str]:
        return self._start(parse_int(arg, "START size"), "START")

    def _cmd_rectstart(self, arg: str, t_read: float) -> list[str]:
        width, height = parse_coords(arg, "RECTSTART width,height")
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
        self._warm_up()
        return ["OK"]

    def _warm_up(self):
        """Compile the engine for the game's rule, once per rule (each rule has
        its own programs); a refused rule is not compiled. START compiles the
        rules the model plays instead: freestyle and standard for a model of
        either, renju for a renju model (whose games a manager announces with
        ``INFO rule 4`` after START), so that an ``INFO rule`` between START
        and the first move, whose time the manager counts, compiles nothing."""
        if self.engine is None or self.refused is not None:
            return
        rules = [self.rule()]
        if not self._warm:
            rules = (["renju"] if self.engine.model.rules.rule == "renju"
                     else ["freestyle", "standard"])
        for rule in rules:
            if rule not in self._warm:
                self.engine.warmup(self.engine.rules(rule))
                self._warm.add(rule)

    def _ensure_engine(self):
        if self.engine is None and self.engine_error is None:
            try:
                self.engine = self._engine_factory()
                if self._untimed_factory is not None:
                    self.untimed_engine = self._untimed_factory()
            except Exception as e:
                self.engine = None
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
        x, y = parse_coords(arg, "TURN x,y")
        action = self._point(x, y, "TURN")
        if self.fields[action]:
            owner = "your" if self.fields[action] == 2 else "my"
            raise ProtocolError(f"TURN {x},{y}: the point is occupied by {owner} stone")
        self._check_playable("TURN")
        self._check_turn_forbidden(action, x, y)
        self.fields[action] = 2
        self.order.append(action)
        try:
            return self._think(t_read)
        except Exception:
            self.fields[action] = 0  # a move that cannot be answered is not kept
            self.order.pop()
            raise

    def _block_line(self, line: str, problem: str | None) -> list[str]:
        """A line inside BOARD ... DONE: nothing until DONE, then one reply."""
        block = self.block
        text = line.strip(SPACE)
        if not text and problem is None:
            return []
        block.lines += 1
        word, arg = split_command(text)
        command = command_word(word)
        if command == "END":
            self.block = None
            self.finished = True
            return []
        if command == "DONE":
            self.block = None
            if problem is not None:
                block.reject(f"the DONE line: {problem}")
            elif arg:
                block.reject(f"DONE takes no arguments, got {show(arg)}")
            return self._block_done(block)
        if block.problem is None and block.command == "BOARD":
            try:
                if problem is not None:
                    raise ProtocolError(problem)
                self._stone(text, block)
            except Exception as e:  # the block is rejected at DONE, naming this line
                reason = str(e) if isinstance(e, ProtocolError) else f"{type(e).__name__}: {e}"
                block.reject(f"stone line {block.lines} {show(text)}: {reason}")
        return []

    def _stone(self, text: str, block: _Block):
        x, y, field = parse_coords(text, "x,y,field", 3)
        action = self._point(x, y, "the point")
        if field not in (1, 2):
            raise ProtocolError(
                f"field must be 1 (own) or 2 (opponent), got {field}"
                + ("; continuous games (field 3) are not supported" if field == 3 else ""))
        if action in block.stones:
            raise ProtocolError(f"the point {x},{y} is given twice")
        block.stones[action] = field

    def _block_done(self, block: _Block) -> list[str]:
        if block.command == "SWAP2BOARD":
            return ["UNKNOWN command 'SWAP2BOARD' is not supported (no swap2 openings)"]
        if block.problem is not None:
            raise ProtocolError(f"BOARD rejected ({block.problem}); the position is unchanged")
        fields = np.zeros_like(self.fields)
        for action, field in block.stones.items():
            fields[action] = field
        own, opp = int((fields == 1).sum()), int((fields == 2).sum())
        if own not in (opp, opp - 1):
            raise ProtocolError(
                f"BOARD rejected: {own} own and {opp} opponent stones cannot be a position "
                "where it is my turn (own must equal opponent or opponent - 1); the position "
                "is unchanged")
        wins = self.engine.check_board(self.rules(), self._colour_board(fields))
        if wins:
            raise ProtocolError(f"BOARD rejected: the game is already over (five at "
                                f"{self._fmt(wins[0])}); the position is unchanged")
        self._forbidden_check(fields, list(block.stones), "BOARD rejected")
        before = self.fields, self.order
        self.fields, self.order = fields, list(block.stones)
        try:
            return self._think(block.t_read)
        except Exception:
            self.fields, self.order = before  # e.g. a full board: nothing was played
            raise

    def _cmd_done(self, arg: str, t_read: float) -> list[str]:
        raise ProtocolError("DONE without BOARD")

    def _cmd_takeback(self, arg: str, t_read: float) -> list[str]:
        self._need_game("TAKEBACK")
        x, y = parse_coords(arg, "TAKEBACK x,y")
        action = self._point(x, y, "TAKEBACK")
        if not self.fields[action]:
            raise ProtocolError(f"TAKEBACK {x},{y}: there is no stone there")
        self.fields[action] = 0
        self.order.remove(action)
        return ["OK"]

    def _info(self, arg: str):
        """``INFO key value``: no reply; a problem becomes a note for the next one."""
        key, value = split_command(arg)
        if not key:
            self.notes.append("INFO ignored: it needs a key and a value")
            return
        key = key.lower() if key.isascii() else key
        if key not in INT_INFO:
            return  # folder, evaluate, ...: not needed
        try:
            number = parse_int(value, f"INFO {key}")
        except ProtocolError as e:
            self.notes.append(f"{e}; ignored")
            return
        if number < 0 and key != "time_left":  # time_left < 0: out of time
            self.notes.append(f"INFO {key} must be >= 0, got {number}; ignored")
            return
        if key == "rule":
            self._set_rule(number)
        elif key in ("timeout_turn", "timeout_match", "time_left"):
            setattr(self, key, number)

    def _set_rule(self, bits: int):
        self.rule_bits = bits
        unsupported = [name for bit, name in ((2, "continuous games"), (8, "caro"))
                       if bits & bit]
        if unsupported:
            self.notes.append(f"rule {bits}: {' and '.join(unsupported)} not supported; "
                              f"playing {self.rule()} without them")
        trained = self.engine.model.rules.rule if self.engine is not None else self.rule()
        self.refused = None
        if "renju" in (self.rule(), trained) and self.rule() != trained:
            from agz_jax.nets import models

            self.refused = (f"rule {bits} ({self.rule()}) refused: the model "
                            f"{self.engine.model.name!r} was trained on {trained}; start "
                            "pbrain-agz with a model trained on "
                            f"{self.rule()} (--model models/{models.shipped_for(self.rule())})")
            self.notes.append(self.refused)
        elif self.rule() != trained:
            wins = "exactly five" if self.rule() == "standard" else "five or more"
            self.notes.append(f"rule {bits}: playing {self.rule()} ({wins} wins) with a "
                              f"model trained on {trained}: the search and the tactical guard "
                              "follow the game's rule, the net may misjudge overlines")
        if self._warm:  # after START: a rule not compiled yet now, not at the first move
            self._warm_up()

    def _cmd_about(self, arg: str, t_read: float) -> list[str]:
        self._no_args("ABOUT", arg)
        about = ABOUT.format(version=self.version)
        describe = getattr(self.engine, "describe", None)
        if describe is not None:  # the searches the engines play with
            search = describe()
            if self.untimed_engine is not None:
                search = (f"{search} under a time limit; without one, "
                          f"{self.untimed_engine.describe()}")
            about += f', search="{one_line(search)}"'
        return [about]

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

    def budget_ms(self) -> float | None:
        """The next move's thinking time in ms (``move_budget_ms``); None: no limit."""
        return move_budget_ms(timeout_turn=self.timeout_turn, timeout_match=self.timeout_match,
                              time_left=self.time_left, used_ms=self.used_ms,
                              empty=int((self.fields == 0).sum()))

    def _check_turn_forbidden(self, action: int, x: int, y: int):
        """Under renju, refuse the opponent's move onto black's forbidden point."""
        own, opp = int((self.fields == 1).sum()), int((self.fields == 2).sum())
        if self.rule() != "renju" or opp != own:  # the opponent is black when counts are equal
            return
        from agz_jax.game import renju

        board = np.where(self.fields == 2, 1, np.where(self.fields == 1, -1, 0)).astype(np.int8)
        code = renju.foul_code(board, action)
        if code:
            raise ProtocolError(f"TURN {x},{y}: black may not play there under renju "
                                f"({renju.FOULS[code]}); the position is unchanged")

    def _think(self, t_read: float) -> list[str]:
        if self.refused:
            raise ProtocolError(self.refused)
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
        budget = self.budget_ms()
        deadline = None if budget is None else t_read + budget / 1000.0
        # Under a time limit the clock ends the search (or the full tree);
        # without one, the untimed engine runs its simulation count.
        engine = self.engine if budget is not None or self.untimed_engine is None \
            else self.untimed_engine
        replies = []
        try:
            from agz_jax.play.engine import make_state

            last = next((a for a in reversed(self.order) if self.fields[a] == 2), -1)
            state = make_state(rules, board, 0 if own == opp else 1, last)
            analysis = engine.analyse(rules, state,
                                      simulations=None if budget is not None else self.simulations,
                                      deadline=deadline)
            action = int(analysis.action)
            if self.debug:
                replies.append(self._debug_line(engine, analysis, budget))
        except Exception as e:
            # A move is still better than no move: the empty point nearest the centre.
            action = self._fallback()
            replies.append(f"DEBUG search failed ({type(e).__name__}: {one_line(str(e))}); "
                           "playing the empty point nearest the centre")
        if not (0 <= action < self.fields.size) or self.fields[action]:
            action = self._fallback()  # the engine checks this too; never an illegal move
        self.fields[action] = 1
        self.order.append(action)
        used = (self.clock() - t_read) * 1000.0
        self.used_ms += used
        if self.time_left is not None and self.time_left < UNLIMITED_MS:
            self.time_left -= used  # until the manager's next INFO time_left
        replies.append(self._fmt(action))
        return replies

    def _debug_line(self, engine, analysis, budget: float | None) -> str:
        """What a move's search did: simulations run (and carried over), time
        against the budget, value, and the search that ran."""
        carried = int(getattr(analysis, "carried", 0) or 0)
        limit = "no time limit" if budget is None else f"budget {budget:.0f} ms"
        describe = getattr(engine, "describe", None)
        return (f"DEBUG {analysis.reason}: {analysis.simulations} simulations"
                f"{f' (+{carried} carried)' if carried else ''} in "
                f"{analysis.elapsed * 1000:.0f} ms ({limit}), value {analysis.value:+.3f}"
                f"{f'; {one_line(describe())}' if describe is not None else ''}")

    def _fallback(self) -> int:
        rows, cols = np.divmod(np.arange(self.size * self.size), self.size)
        centre = (self.size - 1) / 2
        distance = np.abs(rows - centre) + np.abs(cols - centre)
        return int(np.argmin(np.where(self.fields == 0, distance, np.inf)))
