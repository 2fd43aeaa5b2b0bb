"""Go rules as pure functions on a pytree state.

The board is a flat vector of ``size * size`` points; action ``a < A`` puts a
stone on ``(row, col) = divmod(a, size)`` and action ``A`` (= ``Rules.pass_action``)
passes. Stones are ``+1`` (black) and ``-1`` (white); black moves first. Like
``agz_jax.game.gomoku``, ``Rules`` is a frozen, hashable description of the game whose
methods are pure functions of arrays: close over it in ``jax.jit`` and lift the
per-game functions with ``jax.vmap``.

The rules (Chinese-style, as on KGS and in the Computer Go Olympiads):
  * a stone or chain without liberties is removed; the mover's captures are
    removed first, so a move that captures is never suicide;
  * suicide is illegal;
  * ko: ``superko=True`` (default) forbids any move whose resulting board repeats
    an earlier board of the game (*positional superko*, side to move ignored);
    ``superko=False`` forbids only the immediate recapture of a simple ko. Every
    entry point (``legal_mask``, ``is_legal``, ``step``) enforces the same rule,
    the one its ``Rules`` names. A pass is always legal and never a repetition;
  * the game ends after two consecutive passes, or after ``max_moves`` plies
    (passes included; default ``2 * A``, as in pgx), when it is scored as it stands;
  * area scoring: a player's stones plus the empty points that reach only that
    player's stones; ``score`` is black's area minus white's minus ``komi``. Every
    stone on the board counts as alive (Tromp-Taylor): there is no dead-stone
    removal, so games should be played out.

Chains are kept incrementally: ``State.chain`` gives every stone the point of its
chain's representative (a member stone), so a merge is one relabelling and a
capture one comparison; liberties are counted when needed, in O(A), by a
scatter-add over the empty points (each counts once for each distinct adjacent
chain). Positional superko looks up Zobrist hashes (two 32-bit words, summed
mod 2**32 over the stones, so a chain's contribution is a segment sum) in a
fixed-size sorted history of every earlier board: a binary search per candidate
move, and an O(max_moves) insertion per move.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.go.board import (  # noqa: F401  (re-exported: the rules' vocabulary)
    EMPTY_SLOT,
    OFF_BOARD,
    Move,
    Placed,
    analyse,
    board_hash,
    chain_liberties,
    insert,
    label_chains,
    lower_bound,
    neighbour_table,
    padded,
    place,
    stone,
    zobrist_table,
)

BLACK = 0
WHITE = 1
SIZES = (9, 13, 19)
"""The board sizes the project plays; ``Rules`` accepts any size in 2..19."""
MIN_SIZE, MAX_SIZE = 2, 19


class State(NamedTuple):
    """One game. Under ``jax.vmap`` every field gains a leading batch axis.

    Attributes:
      board: int8[A]; 0 empty, +1 black, -1 white.
      chain: int16[A]; each stone's chain representative (a point of the chain),
        -1 on empty points.
      to_play: int32[]; ``BLACK`` (0) or ``WHITE`` (1).
      ko: int32[]; the point the side to move may not play by the simple ko rule
        (the stone just captured by a single-stone ko capture), else -1.
      passes: int32[]; consecutive passes just played (0, 1, or 2 at the end).
      num_moves: int32[]; plies played, passes included.
      last_action: int32[]; the previous action (``A`` = pass), -1 before the first.
      done: bool[]; two consecutive passes, or ``max_moves`` plies.
      illegal: bool[]; an illegal action was forced through ``step``: the game is
        left unchanged and the flag stays set.
      played_at: int16[A]; the ply at which each stone was placed, -1 for an
        empty point or a stone of unknown age (a set-up position).
      hash: uint32[2]; the board's Zobrist hash.
      seen: uint32[max_moves + 1, 2]; the hashes of every board of the game so far
        (the starting one included), sorted (lexicographically), then ``EMPTY_SLOT``
        in the slots not yet used: positional superko's history.
      rank: int32[]; the strength the side to move plays at (the rank planes of
        ``go.features``); ``step`` carries it unchanged, -1 when unknown.
    """

    board: jax.Array
    chain: jax.Array
    to_play: jax.Array
    ko: jax.Array
    passes: jax.Array
    num_moves: jax.Array
    last_action: jax.Array
    done: jax.Array
    illegal: jax.Array
    played_at: jax.Array
    hash: jax.Array
    seen: jax.Array
    rank: jax.Array


@dataclasses.dataclass(frozen=True)
class Rules:
    """The game: board ``size`` (9, 13 or 19 for play; 2..19 accepted), ``komi``,
    positional ``superko`` (else simple ko only) and the ``max_moves`` cap
    (plies; default ``2 * size**2``)."""

    size: int = 19
    komi: float = 7.5
    superko: bool = True
    max_moves: int | None = None

    def __post_init__(self):
        if not isinstance(self.size, int) or not MIN_SIZE <= self.size <= MAX_SIZE:
            raise ValueError(f"rules.size must be an integer in {MIN_SIZE}..{MAX_SIZE}, "
                             f"got {self.size!r}")
        if isinstance(self.komi, bool) or not isinstance(self.komi, (int, float)) \
                or not np.isfinite(self.komi) or (2 * self.komi) % 1:
            raise ValueError(f"rules.komi must be a whole or half number, got {self.komi!r}")
        if not isinstance(self.superko, bool):
            raise ValueError(f"rules.superko must be True or False, got {self.superko!r}")
        if self.max_moves is None:
            object.__setattr__(self, "max_moves", 2 * self.size * self.size)
        if isinstance(self.max_moves, bool) or not isinstance(self.max_moves, int) \
                or self.max_moves < 1:
            raise ValueError(f"rules.max_moves must be a positive integer, got {self.max_moves!r}")

    @property
    def num_points(self) -> int:
        return self.size * self.size

    @property
    def num_actions(self) -> int:
        """Points plus the pass."""
        return self.num_points + 1

    @property
    def pass_action(self) -> int:
        return self.num_points

    def init(self) -> State:
        """The empty board, black to move (``setup`` of an empty board, built
        without labelling chains)."""
        return self._state(jnp.zeros(self.num_points, jnp.int8),
                           jnp.full(self.num_points, -1, jnp.int16), BLACK, -1)

    def setup(self, board, to_play=BLACK, ko=-1) -> State:
        """A position set up from a board int8[A] (handicap stones, a diagram):
        its chains labelled from scratch, the stones of unknown age, and the board
        the first of the game's history."""
        board = jnp.asarray(board, jnp.int8)
        return self._state(board, label_chains(self.size, board), to_play, ko)

    def _state(self, board, chain, to_play, ko) -> State:
        hash_ = board_hash(self.size, board)
        seen = jnp.full((self.max_moves + 1, 2), EMPTY_SLOT, jnp.uint32)
        return State(
            board=board,
            chain=chain,
            to_play=jnp.int32(to_play),
            ko=jnp.int32(ko),
            passes=jnp.int32(0),
            num_moves=jnp.int32(0),
            last_action=jnp.int32(-1),
            done=jnp.bool_(False),
            illegal=jnp.bool_(False),
            played_at=jnp.full(self.num_points, -1, jnp.int16),
            hash=hash_,
            seen=seen.at[0].set(hash_),
            rank=jnp.int32(-1),
        )

    def analyse(self, state: State, points: jax.Array) -> Move:
        """``Move`` of the side to move on ``points`` int32[K] (simple ko only)."""
        return analyse(self.size, state.board, state.chain, stone(state.to_play),
                       state.ko, points, state.hash)

    def repeats(self, state: State, hashes: jax.Array) -> jax.Array:
        """bool[K]: boards with ``hashes`` uint32[K, 2] occurred earlier in the game."""
        at = lower_bound(state.seen, hashes)
        return jnp.all(state.seen[jnp.minimum(at, self.max_moves)] == hashes, axis=-1)

    def legal_mask(self, state: State) -> jax.Array:
        """bool[A + 1]: the legal actions (the pass last) under this ``Rules``'s ko
        rule (positional superko, or simple ko with ``superko=False``) and the
        suicide rule; all False once the game is over."""
        move = self.analyse(state, jnp.arange(self.num_points))
        legal = move.legal
        if self.superko:
            legal = legal & ~self.repeats(state, move.hash)
        return padded(legal, True) & ~state.done

    def is_legal(self, state: State, action: jax.Array) -> jax.Array:
        """bool[]: ``action`` is legal (same rule as ``legal_mask``), for one action
        at the cost of one, not ``A``; False for an out-of-range action."""
        return self._check(state, action)[1]

    def _check(self, state: State, action: jax.Array) -> tuple[Move, jax.Array]:
        """(``analyse``'s row for ``action``'s point, ``is_legal``)."""
        action = jnp.asarray(action, jnp.int32)
        point = jnp.clip(action, 0, self.num_points - 1)
        move = self.analyse(state, point[None])
        legal = move.legal
        if self.superko:
            legal = legal & ~self.repeats(state, move.hash)
        in_range = (action >= 0) & (action <= self.pass_action)
        ok = in_range & ~state.done & ((action == self.pass_action) | legal[0])
        return jax.tree.map(lambda x: x[0], move), ok

    def step(self, state: State, action: jax.Array) -> State:
        """Play ``action`` (a point, or ``pass_action``) for the side to move.

        A finished game is returned unchanged. An illegal action (``is_legal``)
        leaves the game unchanged and sets ``illegal``.
        """
        action = jnp.asarray(action, jnp.int32)
        point = jnp.clip(action, 0, self.num_points - 1)
        row, play = self._check(state, action)
        is_pass = action == self.pass_action
        put = play & ~is_pass
        placed = place(self.size, state.board, state.chain, stone(state.to_play), point, row)
        num_moves = state.num_moves + play.astype(jnp.int32)
        passes = jnp.where(play, jnp.where(is_pass, state.passes + 1, 0), state.passes)
        played_at = jnp.where(placed.captured, -1, state.played_at).at[point].set(
            state.num_moves.astype(jnp.int16))
        # Without superko nothing reads ``seen``: it keeps the starting board only.
        seen = jnp.where(put, insert(state.seen, row.hash), state.seen) if self.superko \
            else state.seen
        return State(
            board=jnp.where(put, placed.board, state.board),
            chain=jnp.where(put, placed.chain, state.chain),
            to_play=jnp.where(play, 1 - state.to_play, state.to_play),
            ko=jnp.where(play, jnp.where(is_pass, -1, placed.ko), state.ko),
            passes=passes,
            num_moves=num_moves,
            last_action=jnp.where(play, action, state.last_action),
            done=state.done | (play & ((passes >= 2) | (num_moves >= self.max_moves))),
            illegal=state.illegal | (~play & ~state.done),
            played_at=jnp.where(put, played_at, state.played_at),
            hash=jnp.where(put, row.hash, state.hash),
            seen=seen,
            rank=state.rank,
        )

    def liberties(self, state: State) -> jax.Array:
        """int32[A]: liberties of the chain on each point (0 on empty points)."""
        libs = chain_liberties(self.size, state.board, state.chain)
        return jnp.where(state.chain >= 0, libs[state.chain.astype(jnp.int32)], 0)

    def areas(self, state: State) -> jax.Array:
        """int32[2]: black's and white's area: stones, plus empty points from which
        only that colour's stones can be reached through empty points."""
        nbr = jnp.asarray(neighbour_table(self.size))
        empty = state.board == 0

        def reach(seed):
            def grow(carry):
                r, _ = carry
                new = r | (empty & jnp.any(padded(r, False)[nbr], axis=1))
                return new, jnp.any(new != r)
            return jax.lax.while_loop(lambda c: c[1], grow, (seed, jnp.bool_(True)))[0]

        black, white = reach(state.board > 0), reach(state.board < 0)
        return jnp.stack([jnp.sum(black & ~white), jnp.sum(white & ~black)]).astype(jnp.int32)

    def score(self, state: State) -> jax.Array:
        """float32[]: black's area minus white's, minus komi (> 0: black wins)."""
        areas = self.areas(state)
        return (areas[0] - areas[1]).astype(jnp.float32) - jnp.float32(self.komi)

    def winner(self, state: State) -> jax.Array:
        """int32[]: the colour ahead on ``score`` (-1 for a tie), whether or not the
        game is over."""
        s = self.score(state)
        return jnp.where(s > 0, BLACK, jnp.where(s < 0, WHITE, -1)).astype(jnp.int32)

    def reward(self, state: State, colour: jax.Array) -> jax.Array:
        """float32[]: +1 if the game is over and ``colour`` has won, -1 if lost, else 0."""
        w = self.winner(state)
        r = jnp.where(w < 0, 0.0, jnp.where(w == colour, 1.0, -1.0))
        return jnp.where(state.done, r, 0.0).astype(jnp.float32)

    def play(self, moves, state: State | None = None) -> State:
        """Play a sequence of actions (host-side helper, one jitted step each)."""
        state = self.init() if state is None else state
        step = _jitted_step(self)
        for m in moves:
            state = step(state, jnp.int32(m))
        return state


@functools.cache
def _jitted_step(rules: Rules):
    return jax.jit(rules.step)


@functools.cache
def _jitted_setup(rules: Rules):
    return jax.jit(rules.setup)


def setup(rules: Rules, board, to_play=BLACK, ko=-1) -> State:
    """``rules.setup`` through a cached jitted copy (host-side helper)."""
    return _jitted_setup(rules)(jnp.asarray(board, jnp.int8), jnp.int32(to_play), jnp.int32(ko))


def point(size: int, text: str) -> int:
    """The action of a GTP vertex (``"D4"``: column letters A..T without I, row 1
    at the bottom) or ``"pass"``."""
    text = text.strip().upper()
    if text == "PASS":
        return size * size
    letters = "ABCDEFGHJKLMNOPQRST"[:size]
    col, digits = text[:1], text[1:]
    if col not in letters or not digits.isdigit() or not 1 <= int(digits) <= size:
        raise ValueError(f"not a vertex of a {size}x{size} board: {text!r}")
    return (size - int(digits)) * size + letters.index(col)


def vertex(size: int, action: int) -> str:
    """The GTP vertex of an action (``point``'s inverse)."""
    if action == size * size:
        return "pass"
    r, c = divmod(int(action), size)
    return f"{'ABCDEFGHJKLMNOPQRST'[c]}{size - r}"


def from_text(rules: Rules, text: str, to_play=BLACK, ko=-1) -> State:
    """A position from a diagram: ``size`` rows of ``X`` (black), ``O`` (white) and
    ``.`` (empty), spaces ignored, the top row first."""
    rows = [r.replace(" ", "") for r in text.strip().splitlines()]
    if len(rows) != rules.size or any(len(r) != rules.size for r in rows) \
            or set("".join(rows)) - set("XO."):
        raise ValueError(f"a {rules.size}x{rules.size} diagram of X, O and . was "
                         f"expected, got:\n{text}")
    values = {"X": 1, "O": -1, ".": 0}
    return setup(rules, np.array([values[ch] for r in rows for ch in r], np.int8), to_play, ko)


def to_text(rules: Rules, state: State) -> str:
    """The board as a diagram (``from_text``'s format)."""
    board = np.asarray(state.board).reshape(rules.size, rules.size)
    return "\n".join(" ".join(".XO"[int(v)] for v in row) for row in board)
