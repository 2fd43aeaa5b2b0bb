"""pbrain-agz driven as a real subprocess through stdin/stdout (the Piskvork protocol).

One engine process serves most tests (its START compiles; later STARTs reuse
it); the compiled search is kept in a per-session XLA cache so that the other
processes (END, a missing model) start quickly. The model is an untrained
15x15 net: whatever the net thinks, the tactical guard must block a four and
complete a five, and every move must be legal.
"""

import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_models import compile_lock, random_model, xla_cache_dir

from agz_jax.play.piskvork_games import searched

SIZE = 15
CAPACITY = 4096  # the tree; time limits stop the search well before
MOVE = re.compile(r"^(\d+),(\d+)$")
KNOWN = {"START", "RECTSTART", "RESTART", "BEGIN", "TURN", "BOARD", "DONE", "TAKEBACK", "INFO",
         "ABOUT", "END"}


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return random_model(tmp_path_factory.mktemp("brain_model") / "m", SIZE)


@pytest.fixture(scope="session")
def xla_cache(tmp_path_factory):
    return xla_cache_dir(tmp_path_factory)


def pbrain() -> list[str]:
    script = Path(sys.executable).with_name("pbrain-agz")
    assert script.exists(), f"{script} missing: run `make install` (pyproject's [project.scripts])"
    return [str(script)]


class Brain:
    """A pbrain-agz process; replies are read by a thread into a queue."""

    def __init__(self, model, cache, *extra, sims=CAPACITY, stderr_path=None):
        env = {**os.environ, "AGZ_JAX_CACHE_DIR": str(cache), "JAX_PLATFORMS": "cpu"}
        env.pop("AGZ_JAX_NO_CACHE", None)
        self.stderr_path = stderr_path
        self.proc = subprocess.Popen(
            [*pbrain(), "--model", str(model), "--sims", str(sims), *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL, env=env)
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            self.replies.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
        self.replies.put(None)

    def send(self, *lines: str | bytes, end: bytes = b"\r\n"):
        data = b"".join((x if isinstance(x, bytes) else x.encode()) + end for x in lines)
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def reply(self, timeout: float = 120.0, skip_info: bool = True) -> str:
        """The next reply (MESSAGE and DEBUG lines skipped unless asked)."""
        while True:
            try:
                line = self.replies.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no reply within {timeout} s") from None
            assert line is not None, f"pbrain-agz exited (code {self.proc.poll()})"
            if not (skip_info and line.split(" ")[0] in ("MESSAGE", "DEBUG")):
                return line

    def ask(self, line: str, **kw) -> str:
        self.send(line)
        return self.reply(**kw)

    def no_reply_pending(self):
        self.send("ABOUT")
        assert self.reply().startswith('name="agz_jax"')

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="session")
def brain(model_dir, xla_cache):
    with compile_lock(xla_cache):
        b = Brain(model_dir, xla_cache, "--debug")
        t0 = time.perf_counter()
        assert b.ask("START 15", timeout=600) == "OK"
    print(f"START (load + compile): {time.perf_counter() - t0:.1f} s")
    yield b
    b.close()


def new_game(b: Brain, timeout_turn: int = 150):
    assert b.ask("RESTART") == "OK"
    b.send(f"INFO timeout_turn {timeout_turn}", "INFO time_left 1000000", "INFO rule 0")
    b.no_reply_pending()  # INFO has no reply


def parse_move(reply: str) -> int:
    m = MOVE.match(reply)
    assert m, f"expected a move 'x,y', got {reply!r}"
    x, y = int(m.group(1)), int(m.group(2))
    assert 0 <= x < SIZE and 0 <= y < SIZE, reply
    return y * SIZE + x


def test_full_game_via_begin_and_turn(brain):
    """BEGIN then TURN until someone has five (or 30 plies): every move legal."""
    new_game(brain)
    rng = np.random.default_rng(0)
    board = np.zeros(SIZE * SIZE, np.int8)
    reply = brain.ask("BEGIN")
    plies = 0
    while True:
        a = parse_move(reply)
        assert board[a] == 0, f"the engine played the occupied {reply}"
        board[a] = 1
        plies += 1
        if plies >= 30:
            break
        empty = np.flatnonzero(board == 0)
        a = int(rng.choice(empty))
        board[a] = 2
        plies += 1
        reply = brain.ask(f"TURN {a % SIZE},{a // SIZE}")
        if reply.startswith("ERROR") and "game is over" in reply:
            break
    brain.no_reply_pending()


def board_cmd(b: Brain, stones: list[tuple[int, int, int]], end: bytes = b"\r\n") -> str:
    b.send("BOARD", *[f"{x},{y},{f}" for x, y, f in stones], "DONE", end=end)
    return b.reply()


def test_board_must_block_a_four(brain):
    new_game(brain)
    # Opponent (2): a four on row 7, x = 3..6, closed at x = 2 by our stone:
    # 7,7 is the only point that stops five.
    stones = [(3, 7, 2), (2, 7, 1), (4, 7, 2), (10, 10, 1), (5, 7, 2), (11, 3, 1), (6, 7, 2)]
    assert board_cmd(brain, stones, end=b"\n") == "7,7"  # LF line ends too
    # A diagonal four with one open end against the board edge: 4,4 blocks it.
    new_game(brain)
    stones = [(0, 0, 2), (7, 9, 1), (1, 1, 2), (9, 2, 1), (2, 2, 2), (12, 12, 1), (3, 3, 2)]
    assert board_cmd(brain, stones) == "4,4"


def test_board_must_complete_five_rather_than_block(brain):
    new_game(brain)
    # We (1) have four on column 9 (y = 4..7, open at y = 3 and y = 8); the
    # opponent also has four. Winning beats blocking.
    stones = [(9, 4, 1), (1, 1, 2), (9, 5, 1), (1, 2, 2), (9, 6, 1), (1, 3, 2), (9, 7, 1),
              (1, 4, 2), (5, 12, 2)]
    assert board_cmd(brain, stones) in ("9,3", "9,8")
    # Exactly five (rule 1): x x x x _ x would be six there, so the only win is
    # the other end.
    new_game(brain)
    brain.send("INFO rule 1")
    stones = [(2, 0, 1), (3, 0, 1), (4, 0, 1), (5, 0, 1), (7, 0, 1), (14, 14, 2), (13, 14, 2),
              (14, 12, 2), (12, 10, 2), (10, 12, 2)]
    assert board_cmd(brain, stones) == "1,0"


def test_takeback_and_restart(brain):
    new_game(brain)
    a = parse_move(brain.ask("BEGIN"))
    x, y = a % SIZE, a // SIZE
    assert brain.ask(f"TAKEBACK {x},{y}") == "OK"
    # The point is empty again: the opponent may play there, and a stone that
    # is not there cannot be taken back.
    assert brain.ask(f"TAKEBACK {x},{y}").startswith("ERROR")
    b = parse_move(brain.ask(f"TURN {x},{y}"))
    assert b != a
    assert brain.ask(f"TAKEBACK {b % SIZE},{b // SIZE}") == "OK"
    assert brain.ask(f"TAKEBACK {x},{y}") == "OK"
    # BEGIN needs the empty board: true after taking everything back, ...
    parse_move(brain.ask("BEGIN"))
    assert "BEGIN" in brain.ask("BEGIN")  # ... false now ...
    assert brain.ask("RESTART") == "OK"
    parse_move(brain.ask("BEGIN"))  # ... and true again after RESTART.


def test_bad_positions_and_commands_out_of_order(brain, model_dir, xla_cache, tmp_path):
    new_game(brain)
    cases = {
        "START 19": "unsupported size 19",
        "RECTSTART 15,16": "square",
        "TURN 15,0": "off the 15x15 board",
        "TURN 1;2": "comma-separated",
        "DONE": "DONE without BOARD",
        "TAKEBACK 3,3": "no stone",
        "BEGIN now": "no arguments",
    }
    for line, reason in cases.items():
        reply = brain.ask(line)
        assert reply.startswith("ERROR") and reason in reply, (line, reply)
    assert brain.ask("FROBNICATE 1").startswith("UNKNOWN")
    # INFO never gets a reply (the protocol): its problems come as MESSAGE lines
    # before the next reply.
    brain.send("INFO timeout_turn -5", "INFO rule 4", "TAKEBACK 3,3")
    lines = [brain.reply(skip_info=False) for _ in range(3)]
    assert lines[0].startswith("MESSAGE") and ">= 0" in lines[0], lines
    assert lines[1].startswith("MESSAGE") and "renju" in lines[1], lines
    assert lines[2].startswith("ERROR") and "no stone" in lines[2], lines
    new_game(brain)
    for stones, reason in [
        ([(1, 1, 1), (2, 2, 1)], "cannot be a position"),  # two own, no opponent
        ([(1, 1, 2), (2, 2, 2), (3, 3, 1), (1, 1, 1)], "given twice"),
        ([(1, 1, 3)], "field 3"),
        ([(0, 5, 2), (1, 5, 2), (2, 5, 2), (3, 5, 2), (4, 5, 2), (9, 9, 1), (9, 10, 1),
          (9, 11, 1), (9, 12, 1)], "already over"),
        ([(20, 1, 2)], "off the 15x15 board"),
    ]:
        # One reply for the block, after DONE.
        reply = board_cmd(brain, stones)
        assert reply.startswith("ERROR BOARD rejected") and reason in reply, (stones, reply)
        brain.no_reply_pending()
    # A rejected BOARD leaves the position as it was (empty): BEGIN works.
    first = parse_move(brain.ask("BEGIN"))
    # The opponent's occupied point and our own (the searches run on the clock, so
    # their moves vary: the opponent plays a corner that BEGIN did not take).
    corner = "0,0" if first != 0 else f"{SIZE - 1},{SIZE - 1}"
    a = parse_move(brain.ask(f"TURN {corner}"))
    assert "occupied" in brain.ask(f"TURN {corner}")
    assert "occupied" in brain.ask(f"TURN {a % SIZE},{a // SIZE}")

    # Before START there is no game; a missing model is reported, not fatal.
    other = Brain(tmp_path / "no_such_model", xla_cache, stderr_path=tmp_path / "err")
    try:
        assert other.ask("TURN 1,1", timeout=60).startswith("ERROR")
        reply = other.ask("START 15")
        assert reply.startswith("ERROR") and "no_such_model" in reply, reply
        assert other.ask("ABOUT").startswith('name="agz_jax"')
        other.send("END")
        assert other.proc.wait(timeout=30) == 0
    finally:
        other.close()
    assert "no_such_model" in (tmp_path / "err").read_text()


def test_first_move_is_quick_and_end_exits(model_dir, xla_cache):
    """A fresh process: START compiles (here from the session's XLA cache), so
    the first move keeps to timeout_turn; END then exits with code 0."""
    with compile_lock(xla_cache):
        b = Brain(model_dir, xla_cache)
        started = b.ask("START 15", timeout=600)
    try:
        assert started == "OK"
        b.send("INFO timeout_turn 1000")
        t0 = time.perf_counter()
        parse_move(b.ask("BEGIN"))
        first = time.perf_counter() - t0
        print(f"first move after START: {first * 1000:.0f} ms")
        assert first < 1.25
        b.send("END")
        t0 = time.perf_counter()
        assert b.proc.wait(timeout=30) == 0
        assert time.perf_counter() - t0 < 10
        assert b.replies.get(timeout=5) is None  # nothing after END
    finally:
        b.close()


# -- fuzzing -----------------------------------------------------------------------------

def _first_word(line: str) -> str:
    """The command word as the brain finds it (up to a space, tab, CR or NUL),
    upper-cased (Unicode-wide: a conservative filter)."""
    return re.split(r"[ \t\r\n\x00]", line.strip(" \t"), maxsplit=1)[0].upper()


def _blank(line: str) -> bool:
    return line.strip(" \t") == ""


def _not_integer(s: str) -> bool:
    return re.fullmatch(r"\s*[+-]?[0-9]{1,12}\s*", s) is None


off_board = st.one_of(st.integers(max_value=-1), st.integers(min_value=SIZE, max_value=10**9))
# No commas: a comma inside a "coordinate" could make a valid pair.
junk = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n,"),
               max_size=12)
bad_coord = st.one_of(off_board.map(str), junk.filter(_not_integer))
any_coord = st.one_of(bad_coord, st.integers(0, SIZE - 1).map(str))
# A coordinate pair with at least one bad member, or the wrong number of parts.
bad_pair = st.one_of(
    st.tuples(bad_coord, any_coord).map(",".join),
    st.tuples(any_coord, bad_coord).map(",".join),
    st.lists(any_coord, min_size=0, max_size=4).filter(lambda p: len(p) != 2).map(",".join),
)
hostile = st.one_of(
    st.builds("TURN {}".format, bad_pair),
    st.builds("TAKEBACK {}".format, st.one_of(bad_pair, st.tuples(
        st.integers(0, SIZE - 1), st.integers(0, SIZE - 1)).map(lambda p: f"{p[0]},{p[1]}"))),
    st.builds("START {}".format, st.one_of(junk.filter(_not_integer),
                                           st.integers().filter(lambda n: n != SIZE).map(str))),
    st.builds("RECTSTART {},{}".format, st.integers(1, 40), st.integers(1, 40)).filter(
        lambda s: s != f"RECTSTART {SIZE},{SIZE}"),
    st.builds("RECTSTART {}".format, junk.filter(lambda s: "," not in s)),
    st.builds("{} {}".format, st.sampled_from(["BEGIN", "RESTART", "DONE", "ABOUT"]),
              junk).filter(lambda s: not _blank(s.partition(" ")[2])),
    st.builds("DONE{}".format, junk),
    # Anything whose first word is not a command.
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
            min_size=1, max_size=80).filter(
        lambda s: not _blank(s) and _first_word(s) not in KNOWN),
    st.binary(min_size=1, max_size=60).filter(
        lambda b: b"\n" not in b and b"\r" not in b
        and not _blank(b.decode("utf-8", "replace"))  # only spaces and tabs: no reply
        and _first_word(b.decode("utf-8", "replace")) not in KNOWN),
    st.integers(4097, 20000).map(lambda n: b"TURN " + b"7" * n),  # far too long
    st.builds(lambda a, b: a + b"\x00" + b, st.sampled_from([b"TURN 1,1", b"ABOUT", b""]),
              st.binary(max_size=5).filter(lambda b: b"\n" not in b and b"\r" not in b)),
).map(lambda line: (line, 1))
# INFO gets no reply, even with a bad value (a MESSAGE comes before the next reply).
hostile_info = st.builds(
    "INFO {} {}".format,
    st.sampled_from(["timeout_turn", "timeout_match", "time_left", "max_memory", "rule"]),
    st.one_of(st.integers(max_value=-1).map(str), junk.filter(_not_integer))).map(
    lambda line: (line, 0))


def test_fuzzed_hostile_lines_get_error_or_unknown(brain):
    """A few hundred malformed lines through the real stdin, each followed by
    ABOUT: every one gets exactly one ERROR/UNKNOWN (INFO none) and the engine
    keeps answering. (tests/test_brain_fuzz.py checks thousands in-process.)"""
    new_game(brain)
    sent = []

    @settings(max_examples=6, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(st.lists(st.one_of(hostile, hostile_info), min_size=40, max_size=60))
    def check(lines):
        probe = b"ABOUT"
        brain.send(*[x for line, _ in lines for x in (line, probe)])
        for line, count in lines:
            answers = []
            while True:
                reply = brain.reply(timeout=60)  # MESSAGE and DEBUG are not replies
                if reply.startswith('name="agz_jax"'):
                    break
                answers.append(reply)
            assert len(answers) == count, (line, answers)
            assert all(a.split(" ")[0] in ("ERROR", "UNKNOWN") for a in answers), (line, answers)
            sent.append(line)

    check()
    assert len(sent) >= 240
    # Still a working engine: a real move after all that.
    new_game(brain)
    parse_move(brain.ask("BEGIN"))


# -- time --------------------------------------------------------------------------------

def test_moves_stay_within_timeout_turn(brain):
    """INFO timeout_turn 1000: each move is measured from sending the command
    to reading the reply; then time_left squeezes the budget."""
    new_game(brain, timeout_turn=1000)
    latencies, sims = [], []
    rng = np.random.default_rng(1)
    board = np.zeros(SIZE * SIZE, np.int8)
    line = "BEGIN"
    for _ in range(5):
        t0 = time.perf_counter()
        brain.send(line)
        debug = brain.reply(skip_info=False)
        reply = brain.reply()
        latencies.append(time.perf_counter() - t0)
        assert debug.startswith("DEBUG"), debug
        sims.append(int(re.search(r"(\d+) simulations", debug).group(1)))
        # The outside yardstick's ledger reads the same line (piskvork_games.searched).
        reason, count, _, ms = searched([debug])
        assert count == sims[-1] and reason in ("search", "block", "win", "vcf", "defend")
        assert 0 <= ms <= latencies[-1] * 1000 + 1  # inside the move, as timed here
        board[parse_move(reply)] = 1
        a = int(rng.choice(np.flatnonzero(board == 0)))
        board[a] = 2
        line = f"TURN {a % SIZE},{a // SIZE}"
    print(f"timeout_turn 1000: latencies (ms) {[round(t * 1000) for t in latencies]}, "
          f"simulations {sims}")
    # Within the budget with a margin for CI noise; and the budget is used:
    # the search stops on time, not after a fixed count, unless it filled the tree.
    assert max(latencies) < 1.25, latencies
    assert all(t > 0.4 or s >= CAPACITY for t, s in zip(latencies, sims, strict=True))
    # time_left 2000 ms over ~30 moves to go: about 67 ms a move.
    brain.send("INFO time_left 2000")
    t0 = time.perf_counter()
    brain.send(line)
    brain.reply()
    squeezed = time.perf_counter() - t0
    print(f"time_left 2000: latency {squeezed * 1000:.0f} ms")
    assert squeezed < 0.35
