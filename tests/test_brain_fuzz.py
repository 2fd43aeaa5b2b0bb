"""pbrain-agz's protocol in-process: ``serve`` reads bytes and writes replies for
a ``Brain`` whose engine is a fake (no net, no compilation), so thousands of
lines take a second or two.

- The issue-23 cases: a bad line in a BOARD block, NUL and 5,000-byte stone
  lines, Unicode case folding of command words, a CR inside a field.
- A seeded fuzz of >= 1,000 hostile lines mixed with valid commands, checked
  against an independent model of the protocol: exactly one reply per command
  (BOARD ... DONE is one command; INFO and END get none), hostile lines change
  neither the position nor the settings, and every move is legal, although the
  fake engine often proposes occupied or off-board points, or fails.
- Time management: the deadline the brain gives the engine, on a fake clock,
  for each of timeout_turn, timeout_match and time_left.
"""

import io
import re
from types import SimpleNamespace

import numpy as np
import pytest

from agz_jax.game.gomoku import Rules
from agz_jax.play import brain_commands
from agz_jax.play.brain import serve
from agz_jax.play.brain_commands import Brain
from agz_jax.play.brain_text import MAX_LINE, read_line
from agz_jax.play.move_time import move_budget_ms

SIZE = 15
A = SIZE * SIZE
NOT_REPLIES = ("MESSAGE ", "DEBUG ")


def fives(board: np.ndarray, exact: bool) -> list[int]:
    """The stones of ``board`` (any two non-zero values) on a winning line: a run
    of five or more (exactly five if ``exact``). Independent of the rules module."""
    grid = np.asarray(board).reshape(SIZE, SIZE)
    found = set()
    for r in range(SIZE):
        for c in range(SIZE):
            v = grid[r, c]
            if not v:
                continue
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                pr, pc = r - dr, c - dc
                if 0 <= pr < SIZE and 0 <= pc < SIZE and grid[pr, pc] == v:
                    continue  # not the start of the run
                run = []
                rr, cc = r, c
                while 0 <= rr < SIZE and 0 <= cc < SIZE and grid[rr, cc] == v:
                    run.append(rr * SIZE + cc)
                    rr, cc = rr + dr, cc + dc
                if len(run) == 5 or (len(run) > 5 and not exact):
                    found.update(run)
    return sorted(found)


class Clock:
    """A fake clock (seconds) that only the fake engine moves."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeEngine:
    """``Engine``'s interface without a net: ``analyse`` records its deadline,
    spends ``think_s`` on the clock and proposes a move that is, by chance, an
    empty point, an occupied one, an off-board number, or an exception."""

    def __init__(self, clock: Clock, seed: int = 0, think_s: float = 0.0, hostile: bool = True):
        self.size = SIZE
        self.model = SimpleNamespace(name="fake", rules=Rules(SIZE, "freestyle"))
        self.clock, self.think_s, self.hostile = clock, think_s, hostile
        self.rng = np.random.default_rng(seed)
        self.calls = []  # (time of the call, deadline)
        self.warmed = []  # the rule of each warmup

    def warmup(self, rules=None):
        self.warmed.append((rules or self.rules()).rule)
        return 0.0

    def rules(self, rule=None):
        return Rules(self.size, rule or self.model.rules.rule)

    def check_board(self, rules, board):
        return fives(board, rules.rule == "standard")

    def analyse(self, rules, state, *, simulations=None, deadline=None):
        self.calls.append((self.clock(), deadline))
        self.clock.now += self.think_s
        board = np.asarray(state.board)
        r = self.rng.random() if self.hostile else 1.0
        if r < 0.05:
            raise RuntimeError("the fake engine fails")
        if r < 0.15:
            action = int(self.rng.choice(np.flatnonzero(board != 0))) if board.any() else -1
        elif r < 0.25:
            action = int(self.rng.choice([-7, -1, A, A + 3, 10**6]))
        else:
            action = int(self.rng.choice(np.flatnonzero(board == 0)))
        return SimpleNamespace(action=action, reason="search", simulations=1, elapsed=0.0,
                               value=0.0)


def pick(rng, items):
    """``rng.choice`` for strings and bytes (NumPy would strip a trailing NUL)."""
    return items[int(rng.integers(len(items)))]


def make_brain(seed=0, think_s=0.0, hostile=True, debug=False):
    clock = Clock()
    engine = FakeEngine(clock, seed, think_s, hostile)
    return Brain(lambda: engine, debug=debug, clock=clock), engine, clock


def run(b: Brain, data: bytes) -> list[str]:
    """Feed ``data`` through ``serve``; the lines it wrote."""
    out = io.StringIO()
    serve(b, io.BytesIO(data), out)
    text = out.getvalue()
    assert text == "" or text.endswith("\n")
    lines = text.splitlines()
    for line in lines:  # one line each, printable ASCII
        assert line.isascii() and line.isprintable() and line, repr(line)
    return lines


def replies(lines: list[str]) -> list[str]:
    return [x for x in lines if not x.startswith(NOT_REPLIES)]


def one(b: Brain, data: bytes) -> str:
    got = replies(run(b, data))
    assert len(got) == 1, (data[:80], got)
    return got[0]


def move(reply: str) -> int:
    x, y = (int(v) for v in reply.split(","))
    assert 0 <= x < SIZE and 0 <= y < SIZE, reply
    return y * SIZE + x


# -- the issue's cases -------------------------------------------------------------------

def test_issue_23_cases():
    b, _, _ = make_brain(hostile=False)
    assert one(b, b"START 15\r\n") == "OK"
    first = move(one(b, b"BEGIN\r\n"))
    position = b.fields.copy()

    # A bad line in a BOARD block: nothing at the bad line, one ERROR at DONE
    # naming it, and the position as before the block.
    for bad, why in [(b"3,3,7", "field must be 1"), (b"3,3,\x002", "NUL"),
                     (b"3,3," + b"2" * 5000, "too long (5004 bytes"),
                     (b"3,3\r,2", "CR"), (b"3,\xd9\xa3,2", "integer"), (b"TURN 1,1", "integer"),
                     (b"1,1,2,", "expected 3")]:
        for end in (b"\r\n", b"\n"):
            lines = [b"BOARD", b"5,5,1", b"", b"6,6,2", bad, b"7,7,2", b"DONE"]
            per_line = [run(b, line + end) for line in lines]
            assert per_line[:-1] == [[]] * 6, (bad, per_line)
            (reply,) = per_line[-1]
            assert reply.startswith("ERROR BOARD rejected (stone line 3 ") and why in reply, (
                bad, reply)
            assert "position is unchanged" in reply
            assert np.array_equal(b.fields, position)
    # A full board without a five (112 own, 113 opponent): no move, nothing kept.
    full = [f"{c},{r},{2 if (c + 2 * r) % 4 < 2 else 1}" for r in range(SIZE) for c in range(SIZE)]
    reply = one(b, ("BOARD\r\n" + "\r\n".join(full) + "\r\nDONE\r\n").encode())
    assert reply.startswith("ERROR") and "full" in reply, reply
    assert np.array_equal(b.fields, position)
    # The same block without the bad line is played.
    a = move(one(b, b"BOARD\r\n5,5,1\r\n6,6,2\r\n7,7,2\r\nDONE\r\n"))
    assert b.fields[a] == 1 and int((b.fields != 0).sum()) == 4
    assert b.fields[first] == 0 or a == first  # BEGIN's stone went with the old position

    # Unicode case folding: U+017F, U+0131 and fullwidth letters are not commands.
    rule = b.rule_bits
    for line in ["ſtart 15", "begın", "ınfo rule 1", "ＢＥＧＩＮ", "ABOUT\u200b", "İnfo rule 1",
                 "\u212aTAKEBACK 1,1"]:
        reply = one(b, line.encode() + b"\r\n")
        assert reply.startswith("UNKNOWN"), (line, reply)
    assert b.rule_bits == rule
    position = b.fields.copy()
    assert position[9 * SIZE + 10] == 0  # TURN 10,9 would be legal
    # Only ASCII digits, only ASCII padding; a CR inside a field is an error.
    for line in [b"TURN 10\r,9", b"TURN 10,9\r", b"TURN 1\xef\xbc\x90,9", b"TURN \xc2\xb2,9",
                 b"TURN\xc2\xa010,9", b"TURN 10,\xe2\x80\x839", b"TURN 10,9\x00"]:
        reply = one(b, line + b"\r\n")
        assert reply.startswith(("ERROR", "UNKNOWN")), (line, reply)
        assert np.array_equal(b.fields, position)
    # ASCII case is free; spaces and tabs pad.
    assert move(one(b, b"turn \t10, 9 \r\n")) != 9 * SIZE + 10 and b.fields[9 * SIZE + 10] == 2

    # Empty lines are ignored: nothing, spaces and tabs.
    assert run(b, b"\r\n\n \t \r\n") == []
    # INFO never replies; its problems come as MESSAGE before the next reply.
    assert run(b, b"INFO timeout_turn -5\r\nINFO rule 4\r\nINFO\r\nINFO time_left 1\x002\r\n") == []
    assert b.timeout_turn is None and b.time_left is None
    lines = run(b, b"ABOUT\r\n")
    assert [x.split(" ")[0] for x in lines] == ["MESSAGE"] * 4 + ['name="agz_jax",']
    assert ">= 0" in lines[0] and "renju" in lines[1] and "NUL" in lines[3]
    # END inside a block ends the program, silently.
    assert run(b, b"BOARD\r\n1,1,1\r\nEND\r\nABOUT\r\n") == [] and b.finished


def test_too_many_digits_are_out_of_range_not_a_non_integer():
    b, _, _ = make_brain(hostile=False)
    assert one(b, b"START 15\r\n") == "OK"
    big = "9" * 20
    for line in (f"TURN {big},1", f"TURN 1,-{big}", f"TAKEBACK {big},1"):
        reply = one(b, line.encode() + b"\r\n")
        assert reply.startswith("ERROR ") and "is out of range (at most 12 digits)" in reply, (
            line, reply)
        assert "must be an integer" not in reply
    assert "must be an integer" in one(b, b"TURN x,1\r\n")
    assert run(b, f"INFO timeout_turn {big}\r\n".encode()) == []
    lines = run(b, b"ABOUT\r\n")
    assert lines[0].startswith("MESSAGE INFO timeout_turn is out of range"), lines
    assert b.timeout_turn is None


def test_read_line_drops_the_rest_of_a_long_line():
    huge = b"TURN " + b"7" * (10 * 2**20)
    stream = io.BytesIO(huge + b"\r\nABOUT\nlast")
    kept, length = read_line(stream)
    assert length == len(huge) and kept == huge[:MAX_LINE]
    assert read_line(stream) == (b"ABOUT", 5)
    assert read_line(stream) == (b"last", 4)
    assert read_line(stream) is None
    exact = b"x" * MAX_LINE
    assert read_line(io.BytesIO(exact + b"\r\n")) == (exact, MAX_LINE)
    assert read_line(io.BytesIO(exact + b"y\n")) == (exact, MAX_LINE + 1)
    # A 10 MB line is one ERROR, and the next line is served.
    b, _, _ = make_brain()
    out = replies(run(b, huge + b"\r\nABOUT\r\n"))
    assert len(out) == 2 and "too long" in out[0] and out[1].startswith('name="agz_jax"')


# -- the fuzz ----------------------------------------------------------------------------

COMMANDS = ["START 15", "RESTART", "BEGIN", "TURN 3,4", "TAKEBACK 1,2", "ABOUT", "DONE",
            "RECTSTART 15,15", "INFO timeout_turn 500", "INFO rule 1", "INFO time_left 900",
            "INFO timeout_match 9000", "INFO max_memory 1000000"]
CONFUSABLE = {"s": "ſ", "i": "ı", "I": "İ", "k": "\u212a", "K": "\u212a", "A": "Ａ", "E": "Ε",
              "T": "Т", "O": "О", "N": "Ｎ", "R": "ʀ", "B": "Β", "n": "ｎ"}
NON_ASCII_DIGITS = ["٣", "３", "²", "۷", "\u0663", "𝟕", "①"]
JUNK = [b"\x00", b"\rx", b"\xff", b"\xc0\x80", b"\xe2\x80\xa8", b"\x85", b"\x1c", b"\x0b",
        b"\x0c", b"\x7f", b"\xef\xbb\xbf", b"\xc2\xa0", b"\xe3\x80\x80", b",", b";", b"-",
        b"+", b" ", b"\t", b"9" * 13]


def _pad_long(rng, line: bytes) -> tuple[bytes, bool]:
    """``line`` padded past MAX_LINE, and whether it still starts with ``line``."""
    n = int(rng.integers(MAX_LINE + 1, 3 * MAX_LINE))
    filler = bytes([int(rng.choice(list(b" 7x,\t")))])
    if rng.random() < 0.7:
        return line + filler * (n - len(line)), True
    return filler * (n - len(line)) + line, False


KNOWN = {"START", "RECTSTART", "RESTART", "BEGIN", "TURN", "BOARD", "SWAP2BOARD", "DONE",
         "TAKEBACK", "INFO", "ABOUT", "END"}


def _first_word_is_command(line: bytes) -> bool:
    """Conservative: the bytes before the first space, tab, CR, LF or NUL, any case."""
    word = line.strip(b" \t")
    for sep in b" \t\r\n\x00":
        word = word.split(bytes([sep]))[0]
    return word.decode("utf-8", "replace").upper() in KNOWN


def hostile_command(rng) -> tuple[bytes, bool]:
    """A line made from a valid command that no longer is one, and whether it is
    still an INFO line (no reply)."""
    text = COMMANDS[int(rng.integers(len(COMMANDS)))]
    word, _, arg = text.partition(" ")
    kind = int(rng.integers(7))
    if kind == 0 or (kind == 1 and not arg):  # a confusable letter in the word
        spots = [i for i, c in enumerate(word) if c in CONFUSABLE or c.lower() in CONFUSABLE]
        i = spots[int(rng.integers(len(spots)))]
        c = word[i] if word[i] in CONFUSABLE else word[i].lower()
        return (word[:i] + CONFUSABLE[c] + word[i + 1:] + " " + arg).encode(), False
    if kind == 1:  # a non-ASCII digit in the arguments
        spots = [i for i, c in enumerate(arg) if c.isdigit()]
        i = spots[int(rng.integers(len(spots)))]
        d = NON_ASCII_DIGITS[int(rng.integers(len(NON_ASCII_DIGITS)))]
        return f"{word} {arg[:i]}{d}{arg[i + 1:]}".encode(), word == "INFO"
    if kind == 2:  # NUL or CR strictly inside the word
        i = int(rng.integers(1, len(word)))
        c = pick(rng, ["\x00", "\r"])
        return f"{word[:i]}{c}{word[i:]} {arg}".strip(" ").encode(), False
    if kind == 3:  # NUL or CR after the word (a CR just before the LF ends the line)
        line = f"{word} {arg}".strip(" ")
        c = pick(rng, ["\x00", "\r"]) if arg else "\x00"
        i = int(rng.integers(len(word), len(line) + (c == "\x00")))
        return (line[:i] + c + line[i:]).encode(), word == "INFO"
    if kind == 4:  # too long, whatever the bytes (the brain reads its first MAX_LINE)
        line, kept = _pad_long(rng, f"{word} {arg}".strip(" ").encode())
        return line, word == "INFO" and kept
    if kind == 5:  # junk bytes inserted in the arguments (or after a bare word)
        junk = JUNK[int(rng.integers(len(JUNK)))]
        line = f"{word} {arg}".encode()
        i = int(rng.integers(len(word) + 1, len(line) + 1))
        if junk in (b" ", b"\t", b",", b"-", b"+") and word != "INFO":
            junk += b"x"  # padding alone, or a sign, may leave a valid command
        if word == "INFO":
            junk = b"x" + junk  # inside the value, never between key and value
            i = len(line)
        return line[:i] + junk + line[i:], word == "INFO"
    # random bytes after a word that is not a command
    words = [b"TURNS", b"BEGINN", b"PLAY", b"SWAP", b"FOO", b"", b"7,7", b"INF", b"STAR"]
    tail = bytes(rng.integers(0, 256, int(rng.integers(0, 30)), dtype=np.uint8))
    line = words[int(rng.integers(len(words)))] + tail.replace(b"\n", b"?")
    if not line.strip(b" \t") or _first_word_is_command(line):
        line = b"?" + line
    return line, False


def hostile_stone(rng, stones: dict[int, int]) -> tuple[bytes, int | None]:
    """A line that spoils a BOARD block, and the point it repeats (if it does)."""
    got = _hostile_stone(rng, stones)
    return got if isinstance(got, tuple) else (got, None)


def _hostile_stone(rng, stones: dict[int, int]):
    x, y = int(rng.integers(SIZE)), int(rng.integers(SIZE))
    kind = int(rng.integers(9))
    if kind == 0:
        return f"{x},{y},{rng.choice([0, 3, 4, -1, 12])}".encode()
    if kind == 1:
        return f"{rng.choice([-1, SIZE, 99, 10**9])},{y},1".encode()
    if kind == 2 and stones:  # the later of the two lines is the bad one
        a = int(rng.choice(list(stones)))
        return f"{a % SIZE},{a // SIZE},{rng.choice([1, 2])}".encode(), a
    if kind == 3:
        line, c = f"{x},{y},2", pick(rng, ["\x00", "\r"])
        i = int(rng.integers(len(line) + (c == "\x00")))  # not CR LF
        return (line[:i] + c + line[i:]).encode()
    if kind == 4:
        return _pad_long(rng, f"{x},{y},1".encode())[0]
    if kind == 5:
        d = NON_ASCII_DIGITS[int(rng.integers(len(NON_ASCII_DIGITS)))]
        return f"{x},{d},2".encode()
    if kind == 6:
        return pick(rng, [b"TURN 1,1", b"BOARD", b"INFO timeout_turn 5", b"START 15",
                           b"ABOUT", b"BEGIN", b"RESTART", b"1,1", b"1,1,1,1", b"x,y,1",
                           b"DONE\x01", b"DONEX"])
    if kind == 7:
        junk = JUNK[int(rng.integers(len(JUNK)))]
        if junk in (b" ", b"\t", b"+", b"-"):  # padding or a sign may leave it valid
            junk = b"x"
        line = f"{x},{y},1".encode()
        i = int(rng.integers(len(line) + 1))
        return line[:i] + junk + line[i:] if junk != b"," else line + junk
    return bytes(rng.integers(0, 256, int(rng.integers(1, 20)), dtype=np.uint8)).replace(
        b"\n", b"\x00").replace(b" ", b"\x00") + b"\x00"


class Model:
    """The protocol as the test understands it: the position and settings after
    each valid command, and the reply each command must get."""

    def __init__(self):
        self.fields = None
        self.rule_bits = 0
        self.settings = {"timeout_turn": None, "timeout_match": None}

    def counts_ok(self, fields):
        own, opp = int((fields == 1).sum()), int((fields == 2).sum())
        return own in (opp, opp - 1)

    def over(self, fields):
        return bool(fives(fields, bool(self.rule_bits & 1)))

    def can_move(self, fields):
        # Renju (rule bit 4) is refused: the fake engine's model is freestyle.
        return (self.counts_ok(fields) and not self.over(fields) and (fields == 0).any()
                and not self.rule_bits & 4)


def test_fuzz_one_reply_per_command_never_an_illegal_move():
    rng = np.random.default_rng(23)
    b, engine, _ = make_brain(seed=23)
    m = Model()
    hostile = valid = moves = blocks = 0

    def ending():
        return b"\r\n" if rng.random() < 0.7 else b"\n"

    def check_state():
        if m.fields is None:
            assert b.fields is None
        else:
            assert np.array_equal(b.fields, m.fields)
        assert b.rule_bits == m.rule_bits
        assert b.timeout_turn == m.settings["timeout_turn"]
        assert b.timeout_match == m.settings["timeout_match"]
        assert b.block is None and not b.finished

    def expect_move(reply, fields):
        nonlocal moves
        a = move(reply)
        assert fields[a] == 0, f"illegal move {reply}"
        fields[a] = 1
        moves += 1
        return fields

    for step in range(2000):
        r = rng.random()
        if m.fields is None or step % 97 == 0 or (m.fields is not None and not
                                                   m.can_move(m.fields) and r < 0.5):
            line = b"START 15" if m.fields is None or rng.random() < 0.3 else b"RESTART"
            assert one(b, line + ending()) == "OK"
            m.fields = np.zeros(A, np.int8)
            valid += 1
        elif r < 0.55:  # a hostile line outside a block
            line, is_info = hostile_command(rng)
            out = replies(run(b, line + ending()))
            assert len(out) == (0 if is_info else 1), (line[:80], out)
            assert all(x.startswith(("ERROR", "UNKNOWN")) for x in out), (line[:80], out)
            hostile += 1
        elif r < 0.72:  # a BOARD block, spoilt or not
            blocks += 1
            fields = np.zeros(A, np.int8)
            n_opp = int(rng.integers(0, 12))
            n_own = n_opp - int(rng.integers(0, 2)) if n_opp else 0
            points = rng.permutation(A)[:n_own + n_opp]
            stones = {int(p): 1 if i < n_own else 2 for i, p in enumerate(points)}
            order = list(stones)
            rng.shuffle(order)
            # (what, line): what is a point, "bad" or "blank".
            lines = [(p, f"{p % SIZE},{p // SIZE},{stones[p]}".encode()) for p in order]
            repeats = None
            if rng.random() < 0.5:
                line, repeats = hostile_stone(rng, stones)
                lines.insert(int(rng.integers(len(lines) + 1)), ("bad", line))
                hostile += 1
            for _ in range(int(rng.integers(0, 3))):  # empty lines: ignored, not counted
                lines.insert(int(rng.integers(len(lines) + 1)),
                             ("blank", pick(rng, [b"", b" ", b"\t "])))
            counted = [what for what, _ in lines if what != "blank"]
            bad_line = None
            if "bad" in counted:  # 1-based; of two lines on one point the second is bad
                bad_line = 1 + max(counted.index("bad"),
                                   counted.index(repeats) if repeats is not None else -1)
            lines = [line for _, line in lines]
            head, head_bad = pick(rng, [b"BOARD", b"board", b"Board  "]), False
            done = pick(rng, [b"DONE", b"done", b" DONE\t"])
            if rng.random() < 0.1:  # BOARD with an argument
                head, head_bad = head.rstrip() + b" 1", True
                hostile += 1
            outs = [run(b, x + ending()) for x in [head, *lines, done]]
            assert all(replies(o) == [] for o in outs[:-1]), outs
            (reply,) = replies(outs[-1])
            for a, f in stones.items():
                fields[a] = f
            if head_bad:
                assert reply.startswith("ERROR BOARD rejected (BOARD takes no arguments"), reply
            elif bad_line is not None:
                assert reply.startswith(f"ERROR BOARD rejected (stone line {bad_line} "), (
                    reply, lines)
            elif m.can_move(fields):
                m.fields = expect_move(reply, fields)
                valid += 1
            else:
                assert reply.startswith("ERROR BOARD rejected") or (
                    m.rule_bits & 4 and reply.startswith("ERROR rule")), reply
        elif r < 0.85:  # TURN at an empty point (or an occupied one)
            fields = m.fields.copy()
            occupied = rng.random() < 0.1 and fields.any()
            a = int(rng.choice(np.flatnonzero(fields != 0 if occupied else fields == 0)))
            word = pick(rng, ["TURN", "turn", "Turn"])
            reply = one(b, f"{word} {a % SIZE},{a // SIZE}".encode() + ending())
            playable = not occupied and (not m.counts_ok(fields) or not m.over(fields))
            fields[a] = 2
            if playable and m.can_move(fields):
                m.fields = expect_move(reply, fields)
                valid += 1
            else:
                assert reply.startswith("ERROR"), (a, reply)
        elif r < 0.89:  # BEGIN
            reply = one(b, b"BEGIN" + ending())
            if m.fields.any() or m.rule_bits & 4:
                assert reply.startswith("ERROR"), reply
            else:
                m.fields = expect_move(reply, m.fields.copy())
        elif r < 0.93 and m.fields.any():  # TAKEBACK
            a = int(rng.choice(np.flatnonzero(m.fields)))
            assert one(b, f"TAKEBACK {a % SIZE},{a // SIZE}".encode() + ending()) == "OK"
            m.fields[a] = 0
            valid += 1
        elif r < 0.97:  # INFO: no reply
            key = pick(rng, ["timeout_turn", "timeout_match", "rule", "folder", "evaluate"])
            value = int(rng.choice([0, 1, 2, 5, 1000]))
            assert replies(run(b, f"INFO {key} {value}".encode() + ending())) == []
            if key == "rule":
                m.rule_bits = value
            elif key in m.settings:
                m.settings[key] = value
            valid += 1
        else:
            assert one(b, b"ABOUT" + ending()).startswith('name="agz_jax", version=')
            valid += 1
        check_state()

    print(f"fuzz: {hostile} hostile lines, {valid} valid commands, {moves} moves, "
          f"{blocks} BOARD blocks, {len(engine.calls)} engine calls")
    assert hostile >= 1000 and moves >= 100 and blocks >= 150
    assert run(b, b"END\r\nABOUT\r\n") == [] and b.finished


# -- time --------------------------------------------------------------------------------

def deadlines(*info: str, moves: int = 1, think_s: float = 0.0):
    """Budgets (ms, None for no deadline) the engine got for ``moves`` moves after
    ``info`` lines; the fake engine thinks ``think_s`` per move."""
    b, engine, _ = make_brain(think_s=think_s, hostile=False)
    assert one(b, b"START 15\r\n") == "OK"
    assert run(b, "".join(f"INFO {x}\r\n" for x in info).encode()) == []
    line = b"BEGIN\r\n"
    for _ in range(moves):
        a = move(one(b, line))
        free = np.flatnonzero(b.fields == 0)
        p = int(free[(a * 7) % len(free)])
        line = f"TURN {p % SIZE},{p // SIZE}\r\n".encode()
    return [None if d is None else (d - t) * 1000.0 for t, d in engine.calls]


def budget(ms: float) -> float:
    """What is left of ``ms`` after the reserve (8%, at least 40 ms)."""
    return ms - min(ms, max(40.0, 0.08 * ms))


def test_no_time_limit_no_deadline():
    assert deadlines(moves=2) == pytest.approx([None, None])
    assert deadlines("time_left 2147483647", "timeout_match 0") == pytest.approx([None])


def test_timeout_turn_bounds_each_move():
    assert deadlines("timeout_turn 1000", moves=3, think_s=0.5) == pytest.approx([budget(1000)] * 3)
    assert deadlines("timeout_turn 0") == pytest.approx([0.0])  # as fast as possible
    assert deadlines("timeout_turn 30") == pytest.approx([0.0])  # all reserve
    # The smaller of the two limits.
    assert deadlines("timeout_turn 1000", "time_left 6000") == pytest.approx([budget(6000 / 30)])


def test_timeout_match_shares_the_match_time_and_counts_what_was_used():
    # 60 s for the match, 30 moves to go: 2 s a move; each move uses 1.5 s of it.
    got = deadlines("timeout_match 60000", moves=3, think_s=1.5)
    assert got == pytest.approx([budget(60000 / 30), budget(58500 / 30), budget(57000 / 30)])
    # Later in a game fewer moves are to go (half the empty points, at least 5).
    assert move_budget_ms(timeout_turn=None, timeout_match=60000, time_left=None,
                          used_ms=50000, empty=13) == pytest.approx(budget(10000 / 6))


def test_time_left_overrides_timeout_match_and_counts_down():
    # time_left is what is left: the long timeout_match no longer counts.
    got = deadlines("timeout_match 6000000", "time_left 3000", moves=3, think_s=0.3)
    # Between two INFO time_left lines the brain counts its own time down.
    assert got == pytest.approx([budget(3000 / 30), budget(2700 / 30), budget(2400 / 30)])
    # A manager's new time_left replaces the count.
    b, engine, _ = make_brain(think_s=0.3, hostile=False)
    run(b, b"START 15\r\nINFO time_left 3000\r\nBEGIN\r\nINFO time_left 9000\r\n")
    a = int(np.flatnonzero(b.fields == 0)[0])
    one(b, f"TURN {a % SIZE},{a // SIZE}\r\n".encode())
    t, d = engine.calls[-1]
    assert (d - t) * 1000.0 == pytest.approx(budget(9000 / 30))
    # Out of time (the manager may send a negative time_left): the fastest move.
    assert deadlines("time_left -250") == pytest.approx([0.0])


@pytest.mark.parametrize("turn,match,left,used,empty,want", [
    (None, None, None, 0, 225, None),
    (5000, None, None, 0, 225, budget(5000)),
    (None, 0, None, 0, 225, None),
    (None, 30000, None, 0, 225, budget(1000)),
    (None, 30000, None, 40000, 225, 0.0),
    (None, None, 10**9, 0, 225, budget(10**9 / 30)),
    (None, None, 2147483647, 0, 225, None),
    (None, None, 500, 0, 3, budget(100)),
])
def test_move_budget_ms(turn, match, left, used, empty, want):
    got = move_budget_ms(timeout_turn=turn, timeout_match=match, time_left=left, used_ms=used,
                         empty=empty)
    assert got == pytest.approx(want)


def test_about_is_one_protocol_line():
    b, _, _ = make_brain()
    reply = one(b, b"ABOUT\r\n")
    assert reply == brain_commands.ABOUT.format(version="0")
    assert re.fullmatch(r'\w+="[^"]*"(, \w+="[^"]*")*', reply), reply


def test_each_rule_is_compiled_once_ahead_of_its_first_move():
    """The engine's programs are a rule's own: START compiles both rules a
    freestyle model plays (so an INFO rule before the first move, whose time
    the manager counts, compiles nothing), and no rule is compiled twice."""
    b, engine, _ = make_brain(hostile=False)
    assert one(b, b"START 15\r\n") == "OK" and engine.warmed == ["freestyle", "standard"]
    run(b, b"INFO rule 1\r\nINFO rule 0\r\nINFO rule 1\r\n")
    assert one(b, b"START 15\r\n") == "OK" and engine.warmed == ["freestyle", "standard"]
    assert one(b, b"BEGIN\r\n").count(",") == 1 and engine.warmed == ["freestyle", "standard"]
    # A renju model's games come as START, then INFO rule 4: START compiles renju.
    b, engine, _ = make_brain(hostile=False)
    engine.model.rules = Rules(SIZE, "renju")
    assert one(b, b"START 15\r\n") == "OK" and engine.warmed == ["renju"]
    run(b, b"INFO rule 4\r\n")
    assert one(b, b"BEGIN\r\n").count(",") == 1 and engine.warmed == ["renju"]
