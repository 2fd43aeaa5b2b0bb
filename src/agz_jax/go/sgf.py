"""Go game records in SGF (FF[4]), read and written with ``sgfmill``.

A ``Record`` is one game as plain data: board size, komi, handicap, the set-up
stones (``AB``/``AW``: handicap stones), the moves in order, the result and the
players (``PB``/``PW``, ``BR``/``WR`` ranks). Points are actions of
``go.rules`` (``row * size + col``, row 0 at the top, as GTP's highest row;
the pass is ``size * size``); colours are ``rules.BLACK`` (0) and ``WHITE`` (1).

Errors: ``SgfError`` names the file and the property (``"x.sgf: KM: 'abc' is
not a number"``). ``check_rules`` replays a record with ``go.rules`` and raises
``RulesViolation`` (a subclass, naming the file, move number, colour, vertex and
the reason) at its first illegal move.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import warnings
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

with warnings.catch_warnings():
    # sgfmill 1.1.1 has a docstring with an invalid escape ("\ "): Python 3.12
    # prints a SyntaxWarning when it compiles that file (no .pyc yet), and 3.11
    # a DeprecationWarning, shown where warnings are (-W default, pytest).
    warnings.simplefilter("ignore", SyntaxWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    from sgfmill import sgf

from agz_jax.go.rules import BLACK, MAX_SIZE, MIN_SIZE, WHITE, Rules, State, vertex

COLOURS = {"b": BLACK, "w": WHITE}
LETTERS = {BLACK: "b", WHITE: "w"}


class SgfError(ValueError):
    """A record that cannot be read: the message names the file and the property."""


class RulesViolation(SgfError):
    """A record whose moves break the rules (the message says which move and why)."""


@dataclasses.dataclass(frozen=True)
class Record:
    """One game.

    Attributes:
      size: the board's side (``SZ``, 19 when absent).
      komi: ``KM`` (0 when absent), a float.
      handicap: ``HA`` (0 when absent).
      black_setup, white_setup: sorted points of the ``AB``/``AW`` stones of the root.
      moves: ((colour, action), ...) of the main line; a pass is ``size * size``.
      result: ``RE`` as written ("B+3.5", "W+R", "0", "" when absent).
      black, white: ``PB``/``PW``; black_rank, white_rank: ``BR``/``WR`` ("" when absent).
      rules: ``RU`` ("" when absent).
      source: where it was read from ("" for a record made in memory).
    """

    size: int
    komi: float = 0.0
    handicap: int = 0
    black_setup: tuple[int, ...] = ()
    white_setup: tuple[int, ...] = ()
    moves: tuple[tuple[int, int], ...] = ()
    result: str = ""
    black: str = ""
    white: str = ""
    black_rank: str = ""
    white_rank: str = ""
    rules: str = ""
    source: str = dataclasses.field(default="", compare=False)

    def __post_init__(self):
        for name in ("black_setup", "white_setup"):
            object.__setattr__(self, name, tuple(sorted(int(p) for p in getattr(self, name))))
        object.__setattr__(self, "moves", tuple((int(c), int(a)) for c, a in self.moves))

    @property
    def pass_action(self) -> int:
        return self.size * self.size

    def winner(self) -> int | None:
        """BLACK or WHITE from ``result`` ("B+..."/"W+..."), -1 for a draw ("0",
        "Draw"), None when unknown (no result, "Void", "?")."""
        r = self.result.strip().upper()
        if r.startswith("B+"):
            return BLACK
        if r.startswith("W+"):
            return WHITE
        if r in ("0", "DRAW", "JIGO"):
            return -1
        return None

    def rank(self, colour: int) -> int:
        """The dan rank of ``colour``'s player as 0..8 (``"3d"`` -> 2; the rank
        planes of ``go.features``), -1 when it is not a dan rank 1..9."""
        text = self.black_rank if colour == BLACK else self.white_rank
        m = re.fullmatch(r"\s*([1-9])\s*d(an)?\s*\??\s*", text, re.IGNORECASE)
        return int(m.group(1)) - 1 if m else -1

    def board(self) -> np.ndarray:
        """int8[A]: the set-up stones (+1 black, -1 white)."""
        board = np.zeros(self.size * self.size, np.int8)
        board[list(self.black_setup)] = 1
        board[list(self.white_setup)] = -1
        return board


def _point(size: int, coords) -> int:
    """sgfmill's (row, col), row 0 at the bottom -> our action, row 0 at the top."""
    if coords is None:
        return size * size
    row, col = coords
    return (size - 1 - row) * size + col


def _coords(size: int, action: int):
    if action == size * size:
        return None
    row, col = divmod(int(action), size)
    return size - 1 - row, col


def _raw(node, ident: str) -> str:
    try:
        return ", ".join(repr(v.decode("utf-8", "replace")) for v in node.get_raw_list(ident))
    except (KeyError, ValueError):
        return "?"


def parse(data: bytes, source: str = "<bytes>") -> Record:
    """The main line of one SGF game. SgfError names ``source`` and the property."""
    try:
        game = sgf.Sgf_game.from_bytes(data)
    except ValueError as e:
        prop = "SZ" if "size" in str(e) else "syntax"
        raise SgfError(f"{source}: {prop}: {e}") from None
    root = game.get_root()
    size = game.get_size()
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise SgfError(f"{source}: SZ: a {size}x{size} board is outside "
                       f"{MIN_SIZE}..{MAX_SIZE}")

    def get(ident, convert, default):
        if not root.has_property(ident):
            return default
        try:
            return convert(root.get(ident))
        except ValueError as e:
            raise SgfError(f"{source}: {ident}: {_raw(root, ident)} is not valid ({e})") from None

    komi = get("KM", float, 0.0)
    if not np.isfinite(komi) or (2 * komi) % 1:
        raise SgfError(f"{source}: KM: {komi!r} is not a whole or half number")
    handicap = get("HA", int, 0)
    if not 0 <= handicap <= size * size:
        raise SgfError(f"{source}: HA: {handicap} stones do not fit the board")
    try:
        black, white, empty = root.get_setup_stones()
    except ValueError:
        bad = next(i for i in ("AB", "AW", "AE") if root.has_property(i) and _bad_points(root, i))
        raise SgfError(f"{source}: {bad}: {_raw(root, bad)} holds a point off the "
                       f"{size}x{size} board") from None
    if black & white:
        raise SgfError(f"{source}: AB/AW: a point is set up both black and white")
    moves = []
    for number, node in enumerate(game.get_main_sequence()[1:], start=1):
        for ident in ("AB", "AW", "AE"):
            if node.has_property(ident):
                raise SgfError(f"{source}: {ident}: set-up stones in node {number} (after the "
                               "root) are not supported")
        try:
            colour, coords = node.get_move()
        except ValueError:
            ident = "B" if node.has_property("B") else "W"
            raise SgfError(f"{source}: {ident}: {_raw(node, ident)} in node {number} is not "
                           f"a point of the {size}x{size} board") from None
        if colour is not None:
            moves.append((COLOURS[colour], _point(size, coords)))
    text = {i: get(i, str, "").strip() for i in ("RE", "PB", "PW", "BR", "WR", "RU")}
    return Record(size=size, komi=komi, handicap=handicap,
                  black_setup=tuple(sorted(_point(size, p) for p in black)),
                  white_setup=tuple(sorted(_point(size, p) for p in white)),
                  moves=tuple(moves), result=text["RE"], black=text["PB"], white=text["PW"],
                  black_rank=text["BR"], white_rank=text["WR"], rules=text["RU"],
                  source=source)


def _bad_points(node, ident: str) -> bool:
    try:
        node.get(ident)
        return False
    except ValueError:
        return True


def read(path: str | Path) -> Record:
    """``parse`` the file at ``path`` (SgfError names it)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SgfError(f"{path}: cannot be read ({e.strerror})") from None
    return parse(data, str(path))


def dumps(record: Record, application: str = "agz_jax") -> bytes:
    """The record as SGF FF[4] (UTF-8): ``parse(dumps(r)) == r``."""
    game = sgf.Sgf_game(record.size)
    root = game.get_root()
    root.set("AP", (application, "0.1"))
    root.set("KM", float(record.komi))
    if record.handicap:
        root.set("HA", int(record.handicap))
    if record.black_setup or record.white_setup:
        root.set_setup_stones([_coords(record.size, p) for p in record.black_setup],
                              [_coords(record.size, p) for p in record.white_setup])
    for ident, value in (("RU", record.rules), ("PB", record.black), ("PW", record.white),
                         ("BR", record.black_rank), ("WR", record.white_rank),
                         ("RE", record.result)):
        if value:
            root.set(ident, value)
    for colour, action in record.moves:
        if not 0 <= action <= record.size * record.size:
            raise ValueError(f"action {action} is not a point of a {record.size}x"
                             f"{record.size} board or the pass")
        game.extend_main_sequence().set_move(LETTERS[colour], _coords(record.size, action))
    return game.serialise()


def write(record: Record, path: str | Path) -> Path:
    """Write ``dumps(record)`` to ``path`` atomically (a temporary file renamed)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(dumps(record))
    tmp.replace(path)
    return path


# ----------------------------------------------------------------------------- replay


def replay_rules(size: int) -> Rules:
    """The rules records are replayed with: positional superko (as KGS, GnuGo
    ``--positional-superko``), komi 0 (legality does not depend on it) and a move
    cap of ``4 * size**2`` plies."""
    return Rules(size, komi=0.0, superko=True, max_moves=4 * size * size)


REASONS = ("", "the point is occupied", "it retakes a ko", "it is suicide",
           "it repeats an earlier board (positional superko)",
           "the game is over (the replay's move cap)")


class Replay(NamedTuple):
    """A game replayed (``replay``): ``final`` State, ``areas`` int32[2] of the
    final board (black's, white's), ``before`` the State before each of the T
    plies (stacked), ``why`` int32[T] (0: legal, else an index in ``REASONS``)."""

    final: State
    areas: jax.Array
    before: State
    why: jax.Array


@functools.cache
def _replay_fn(rules: Rules):
    def one(state: State, move):
        colour, action = move
        valid = action >= 0
        # a move out of turn (two moves of one colour) is played for its colour;
        # after two passes the game goes on (as GTP, and SGF records that do)
        reopen = valid & state.done & (state.num_moves < rules.max_moves)
        state = state._replace(to_play=jnp.where(valid, colour, state.to_play),
                               done=state.done & ~reopen,
                               passes=jnp.where(reopen, 0, state.passes))
        nxt = rules.step(state, jnp.maximum(action, 0))
        at = jnp.clip(action, 0, rules.num_points - 1)
        simple = rules.analyse(state, at[None]).legal[0]  # suicide and simple ko
        why = jnp.select([state.done, ~nxt.illegal | state.illegal, state.board[at] != 0,
                          at == state.ko, ~simple], [5, 0, 1, 2, 3], 4)
        nxt = jax.tree.map(lambda a, b: jnp.where(valid, a, b), nxt, state)
        return nxt, (state, jnp.where(valid, why, 0))

    @jax.jit
    def replay(board, colours, actions):
        final, (before, why) = jax.lax.scan(one, rules.setup(board), (colours, actions))
        return Replay(final, rules.areas(final), before, why)

    return replay


def replay(rules: Rules, board: np.ndarray, moves) -> Replay:
    """Play ``moves`` ((colour, action), ...; at most ``rules.max_moves``) from
    ``board`` int8[A] (black to move first unless the first move says
    otherwise), as one jitted scan over ``rules.max_moves`` plies: one
    compilation serves every game on the board (records, data sets, gtp-agz).
    Nothing is checked: see ``why``."""
    t = rules.max_moves
    if len(moves) > t:
        raise ValueError(f"{len(moves)} moves exceed the cap of {t}")
    colours = np.zeros(t, np.int32)
    actions = np.full(t, -1, np.int32)
    if len(moves):
        m = np.asarray(moves, np.int32).reshape(-1, 2)
        colours[:len(m)], actions[:len(m)] = m[:, 0], m[:, 1]
    return _replay_fn(rules)(np.asarray(board, np.int8), colours, actions)


def states(record: Record, rules: Rules | None = None) -> tuple[State, State]:
    """Replay ``record``: (the final State, the State before each move stacked on
    a leading axis [T]). Each state's ``rank`` is the mover's (``Record.rank``).
    RulesViolation names the first illegal move."""
    rules = rules or replay_rules(record.size)
    if rules.size != record.size:
        raise ValueError(f"rules for {rules.size}x{rules.size}, the record is "
                         f"{record.size}x{record.size}")
    where = record.source or "record"
    n = len(record.moves)
    if n > rules.max_moves:
        raise RulesViolation(f"{where}: {n} moves exceed the replay's cap of "
                             f"{rules.max_moves}")
    out = replay(rules, record.board(), record.moves)
    why = np.asarray(out.why)[:n]
    if why.any():
        i = int(np.flatnonzero(why)[0])
        colour, action = record.moves[i]
        raise RulesViolation(f"{where}: move {i + 1} ({'BW'[colour]} "
                             f"{vertex(record.size, action)}) is illegal: {REASONS[why[i]]}")
    ranks = np.asarray([record.rank(c) for c, _ in record.moves], np.int32)
    before = jax.tree.map(lambda x: x[:n], out.before)
    return out.final, before._replace(rank=jnp.asarray(ranks))


def check_rules(record: Record, rules: Rules | None = None) -> State:
    """The final position of ``record`` replayed (RulesViolation at an illegal move)."""
    return states(record, rules)[0]
