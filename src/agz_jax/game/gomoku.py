"""Gomoku rules as pure functions on a pytree state.

The board is a flat vector of ``size * size`` points, action ``a`` is the point
``(row, col) = divmod(a, size)``. Stones are ``+1`` (black) and ``-1`` (white);
black moves first. ``Rules`` is a frozen, hashable description of the game
(board size and winning rule) whose methods are pure functions of arrays, so it
can be closed over by ``jax.jit`` and every per-game function lifted with
``jax.vmap``.

Rules:
  * ``freestyle`` (the AlphaGomoku paper's rule): five *or more* in a row wins.
  * ``standard``: *exactly* five wins; a line of six or more does not.
  * ``renju``: white wins with five or more, black only with exactly five, and
    black may not play a double three, a double four or an overline
    (``agz_jax.game.renju``): ``legal_mask`` leaves those points out.

A win is looked for only on the four lines through the last move, using a
precomputed neighbour table (pgx-style), so ``step`` costs O(1) in the board
size.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.game.lines import line_table, line_window_table, with_off_board

BLACK = 0
WHITE = 1
RULES = ("freestyle", "standard", "renju")
MIN_SIZE, MAX_SIZE = 5, 19

class State(NamedTuple):
    """One game. Under ``jax.vmap`` every field gains a leading batch axis.

    Attributes:
      board: int8[A], A = size*size; 0 empty, +1 black, -1 white.
      to_play: int32[]; colour to move, ``BLACK`` (0) or ``WHITE`` (1).
      last_action: int32[]; the previous move, -1 before the first.
      num_moves: int32[]; stones on the board.
      winner: int32[]; -1 none (yet, or a draw), else the winning colour.
      done: bool[]; the game is over (win or full board).
      illegal: bool[]; an occupied or off-board action was forced through
        ``step``. The board is left unchanged; the flag stays set.
      played_at: int16[A]; the ply (0-based move number) at which each stone
        was placed, -1 for an empty point or a stone of unknown age (a position
        set up from a board). The "turns since" features read it.
      rank: int32[]; the strength the side to move is asked to play at (rank
        conditioning, ``features.ranks``). The rules ignore it and ``step``
        carries it unchanged, so every node of a search tree inherits its
        root's rank.
    """

    board: jax.Array
    to_play: jax.Array
    last_action: jax.Array
    num_moves: jax.Array
    winner: jax.Array
    done: jax.Array
    illegal: jax.Array
    played_at: jax.Array
    rank: jax.Array


def played_at_from_last(num_actions: int, last_action, num_moves) -> jax.Array:
    """int16[A] ``played_at`` of a position set up from a board: only the last
    move's ply (``num_moves - 1``) is known, every other stone's age is not."""
    points = jnp.arange(num_actions)
    known = (points == last_action) & (jnp.asarray(last_action) >= 0)
    return jnp.where(known, jnp.asarray(num_moves) - 1, -1).astype(jnp.int16)


def stone(colour: jax.Array) -> jax.Array:
    """Board value (+1/-1, int8) of a colour index (0 black, 1 white)."""
    return (1 - 2 * colour).astype(jnp.int8)


_WINDOW_OFFSETS = np.array([-4, -3, -2, -1, 1, 2, 3, 4]) + 5
"""Where a five point made by a stone at a window's centre (index 5) can lie."""
_WINDOW_OTHERS = np.array([0, 1, 2, 3, 4, 6, 7, 8, 9, 10])
"""A window's points but its centre."""


def _leading_run(same: jax.Array) -> jax.Array:
    """int32[...]: how many of ``same`` bool[..., n] hold, counted from index 0
    to the first that does not (``cumprod(same).sum(-1)``), written out as
    ands so that it fuses into one loop: XLA:CPU computes a ``cumprod``
    as a reduce-window, several times slower."""
    held = same[..., 0]
    run = held.astype(jnp.int32)
    for k in range(1, same.shape[-1]):
        held = held & same[..., k]
        run = run + held.astype(jnp.int32)
    return run


@functools.cache
def five_count_table(rule: str) -> np.ndarray:
    """int8[2**18]: how many five points a stone at the centre of an 11-point
    line window makes on that line (``Rules.window_five_count`` of one line).

    Index: bit ``i`` (0..9) when ``_WINDOW_OTHERS[i]`` holds the stone's
    colour, bit ``10 + j`` when ``_WINDOW_OFFSETS[j]`` is empty. For each
    empty offset, the stone and a second one there: does the run through the
    centre reach it and make a five (``rule``: at least five for freestyle,
    exactly five for standard; a run is read inside the window, so one that
    fills it to an end is at least 6 long)? Indices where a point is both the
    stone's and empty never occur. Renju has no table of its own: it reads
    black's lines with the standard table and white's with the freestyle one.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if rule == "renju":
        raise ValueError("renju reads black with the 'standard' table and white with 'freestyle'")
    index = np.arange(1 << 18)
    own = np.ones((len(index), 11), bool)
    own[:, _WINDOW_OTHERS] = (index[:, None] >> np.arange(10)) & 1
    empty = ((index[:, None] >> np.arange(10, 18)) & 1).astype(bool)  # [N, 8]
    pos = np.arange(11)
    second = pos[None, :] == _WINDOW_OFFSETS[:, None]  # [8, 11]: the second stone
    count = np.zeros(len(index), np.int8)
    for j, k in enumerate(_WINDOW_OFFSETS - 5):
        line = own | second[j]  # [N, 11]
        right = np.cumprod(line[:, 6:], axis=-1).sum(-1)
        left = np.cumprod(line[:, 4::-1], axis=-1).sum(-1)
        length = 1 + left + right
        reaches = right >= k if k > 0 else left >= -k
        hit = length >= 5 if rule == "freestyle" else length == 5
        count += hit & reaches & empty[:, j]
    return count


@dataclasses.dataclass(frozen=True)
class Rules:
    """The game: board ``size`` (5..19) and ``rule`` ('freestyle', 'standard' or 'renju')."""

    size: int = 15
    rule: str = "freestyle"

    def __post_init__(self):
        if not isinstance(self.size, int) or not MIN_SIZE <= self.size <= MAX_SIZE:
            raise ValueError(
                f"rules.size must be an integer in {MIN_SIZE}..{MAX_SIZE}, got {self.size!r}"
            )
        if self.rule not in RULES:
            raise ValueError(f"rules.rule must be one of {RULES}, got {self.rule!r}")

    @property
    def num_actions(self) -> int:
        return self.size * self.size

    def init(self) -> State:
        """The empty board, black to move."""
        return State(
            board=jnp.zeros(self.num_actions, jnp.int8),
            to_play=jnp.int32(BLACK),
            last_action=jnp.int32(-1),
            num_moves=jnp.int32(0),
            winner=jnp.int32(-1),
            done=jnp.bool_(False),
            illegal=jnp.bool_(False),
            played_at=jnp.full(self.num_actions, -1, jnp.int16),
            rank=jnp.int32(0),
        )

    def legal_mask(self, state: State, forbidden: jax.Array | None = None) -> jax.Array:
        """bool[A]: empty points (under renju, not black's forbidden ones when
        black is to move); all False once the game is over. ``forbidden``:
        ``self.forbidden(state.board)`` when the caller has it."""
        legal = (state.board == 0) & ~state.done
        if self.rule == "renju":
            forbidden = self.forbidden(state.board) if forbidden is None else forbidden
            legal &= ~((state.to_play == BLACK) & forbidden)
        return legal

    def forbidden(self, board: jax.Array, me: jax.Array | int = 1) -> jax.Array:
        """bool[A]: the empty points a stone ``me`` (+1 black, -1 white) may not
        be played on: black's forbidden points under renju, else none."""
        if self.rule != "renju":
            return jnp.zeros(board.shape, bool)
        from agz_jax.game import renju
        return renju.forbidden(board) & (jnp.asarray(me) == 1)

    def forbidden_rows(self, boards: jax.Array) -> jax.Array:
        """bool[B, A]: ``forbidden`` (black's) of each board of ``boards``
        [B, A], its recursion read only where a board needs it
        (``renju.forbidden_rows``)."""
        if self.rule != "renju":
            return jnp.zeros(boards.shape, bool)
        from agz_jax.game import renju
        return renju.forbidden_rows(boards)

    def _exact_for(self, me: jax.Array) -> jax.Array | bool:
        """Does a stone ``me`` (+1/-1) win only with exactly five?"""
        if self.rule == "renju":
            return jnp.asarray(me) == 1
        return self.rule == "standard"

    def is_win(self, board: jax.Array, action: jax.Array) -> jax.Array:
        """bool[]: does the stone on ``action`` make a winning line (per the rule)?

        Only the four lines through ``action`` are examined.
        """
        table = jnp.asarray(line_table(self.size))
        padded = jnp.concatenate([board, jnp.zeros(1, board.dtype)])
        me = board[action]
        return (me != 0) & self._makes_five(padded[table[action]] == me, me)

    def _makes_five(self, same: jax.Array, me: jax.Array) -> jax.Array:
        """bool[...]: a stone ``me`` whose neighbours ``same`` bool[..., 4, 2, 5]
        (on each line, each side, nearest first: the same colour?) makes a
        winning line, per the rule."""
        run = _leading_run(same)  # [..., 4, 2]
        length = 1 + run.sum(-1)  # [..., 4]; exact up to 11
        hit = jnp.where(self._exact_for(me), length == 5, length >= 5)
        return jnp.any(hit, axis=-1)

    def line_windows(self, board: jax.Array) -> jax.Array:
        """int[A, 4, 11]: each point's lines, offsets -5..5 (``line_window_table``;
        2 off the board): what ``five_points`` and ``new_five_points`` read,
        for either colour. A caller that needs several of them passes it to
        each, so that the board is gathered once (a gather of 9,900 points
        on 15x15, a large part of a search's tactics on a CPU)."""
        return with_off_board(board)[jnp.asarray(line_window_table(self.size))]

    def five_points(self, board: jax.Array, me: jax.Array,
                    windows: jax.Array | None = None) -> jax.Array:
        """bool[A]: the empty points where a stone ``me`` (+1/-1) would make a
        winning line (per the rule); ``is_win`` for every point at once.
        ``windows``: ``line_windows(board)``, when the caller has it."""
        if windows is None:
            table = jnp.asarray(line_table(self.size))
            padded = jnp.concatenate([board, jnp.zeros(1, board.dtype)])
            same = padded[table] == me
        else:  # each side's five nearest points, nearest first (off the board: never me)
            same = jnp.stack([windows[..., 6:], windows[..., 4::-1]], axis=-2) == me
        return (board == 0) & self._makes_five(same, me)

    def new_five_points(self, board: jax.Array, me: jax.Array,
                        windows: jax.Array | None = None) -> jax.Array:
        """int32[A]: how many five points (``five_points``) a stone ``me`` on
        each empty point would have on the lines through it: 2 or more for an
        open four or a double four, 1 for a four; 0 on occupied points.

        A five point made by the move lies on a line through it, within 4 of
        it, so the 11 points around it on each line decide: the run through
        both stones is read inside them, and one that reaches their ends is
        an overline (at least 6). ``windows``: ``line_windows(board)``, when
        the caller has it.
        """
        windows = self.line_windows(board) if windows is None else windows
        count = self.window_five_count(windows, me)
        return jnp.where(board == 0, count, 0)

    def window_five_count(self, vals: jax.Array, me: jax.Array) -> jax.Array:
        """int32[...]: ``new_five_points`` of one point from its lines ``vals``
        int[..., 4, 11] (``line_window_table``: index 5 is the point itself,
        read as ``me`` whatever it holds; 2 is off the board).

        A line's count depends only on which of its other 10 points hold
        ``me`` and which of the 8 within 4 are empty: one lookup per line in
        ``five_count_table`` (18 bits), not a run-length reading per offset.
        """
        return jnp.sum(self.line_five_count(vals, me), axis=-1, dtype=jnp.int32)

    def line_five_count(self, vals: jax.Array, me: jax.Array) -> jax.Array:
        """int32[...]: the five points a stone ``me`` at the centre (index 5)
        of each 11-point line window ``vals`` int[..., 11] makes on that line."""
        own = (vals[..., _WINDOW_OTHERS] == me).astype(jnp.int32)  # [..., 10]
        empty = (vals[..., _WINDOW_OFFSETS] == 0).astype(jnp.int32)  # [..., 8]
        index = (jnp.sum(own * jnp.asarray(1 << np.arange(10), jnp.int32), axis=-1)
                 + jnp.sum(empty * jnp.asarray(1 << np.arange(10, 18), jnp.int32), axis=-1))
        if self.rule != "renju":
            return jnp.asarray(five_count_table(self.rule))[index].astype(jnp.int32)
        exact = jnp.asarray(five_count_table("standard"))[index]
        more = jnp.asarray(five_count_table("freestyle"))[index]
        return jnp.where(self._exact_for(me), exact, more).astype(jnp.int32)

    def step(self, state: State, action: jax.Array) -> State:
        """Place a stone of the side to move on ``action``.

        A finished game is returned unchanged. An occupied or off-board action
        leaves the game unchanged and sets ``illegal``; the legal mask makes it
        unreachable in normal play. Under renju, black's forbidden points are
        left to the legal mask (a step would cost a recursive reading); moves
        from outside are checked on the host (``renju.foul_code``).
        """
        action = jnp.asarray(action, jnp.int32)
        in_board = (action >= 0) & (action < self.num_actions)
        safe = jnp.clip(action, 0, self.num_actions - 1)
        ok = in_board & (state.board[safe] == 0)
        play = ok & ~state.done
        board = jnp.where(play, state.board.at[safe].set(stone(state.to_play)), state.board)
        won = play & self.is_win(board, safe)
        num_moves = state.num_moves + play.astype(jnp.int32)
        full = num_moves >= self.num_actions
        return State(
            board=board,
            to_play=jnp.where(play, 1 - state.to_play, state.to_play),
            last_action=jnp.where(play, safe, state.last_action),
            num_moves=num_moves,
            winner=jnp.where(won, state.to_play, state.winner),
            done=state.done | won | (play & full),
            illegal=state.illegal | (~ok & ~state.done),
            played_at=jnp.where(
                play, state.played_at.at[safe].set(state.num_moves.astype(jnp.int16)),
                state.played_at),
            rank=state.rank,
        )

    def observe(self, state: State) -> jax.Array:
        """float32[H, W, 3]: the paper's s = [X, Y, L].

        X: stones of the side to move, Y: the opponent's stones, L: one-hot of
        the opponent's last move (zeros before the first move).
        """
        me = stone(state.to_play)
        x = state.board == me
        y = state.board == -me
        last = (jnp.arange(self.num_actions) == state.last_action) & (state.last_action >= 0)
        planes = jnp.stack([x, y, last], axis=-1).astype(jnp.float32)
        return planes.reshape(self.size, self.size, 3)

    def reward(self, state: State, colour: jax.Array) -> jax.Array:
        """float32[]: +1 if ``colour`` has won, -1 if it has lost, else 0."""
        return jnp.where(
            state.winner < 0, 0.0, jnp.where(state.winner == colour, 1.0, -1.0)
        ).astype(jnp.float32)

    def from_moves(self, moves) -> State:
        """Play a sequence of actions from the empty board (host-side helper;
        one compiled step a move, compiled once for these rules)."""
        state, step = self.init(), _compiled_step(self)
        for m in moves:
            state = step(state, jnp.int32(m))
        return state


@functools.cache
def _compiled_step(rules: Rules):
    """``rules.step`` under ``jax.jit`` (op by op it costs ~100 times as much)."""
    return jax.jit(rules.step)


def to_text(rules: Rules, state: State) -> str:
    """A human-readable board: ``X`` black, ``O`` white, ``.`` empty."""
    board = np.asarray(state.board).reshape(rules.size, rules.size)
    chars = {0: ".", 1: "X", -1: "O"}
    return "\n".join(" ".join(chars[int(v)] for v in row) for row in board)
