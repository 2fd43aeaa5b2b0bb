"""Game records in Piskvork's ``.psq`` format (Gomocup / Piskvork).

A ``.psq`` file is a header line ``Piskvorky WxH, X:Y, N`` followed by one move
per line ``x,y,time``: 1-based ``x`` = column, ``y`` = row, ``time`` the
thinking time in milliseconds. The moves end at the first line that does not
start like one (``-1``, engine names, ...): that line and the rest are a trailer
and ignored by the reader. A line that starts like a move (``x,``) but is not
``x,y,time`` with three integers (``9,9``, ``9,9,x``, ``3,3,1e5``) is an error,
not the start of a trailer, so that a typo cannot silently drop the moves after
it.

Actions are this package's: ``action = row * size + col`` (0-based), so action
0 is ``1,1``, action 1 is ``2,1`` and action ``size`` is ``1,2``. Black moves
first.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.game.gomoku import Rules, State

_HEADER = re.compile(r"^\s*Piskvorky\s+(\d+)\s*x\s*(\d+)\s*(?:,.*)?$")
_MOVE = re.compile(r"^\s*(\d+)\s*,\s*(\d+)\s*,\s*(-?\d+)\s*$")
# Starts like a move line ("x," with x a number): never a trailer line.
_MOVE_LIKE = re.compile(r"^\s*[-+]?\d+\s*,")


class RecordError(ValueError):
    """A malformed ``.psq`` file, or a record that is not a legal game."""


class Record(NamedTuple):
    """size: board side; moves: actions (row * size + col); times_ms: per move;
    rule: the winning rule a trailer line ``rule: NAME`` names (None if none)."""

    size: int
    moves: list[int]
    times_ms: list[int]
    rule: str | None = None


def write_psq(path, moves: Iterable[int], size: int,
              times_ms: Sequence[int] | None = None, trailer: Iterable[str] = (),
              rule: str | None = None) -> None:
    """Write a ``.psq`` file.

    ``moves`` are actions; ``-1`` entries (padding after a game ended) are
    skipped. ``times_ms`` (milliseconds, 0 when None) is aligned either with
    ``moves`` as given or with the moves that remain once the ``-1`` are
    dropped. ``trailer`` lines are written after the moves; none may look like
    a move line (start with ``x,``), or a reader would take it for one. ``rule``
    (the game's winning rule) is written first in the trailer, as ``rule: NAME``.
    """
    trailer = ([f"rule: {rule}"] if rule is not None else []) + list(trailer)
    size = int(size)
    if size < 1:
        raise ValueError(f"size must be positive, got {size}")
    given = [int(m) for m in np.asarray(moves, dtype=np.int64).reshape(-1)]
    keep = [i for i, m in enumerate(given) if m != -1]
    if times_ms is None:
        times = [0] * len(keep)
    else:
        times_all = [int(t) for t in times_ms]
        if len(times_all) == len(given):
            times = [times_all[i] for i in keep]
        elif len(times_all) == len(keep):
            times = times_all
        else:
            raise ValueError(
                f"times_ms has {len(times_all)} entries for {len(given)} moves "
                f"({len(keep)} not -1)")
    lines = [f"Piskvorky {size}x{size}, 11:11, 0"]
    seen = set()
    for i, t in zip(keep, times, strict=True):
        a = given[i]
        if not 0 <= a < size * size:
            raise ValueError(f"move {i}: action {a} is off a {size}x{size} board")
        if a in seen:
            raise ValueError(f"move {i}: action {a} repeats an earlier move")
        seen.add(a)
        row, col = divmod(a, size)
        lines.append(f"{col + 1},{row + 1},{t}")
    for line in trailer:
        line = str(line)
        if "\n" in line or "\r" in line:
            raise ValueError(f"trailer line {line!r} contains a line break")
        if _MOVE_LIKE.match(line):
            raise ValueError(f"trailer line {line!r} would be read as a move")
        lines.append(line)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines) + "\n")


def read_psq(path) -> Record:
    """Read a ``.psq`` file; raises ``RecordError`` naming the file and line."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace", newline=None) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise RecordError(f"{path}: cannot read: {e}") from e

    def fail(lineno: int, problem: str):
        raise RecordError(f"{path}:{lineno}: {problem}")

    if not lines:
        fail(1, "empty file, expected a 'Piskvorky WxH, X:Y, N' header")
    header = _HEADER.match(lines[0])
    if header is None:
        fail(1, f"expected a 'Piskvorky WxH, X:Y, N' header, got {lines[0]!r}")
    width, height = int(header.group(1)), int(header.group(2))
    if width != height:
        fail(1, f"board {width}x{height} is not square")
    size = width
    if size < 1:
        fail(1, f"board {width}x{height} is empty")
    moves: list[int] = []
    times: list[int] = []
    seen: dict[int, int] = {}
    rule = None
    for lineno, line in enumerate(lines[1:], start=2):
        m = _MOVE.match(line)
        if m is None:
            if _MOVE_LIKE.match(line):
                shown = line.strip()
                shown = shown if len(shown) <= 40 else shown[:40] + "..."
                fail(lineno, f"{shown!r} looks like a move but is not 'x,y,time' (three "
                             "integers: column, row, milliseconds); write it as e.g. "
                             "'9,9,0', or delete it")
            rule = next((t.split(":", 1)[1].strip() for t in lines[lineno - 1:]
                         if t.lower().startswith("rule:")), None)
            break  # the trailer starts here
        x, y, t = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if not (1 <= x <= size and 1 <= y <= size):
            fail(lineno, f"point x={x}, y={y} is outside the {size}x{size} board")
        action = (y - 1) * size + (x - 1)
        if action in seen:
            fail(lineno, f"point x={x}, y={y} repeats the move on line {seen[action]}")
        seen[action] = lineno
        moves.append(action)
        times.append(t)
    return Record(size, moves, times, rule)


@functools.cache
def _jitted_step(rules: Rules):
    return jax.jit(rules.step)


def to_states(record: Record, rule: str = "freestyle") -> State:
    """Replay ``record`` under ``Rules(record.size, rule)``; the final State.

    Raises ``RecordError`` on an off-board or occupied point, a move played
    after the game ended, or under renju a black move on a forbidden point.
    """
    try:
        rules = Rules(int(record.size), rule)
    except ValueError as e:
        raise RecordError(f"record: {e}") from e
    step = _jitted_step(rules)
    state = rules.init()
    for ply, action in enumerate(record.moves):
        action = int(action)
        point = _describe(action, rules.size)
        if bool(state.done):
            raise RecordError(f"record: move {ply + 1} ({point}) follows the end of the game")
        if not 0 <= action < rules.num_actions:
            raise RecordError(f"record: move {ply + 1} ({point}) is off the board")
        if rule == "renju" and ply % 2 == 0:
            from agz_jax.game import renju

            foul = renju.foul_code(np.asarray(state.board), action)
            if foul:
                raise RecordError(f"record: move {ply + 1} ({point}) is black's forbidden "
                                  f"point under renju ({renju.FOULS[foul]})")
        state = step(state, jnp.int32(action))
        if bool(state.illegal):
            raise RecordError(f"record: move {ply + 1} ({point}) is on an occupied point")
    return state


def _describe(action: int, size: int) -> str:
    if 0 <= action < size * size:
        row, col = divmod(action, size)
        return f"action {action}, x={col + 1}, y={row + 1}"
    return f"action {action}"


class Match(Protocol):
    """What ``save_match`` reads of a match (``arena.MatchResult`` is one)."""

    moves: Any  # int32[T, B], -1 after a game's end
    a_black: Any  # bool[B]: player A had black


def save_match(directory, result: Match, size: int,
               names: tuple[str, str] = ("A", "B"), rule: str | None = None) -> list[str]:
    """Write ``game_{i:04d}.psq`` for every game of ``result``; the paths.

    Player A (``names[0]``) is black in the games where ``result.a_black``.
    The trailer names the black and the white player.
    """
    moves = np.asarray(result.moves)
    a_black = np.asarray(result.a_black)
    if moves.ndim != 2 or moves.shape[1] != a_black.shape[0]:
        raise ValueError(f"result.moves has shape {moves.shape}, expected [T, {len(a_black)}]")
    os.makedirs(directory, exist_ok=True)
    paths = []
    for i in range(moves.shape[1]):
        black, white = (names[0], names[1]) if a_black[i] else (names[1], names[0])
        path = os.path.join(directory, f"game_{i:04d}.psq")
        write_psq(path, moves[:, i], size, trailer=(f"black: {black}", f"white: {white}"),
                  rule=rule)
        paths.append(path)
    return paths
