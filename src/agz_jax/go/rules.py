"""Go rules as pure functions on a pytree state.

The board is a flat vector of ``size * size`` points; action ``a < A`` puts a
stone on ``(row, col) = divmod(a, size)`` and action ``A`` (= ``Rules.pass_action``)
passes. Stones are ``+1`` (black) and ``-1`` (white); black moves first. Like
``agz_jax.gomoku``, ``Rules`` is a frozen, hashable description of the game whose
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

BLACK = 0
WHITE = 1
SIZES = (9, 13, 19)
"""The board sizes the project plays; ``Rules`` accepts any size in 2..19."""
MIN_SIZE, MAX_SIZE = 2, 19
OFF_BOARD = 2
"""The value ``padded`` boards hold in their extra slot ``A`` (off the board)."""
EMPTY_SLOT = np.uint32(2**32 - 1)
"""Both words of an unused slot of ``State.seen`` (sorts after every hash)."""


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


class Move(NamedTuple):
    """What a stone of the side to move would do on each of some points ``[K]``.

    Attributes:
      nbr: int32[K, 4]; the neighbours (``A`` off the board).
      nbr_chain: int32[K, 4]; their chain ids (``A`` for empty or off-board).
      friend: bool[K, 4]; a distinct friendly chain (merged by the move).
      capture: bool[K, 4]; a distinct enemy chain in atari (captured by the move).
      legal: bool[K]; empty, not suicide, not the simple-ko point (superko aside).
      hash: uint32[K, 2]; the board's hash after the move.
    """

    nbr: jax.Array
    nbr_chain: jax.Array
    friend: jax.Array
    capture: jax.Array
    legal: jax.Array
    hash: jax.Array


def stone(colour: jax.Array) -> jax.Array:
    """Board value (+1/-1, int8) of a colour index (0 black, 1 white)."""
    return (1 - 2 * jnp.asarray(colour)).astype(jnp.int8)


@functools.cache
def neighbour_table(size: int) -> np.ndarray:
    """int32[A, 4]: each point's up, down, left and right neighbour; ``A`` off the board."""
    a = size * size
    table = np.full((a, 4), a, np.int32)
    for p in range(a):
        r, c = divmod(p, size)
        for k, (dr, dc) in enumerate(((-1, 0), (1, 0), (0, -1), (0, 1))):
            if 0 <= r + dr < size and 0 <= c + dc < size:
                table[p, k] = (r + dr) * size + c + dc
    return table


@functools.cache
def zobrist_table(size: int) -> np.ndarray:
    """uint32[A, 2, 2]: two random words per (point, colour index), fixed per size."""
    rng = np.random.default_rng(0x60 + size)
    return rng.integers(0, 2**32, (size * size, 2, 2), dtype=np.uint32)


def padded(values: jax.Array, fill) -> jax.Array:
    """``values`` [A] with one more slot, ``A``, holding ``fill`` (off the board)."""
    return jnp.concatenate([values, jnp.full((1,), fill, values.dtype)])


def distinct(ids: jax.Array) -> jax.Array:
    """bool[..., 4]: ``ids[..., k]`` differs from ``ids[..., :k]`` (first occurrences)."""
    same = ids[..., :, None] == ids[..., None, :]  # [..., 4, 4]
    earlier = jnp.tril(jnp.ones((4, 4), bool), k=-1)
    return ~jnp.any(same & earlier, axis=-1)


def chain_liberties(size: int, board: jax.Array, chain: jax.Array) -> jax.Array:
    """int32[A + 1]: liberties of the chain whose id is the index (0 elsewhere)."""
    a = size * size
    nbr = jnp.asarray(neighbour_table(size))
    ids = padded(chain.astype(jnp.int32), a)[nbr]  # [A, 4]; ``A`` = no chain
    counts = distinct(ids) & (ids < a) & (board == 0)[:, None]
    return jnp.zeros(a + 1, jnp.int32).at[ids].add(counts.astype(jnp.int32))


def chain_sizes(size: int, chain: jax.Array) -> jax.Array:
    """int32[A + 1]: stones of the chain whose id is the index."""
    a = size * size
    ids = jnp.where(chain >= 0, chain.astype(jnp.int32), a)
    return jnp.zeros(a + 1, jnp.int32).at[ids].add(1)


def board_hash(size: int, board: jax.Array) -> jax.Array:
    """uint32[2]: the Zobrist hash of a board (sum mod 2**32 over its stones)."""
    z = jnp.asarray(zobrist_table(size))
    colour = (board < 0).astype(jnp.int32)
    words = jnp.take_along_axis(z, colour[:, None, None], axis=1)[:, 0]  # [A, 2]
    return jnp.sum(jnp.where((board != 0)[:, None], words, 0), axis=0, dtype=jnp.uint32)


def label_chains(size: int, board: jax.Array) -> jax.Array:
    """int16[A]: ``State.chain`` of a board built from scratch (each chain's
    smallest point), by propagating minimum labels between equal stones."""
    a = size * size
    nbr = jnp.asarray(neighbour_table(size))
    same = (padded(board, OFF_BOARD)[nbr] == board[:, None]) & (board != 0)[:, None]

    def relax(carry):
        label, _ = carry
        best = jnp.min(jnp.where(same, padded(label, a)[nbr], a), axis=1)
        new = jnp.minimum(label, best)
        return new, jnp.any(new != label)

    start = jnp.where(board != 0, jnp.arange(a), a)
    label, _ = jax.lax.while_loop(lambda c: c[1], relax, (start, jnp.bool_(True)))
    return jnp.where(board != 0, label, -1).astype(jnp.int16)


def analyse(size: int, board: jax.Array, chain: jax.Array, me: jax.Array,
            ko: jax.Array, points: jax.Array, base_hash: jax.Array | None = None) -> Move:
    """``Move``: a stone ``me`` (+1/-1) on each of ``points`` int32[K] (each < A).

    Legal (superko aside) when the point is empty, is not the ko point, and the
    stone keeps a liberty: an empty neighbour, a captured enemy chain (its last
    liberty is this point), or a friendly chain with another liberty.
    ``base_hash`` is ``board``'s hash when known (else it is computed).
    """
    a = size * size
    nbr = jnp.asarray(neighbour_table(size))[points]
    colour = padded(board, OFF_BOARD)[nbr]
    ids = padded(chain.astype(jnp.int32), a)[nbr]
    libs = chain_liberties(size, board, chain)[ids]
    first = distinct(ids)
    friend = (colour == me) & first
    capture = (colour == -me) & (libs == 1) & first
    breathes = jnp.any(colour == 0, 1) | jnp.any(capture, 1) | jnp.any(friend & (libs >= 2), 1)
    legal = (board[points] == 0) & breathes & (points != ko)
    z = jnp.asarray(zobrist_table(size))
    me_index = (me < 0).astype(jnp.int32)
    chain_hash = jnp.zeros((a + 1, 2), jnp.uint32).at[
        jnp.where(chain >= 0, chain.astype(jnp.int32), a)].add(
        z[jnp.arange(a), (board < 0).astype(jnp.int32)])
    lost = jnp.sum(jnp.where(capture[..., None], chain_hash[ids], 0), axis=1, dtype=jnp.uint32)
    base_hash = board_hash(size, board) if base_hash is None else base_hash
    new_hash = base_hash[None, :] + z[points, me_index] - lost
    return Move(nbr, ids, friend, capture, legal, new_hash)


def lower_bound(table: jax.Array, keys: jax.Array) -> jax.Array:
    """int32[K]: for each of ``keys`` uint32[K, 2], the first row of ``table``
    uint32[N, 2] (sorted lexicographically) that is not less than it (N if none);
    a binary search of ceil(log2(N + 1)) halvings."""
    n = table.shape[0]

    def halve(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        row = table[jnp.minimum(mid, n - 1)]
        less = (row[:, 0] < keys[:, 0]) | ((row[:, 0] == keys[:, 0]) & (row[:, 1] < keys[:, 1]))
        open_ = lo < hi
        return jnp.where(open_ & less, mid + 1, lo), jnp.where(open_ & ~less, mid, hi)

    start = (jnp.zeros(keys.shape[0], jnp.int32), jnp.full(keys.shape[0], n, jnp.int32))
    return jax.lax.fori_loop(0, int(np.ceil(np.log2(n + 1))), halve, start)[0]


def insert(table: jax.Array, key: jax.Array) -> jax.Array:
    """``table`` uint32[N, 2] (sorted) with ``key`` uint32[2] inserted in order and
    its last row (an unused ``EMPTY_SLOT``) dropped."""
    at = lower_bound(table, key[None])[0]
    rows = jnp.arange(table.shape[0])[:, None]
    shifted = jnp.concatenate([table[:1], table[:-1]])
    return jnp.where(rows < at, table, jnp.where(rows == at, key[None], shifted))


class Placed(NamedTuple):
    """The board after a stone is placed: ``board`` int8[A], ``chain`` int16[A],
    ``captured`` bool[A] (the stones removed), ``ko`` int32[] (the new simple-ko
    point, -1 none)."""

    board: jax.Array
    chain: jax.Array
    captured: jax.Array
    ko: jax.Array


def place(size: int, board: jax.Array, chain: jax.Array, me: jax.Array,
          point: jax.Array, move: Move) -> Placed:
    """Put a stone ``me`` on ``point`` (a legal one), with ``move`` its row of
    ``analyse``: remove the captured chains, merge the friendly ones into
    ``point``'s chain, and find the new ko point."""
    a = size * size
    chain32 = chain.astype(jnp.int32)
    captured = jnp.any(chain32[:, None] == jnp.where(move.capture, move.nbr_chain, -2), 1)
    merged = jnp.any(chain32[:, None] == jnp.where(move.friend, move.nbr_chain, -2), 1)
    is_point = jnp.arange(a) == point
    new_board = jnp.where(captured, 0, board).at[point].set(me.astype(board.dtype))
    new_chain = jnp.where(captured, -1, jnp.where(merged | is_point, point, chain32))
    # A single stone that captured a single stone and has no other liberty may be
    # recaptured at once, which would repeat the board: that point is the ko.
    lone = ~jnp.any(move.friend)
    liberties = jnp.sum(padded(new_board, OFF_BOARD)[move.nbr] == 0)
    is_ko = lone & (jnp.sum(captured) == 1) & (liberties == 1)
    ko = jnp.where(is_ko, jnp.argmax(captured), -1).astype(jnp.int32)
    return Placed(new_board, new_chain.astype(jnp.int16), captured, ko)


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
    board = np.array([values[ch] for r in rows for ch in r], np.int8)
    return _jitted_setup(rules)(board, jnp.int32(to_play), jnp.int32(ko))


def to_text(rules: Rules, state: State) -> str:
    """The board as a diagram (``from_text``'s format)."""
    board = np.asarray(state.board).reshape(rules.size, rules.size)
    return "\n".join(" ".join(".XO"[int(v)] for v in row) for row in board)
