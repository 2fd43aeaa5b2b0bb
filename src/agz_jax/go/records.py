"""One human game read and checked for the import (``go.tygem``).

A line of a TYGEM kifu file (``parse_line``; ``tygem_game``, with its result
from the year's index) or an SGF file (``sgf_game``) becomes the game's moves,
kept (``Kept``) or dropped (``Dropped``) with a reason of ``REASON_NAMES`` (the
import's own are ``corrupt_zip`` and ``duplicate``) and a detail. A game is
kept when it is
  * 19x19 (``not_19x19``), even: no handicap, no set-up stones (``handicap``),
  * decided: a known winner (``no_result``),
  * at least ``min_moves`` moves long (``too_short``),
  * legal under our rules (``illegal_move``): ``go.sgf.replay_rules``, i.e.
    suicide illegal, positional superko, at most 4 * 361 plies; the replay here
    is plain Python (``first_illegal``), tested against ``go.rules``,
and ``malformed`` when it cannot be read. A TYGEM game's komi and ranks are the
set's defaults, ``TYGEM_KOMI`` (6.5) and ``TYGEM_RANK`` (9 dan).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from agz_jax.go import games as store
from agz_jax.go import sgf
from agz_jax.go.sgf import REASONS

SIZE = store.SIZE
PASS = store.PASS
MAX_PLIES = 4 * SIZE * SIZE  # sgf.replay_rules(19).max_moves
TYGEM_KOMI = 6.5
TYGEM_RANK = 8  # 9 dan, as sgf.Record.rank
REASON_NAMES = ("corrupt_zip", "malformed", "not_19x19", "handicap", "no_result",
                "too_short", "illegal_move", "duplicate")


# ----------------------------------------------------------------------------- the replay


def _padded_tables(size: int):
    w = size + 2
    to_pad = [(a // size + 1) * w + a % size + 1 for a in range(size * size)]
    board = bytearray([3]) * (w * w)
    for p in to_pad:
        board[p] = 0
    rng = np.random.default_rng(0x7E6E + size)
    zob = rng.integers(1, 2**63, (3, w * w), dtype=np.int64).tolist()
    return w, to_pad, bytes(board), zob


_TABLES = {}


def _dead(board, start: int, colour: int, w: int):
    """The stones of ``start``'s chain when it has no liberty, else None."""
    stack = [start]
    stones = {start}
    while stack:
        q = stack.pop()
        for n in (q - w, q + w, q - 1, q + 1):
            v = board[n]
            if v == 0:
                return None
            if v == colour and n not in stones:
                stones.add(n)
                stack.append(n)
    return stones


def first_illegal(actions: Sequence[int], size: int = SIZE,
                  max_plies: int | None = None) -> tuple[int, int] | None:
    """(ply, reason) of the first illegal move of a game played from the empty
    board, black first and the colours alternating (``actions``: ``row * size +
    col``, ``size * size`` the pass), or None when every move is legal. ``reason``
    indexes ``sgf.REASONS`` and is what ``sgf.replay``'s ``why`` says of that
    move: occupied, a simple-ko retake, suicide, a repeated board (positional
    superko; a pass never repeats), or past the move cap (``max_plies``, default
    ``4 * size**2`` as ``sgf.replay_rules``). Plain Python: chains found by flood
    fill, boards remembered by 64-bit Zobrist hashes."""
    if size not in _TABLES:
        _TABLES[size] = _padded_tables(size)
    w, to_pad, empty, zob = _TABLES[size]
    cap = 4 * size * size if max_plies is None else max_plies
    npass = size * size
    if len(actions) and not 0 <= min(actions) <= max(actions) <= npass:
        raise ValueError(f"actions must be in 0..{npass}, got {min(actions)}..{max(actions)}")
    board = bytearray(empty)
    h = 0
    seen = {0}
    ko = -1
    me, opp = 1, 2
    for i, a in enumerate(actions):
        if i >= cap:
            return i, 5
        if a == npass:
            ko = -1
            me, opp = opp, me
            continue
        p = to_pad[a]
        if board[p]:
            return i, 1
        if p == ko:
            return i, 2
        board[p] = me
        h ^= zob[me][p]
        captured = []
        for n in (p - w, p + w, p - 1, p + 1):
            if board[n] == opp:
                dead = _dead(board, n, opp, w)
                if dead:
                    zo = zob[opp]
                    for q in dead:
                        board[q] = 0
                        h ^= zo[q]
                    captured.extend(dead)
        if not captured and _dead(board, p, me, w) is not None:
            return i, 3
        if h in seen:
            return i, 4
        seen.add(h)
        ko = -1
        if len(captured) == 1:
            # a lone stone that took one and has one liberty: the ko (go.board.place)
            nbrs = [board[n] for n in (p - w, p + w, p - 1, p + 1)]
            if me not in nbrs and nbrs.count(0) == 1:
                ko = captured[0]
        me, opp = opp, me
    return None


# ----------------------------------------------------------------------------- parsing


def _tokens() -> tuple[dict, dict]:
    """{b"B[qd]": action} for black and for white, passes ("[]", "[tt]") included."""
    out = ({}, {})
    for colour, letter in enumerate("BW"):
        for a in range(SIZE * SIZE):
            r, c = divmod(a, SIZE)
            out[colour][f"{letter}[{chr(97 + c)}{chr(97 + r)}]".encode()] = a
        out[colour][f"{letter}[]".encode()] = PASS
        out[colour][f"{letter}[tt]".encode()] = PASS
    return out


TOKENS = _tokens()


class Dropped(Exception):
    """A game not kept: ``reason`` (one of ``REASON_NAMES``) and ``detail``."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def parse_line(line: bytes) -> tuple[str, bytes]:
    """(id, moves as int16 bytes) of one line of a TYGEM kifu file
    (``Dropped("malformed")`` when it is not ``id<TAB>;B[..];W[..]...``)."""
    gid, tab, body = line.strip(b"\r\n").partition(b"\t")
    gid = gid.strip()
    if not tab or not gid:
        raise Dropped("malformed", "no id and tab")
    if not body.startswith(b";"):
        raise Dropped("malformed", "no moves")
    parts = body.rstrip().split(b";")[1:]
    actions = []
    for i, t in enumerate(parts):
        a = TOKENS[i % 2].get(t)
        if a is None:
            if t in TOKENS[1 - i % 2]:
                raise Dropped("malformed", "moves out of turn")
            raise Dropped("malformed", "not a move of a 19x19 board")
        actions.append(a)
    try:
        text = gid.decode("ascii")
    except UnicodeDecodeError:
        raise Dropped("malformed", "id is not text") from None
    return text, np.asarray(actions, "<i2").tobytes()


class Meta(NamedTuple):
    result: str
    date: str


def winner_of(result: str) -> int | None:
    """0 black, 1 white, -1 a draw, None unknown (as ``sgf.Record.winner``)."""
    return sgf.Record(size=SIZE, result=result).winner()


# ----------------------------------------------------------------------------- filters


class Kept(NamedTuple):
    moves: bytes
    winner: int
    komi: float
    black_rank: int
    white_rank: int
    game_id: str
    date: str
    result: str


def check_game(moves: bytes, min_moves: int) -> None:
    """``Dropped`` when a game is too short or breaks the rules."""
    n = len(moves) // 2
    if n < min_moves:
        raise Dropped("too_short", f"fewer than {min_moves} moves")
    bad = first_illegal(np.frombuffer(moves, "<i2").tolist())
    if bad is not None:
        raise Dropped("illegal_move", REASONS[bad[1]])


def tygem_game(line: bytes, meta: dict[str, Meta] | None, min_moves: int) -> Kept:
    """A kifu line checked (``Dropped`` with the reason otherwise)."""
    gid, moves = parse_line(line)
    if meta is None:
        raise Dropped("no_result", "no index for the year")
    m = meta.get(gid)
    if m is None:
        raise Dropped("no_result", "not in the index")
    winner = winner_of(m.result)
    if winner is None:
        raise Dropped("no_result", f"result {m.result[:20]!r}")
    check_game(moves, min_moves)
    return Kept(moves, winner, TYGEM_KOMI, TYGEM_RANK, TYGEM_RANK, gid, m.date, m.result)


def sgf_game(path: Path, min_moves: int) -> Kept:
    """An SGF file checked (``Dropped`` with the reason otherwise)."""
    try:
        record = sgf.read(path)
    except sgf.SgfError as e:
        text = str(e)
        if ": SZ:" in text:
            raise Dropped("not_19x19", "SZ outside 2..19") from None
        raise Dropped("malformed", text.split(": ", 2)[1] if text.count(": ") >= 2
                      else "unreadable") from None
    except Exception as e:  # noqa: BLE001  (sgfmill on input it was not written for)
        raise Dropped("malformed", f"the SGF parser failed ({type(e).__name__})") from None
    if record.size != SIZE:
        raise Dropped("not_19x19", f"{record.size}x{record.size}")
    if record.handicap or record.black_setup or record.white_setup:
        raise Dropped("handicap", "HA or set-up stones")
    winner = record.winner()
    if winner is None:
        raise Dropped("no_result", f"RE {record.result[:20]!r}")
    colours = [c for c, _ in record.moves]
    if colours != [i % 2 for i in range(len(colours))]:
        raise Dropped("malformed", "moves out of turn")
    moves = np.asarray([a for _, a in record.moves], "<i2").tobytes()
    check_game(moves, min_moves)
    return Kept(moves, winner, float(record.komi), record.rank(0), record.rank(1),
                path.stem, "", record.result)


__all__ = ["Dropped", "Kept", "Meta", "REASON_NAMES", "check_game", "first_illegal",
           "parse_line", "sgf_game", "tygem_game", "winner_of"]
