"""Move-prediction examples computed on the accelerator from stored move sequences.

``go.dataset`` replays SGF records on the host and stores the Table 1 planes of
every position on disk. Here the planes are made inside the training step
instead, from games kept as move sequences (the compact store: every game's
actions, ``row * size + col`` or ``size * size`` for the pass, concatenated in
``moves`` int16[N] with ``offsets`` int64[G + 1]):

1. ``sample_batch`` draws the examples: uniform over the positions before a move
   on the board (passes are not examples, as in ``go.dataset``), ``per_game``
   positions from each of ``batch_size / per_game`` games. A game is drawn with
   probability proportional to its examples and its positions uniformly within
   it, so every position is equally likely whatever ``per_game``; ``per_game=1``
   draws independent positions, a larger one replays fewer games per batch.
2. ``replay`` plays the drawn games, vmapped over the games, in one
   ``lax.scan`` over the plies, and keeps the state before each ply: by
   ``lean_step`` (default: ``board.place`` without the legality check and
   without scatters, the same fields as ``Rules.step`` for legal games, tested)
   or by ``Rules.step`` itself (``step="rules"``). Each game's board hashes are
   sorted once (``history``) for positional superko; the drawn positions are
   gathered from the scan's output.
3. ``planes`` computes ``go.features.features``'s planes of each position, the
   same numbers (tested against the host path), with the per-move planes
   (liberties after the move, capture size) by chain bitsets: O(A * A / 32)
   word operations per position instead of ``features``'s ``vmap`` of
   ``board.place`` over every point. The ladder plane (``ladder=``): the
   batch's (move, prey) candidate pairs are packed into a pool, the pairs the
   first two plies decide are decided at once (``first_plies``), the rest read
   by ``go.ladder.read`` in lock-step (``"pool"``, for an accelerator) or one
   after another (``"map"``, for a CPU, where a vmapped ``while_loop`` waits for
   the longest reading); ``"auto"`` picks by backend, ``"vmap"`` is
   ``go.features``'s way, ``"none"`` leaves the plane zero. Or the plane is
   looked up: ``ladder_table`` computes it once for every stored position
   (48 bytes a 19x19 position) into ``Store.ladder``.
4. each example is put under one of the 8 symmetries drawn at random, planes and
   target alike, as ``go.movepred``'s training step does (``symmetries=False``
   leaves them as they are).

Everything is jit-able with fixed shapes (``T``, the longest stored game, is
static): no host round trip per position. ``Store`` holds the device arrays;
``store(moves, offsets)`` builds it once on the host.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.game import symmetry
from agz_jax.go import ladder as ladder_lib
from agz_jax.go.board import (
    EMPTY_SLOT,
    OFF_BOARD,
    Move,
    analyse,
    chain_liberties,
    distinct,
    lower_bound,
    neighbour_table,
    padded,
    place,
    stone,
    zobrist_table,
)
from agz_jax.go.features import RANKS, assemble, rank_planes
from agz_jax.go.rules import Rules, State

LADDER_MODES = ("auto", "vmap", "pool", "map", "none")


class Store(NamedTuple):
    """Games on the device. G games, N moves, E examples (moves on the board).

    moves int16[N] (each game's actions, concatenated), offsets int32[G + 1]
    (game g is ``moves[offsets[g]:offsets[g + 1]]``), examples int32[E] (the
    indices in ``moves`` of the moves on the board, in order), first int32[G + 1]
    (game g's examples are ``examples[first[g]:first[g + 1]]``), setup int8[G, A]
    or None (each game's starting board; None: empty boards), rank int32[G, 2] or
    None (black's and white's rank for the rank planes, 0..8 for 1..9 dan, -1
    unknown; None: unknown), ladder uint32[N, W] or None (the ladder plane of the
    position before each move, a bitset: ``ladder_table``; None: read it in
    every batch).
    """

    moves: jax.Array
    offsets: jax.Array
    examples: jax.Array
    first: jax.Array
    setup: jax.Array | None = None
    rank: jax.Array | None = None
    ladder: jax.Array | None = None


class Batch(NamedTuple):
    """``sample_batch``'s examples: planes [B, H, W, C] (``dtype``), target
    int32[B] (the point played, under the example's symmetry), to_play int32[B],
    game int32[B], ply int32[B] (0-based), symmetry int32[B]."""

    planes: jax.Array
    target: jax.Array
    to_play: jax.Array
    game: jax.Array
    ply: jax.Array
    symmetry: jax.Array


class Positions(NamedTuple):
    """What the planes of a batch of positions need (leading axis [B]): the
    ``State`` fields the features read; ``seen`` uint32[B, T, 2], hashes of
    boards of the game, sorted, and ``seen_at`` int32[B, T], the first ply each
    occurred at: a board repeats one of the game so far if its hash is in
    ``seen`` from a ply <= ``num_moves`` (positional superko)."""

    board: jax.Array
    chain: jax.Array
    to_play: jax.Array
    ko: jax.Array
    num_moves: jax.Array
    played_at: jax.Array
    hash: jax.Array
    seen: jax.Array
    seen_at: jax.Array
    rank: jax.Array


def store(moves, offsets, setup=None, rank=None, size: int | None = None) -> Store:
    """A ``Store`` of host arrays (``moves`` int[N], ``offsets`` int[G + 1],
    optional ``setup`` int8[G, A], ``rank`` int[G, 2]); ``size`` (else guessed
    from ``setup``, else 19) says which action is the pass."""
    moves = np.asarray(moves)
    offsets = np.asarray(offsets, np.int64)
    if offsets.ndim != 1 or len(offsets) < 2 or offsets[0] != 0 or offsets[-1] != len(moves) \
            or np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must rise from 0 to len(moves)")
    if len(moves) >= 2**31:
        raise ValueError(f"{len(moves)} moves: more than int32 indexes")
    if size is None:
        size = int(round(np.sqrt(np.asarray(setup).shape[1]))) if setup is not None else 19
    on_board = (moves >= 0) & (moves < size * size)
    examples = np.flatnonzero(on_board).astype(np.int32)
    if not len(examples):
        raise ValueError("the store holds no move on the board: no examples to draw")
    first = np.searchsorted(examples, offsets).astype(np.int32)
    return Store(jnp.asarray(moves, jnp.int16), jnp.asarray(offsets, jnp.int32),
                 jnp.asarray(examples), jnp.asarray(first),
                 None if setup is None else jnp.asarray(setup, jnp.int8),
                 None if rank is None else jnp.asarray(rank, jnp.int32))


def subset(moves, offsets, games) -> tuple[np.ndarray, np.ndarray]:
    """(moves, offsets) of the ``games`` (indices, in the order given) of a
    store's host arrays: e.g. the training and the held-out games of a split
    by game (``agz_jax.training.supervised.split_by_game`` over the games)."""
    moves, offsets = np.asarray(moves), np.asarray(offsets, np.int64)
    games = np.asarray(games, np.int64)
    lengths = offsets[games + 1] - offsets[games]
    parts = [moves[offsets[g]:offsets[g + 1]] for g in games]
    return (np.concatenate(parts) if parts else moves[:0],
            np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))


def longest(offsets) -> int:
    """The plies of the longest game (``T``, a static shape)."""
    return int(np.max(np.diff(np.asarray(offsets)))) if len(offsets) > 1 else 0


def replay_rules(size: int) -> Rules:
    """The rules of the replay: ``go.sgf.replay_rules`` with simple ko (the
    positional-superko legality of the planes is computed from the history)."""
    return Rules(size, komi=0.0, superko=False, max_moves=4 * size * size)


def game_moves(s: Store, games: jax.Array, length: int) -> jax.Array:
    """int32[G, length]: the actions of ``games``, -1 after each game's end."""
    t = jnp.arange(length)
    start, end = s.offsets[games], s.offsets[games + 1]
    at = start[:, None] + t
    return jnp.where(at < end[:, None], s.moves[jnp.minimum(at, s.moves.shape[0] - 1)],
                     -1).astype(jnp.int32)


def lean_step(rules: Rules, state: State, action: jax.Array) -> State:
    """``rules.step`` of a move known to be legal (a stored game's), for what the
    planes read: ``board``, ``chain``, ``to_play``, ``ko``, ``num_moves``,
    ``last_action``, ``played_at`` and ``hash`` (the other fields are left as
    they are); action -1 changes nothing. The same ``board.place``, but no
    legality check and no scatter: the liberties of the (at most 4) neighbour
    chains by comparison with every point's neighbours, the captured stones'
    hash by a masked sum."""
    size, a = rules.size, rules.num_points
    action = jnp.asarray(action, jnp.int32)
    valid = action >= 0
    put = valid & (action < a)
    point = jnp.clip(action, 0, a - 1)
    me = stone(state.to_play)
    table = jnp.asarray(neighbour_table(size))
    chain32 = padded(state.chain.astype(jnp.int32), a)
    nbr = table[point]
    ids = chain32[nbr]
    colour = padded(state.board, OFF_BOARD)[nbr]
    first = distinct(ids)
    touch = jnp.any(chain32[table][:, :, None] == ids, axis=1) & (state.board == 0)[:, None]
    libs = jnp.sum(touch, axis=0)
    friend = (colour == me) & first
    capture = (colour == -me) & (libs == 1) & first
    placed = place(size, state.board, state.chain, me, point,
                   Move(nbr, ids, friend, capture, jnp.bool_(True), state.hash))
    z = jnp.asarray(zobrist_table(size))
    words = z[jnp.arange(a), (state.board < 0).astype(jnp.int32)]  # [A, 2]
    lost = jnp.sum(jnp.where(placed.captured[:, None], words, 0), axis=0, dtype=jnp.uint32)
    new_hash = state.hash + z[point, (me < 0).astype(jnp.int32)] - lost
    played_at = jnp.where(placed.captured, -1, state.played_at).at[point].set(
        state.num_moves.astype(jnp.int16))
    return state._replace(
        board=jnp.where(put, placed.board, state.board),
        chain=jnp.where(put, placed.chain, state.chain),
        to_play=jnp.where(valid, 1 - state.to_play, state.to_play),
        ko=jnp.where(valid, jnp.where(put, placed.ko, -1), state.ko),
        num_moves=state.num_moves + valid.astype(jnp.int32),
        last_action=jnp.where(valid, action, state.last_action),
        played_at=jnp.where(put, played_at, state.played_at),
        hash=jnp.where(put, new_hash, state.hash))


def replay(rules: Rules, actions: jax.Array, setup: jax.Array | None = None,
           step: str = "lean"):
    """(State before each ply, stacked [T, G]; hash uint32[T, G, 2]) of the games
    ``actions`` int32[G, T] (-1 after the end), played from ``setup`` int8[G, A]
    (None: the empty board) with black first and colours alternating. ``step``:
    ``"rules"`` plays each move through ``rules.step`` (an illegal one sets
    ``illegal`` and is not played; a game goes on after two passes, as
    ``go.sgf``'s replay), ``"lean"`` through ``lean_step`` (the stored games
    are legal: the fields the planes read, the same values, faster). ``seen``
    is not kept."""
    if step not in ("lean", "rules"):
        raise ValueError(f"step must be 'lean' or 'rules', got {step!r}")
    g = actions.shape[0]
    if setup is None:
        init = jax.vmap(lambda _: rules.init())(jnp.arange(g))
    else:
        init = jax.vmap(rules.setup)(setup)
    init = init._replace(seen=jnp.zeros((g, 1, 2), jnp.uint32))

    def one(state: State, action):
        valid = action >= 0
        reopen = valid & state.done & (state.num_moves < rules.max_moves)
        state = state._replace(done=state.done & ~reopen,
                               passes=jnp.where(reopen, 0, state.passes))
        nxt = rules.step(state, jnp.maximum(action, 0))
        return jax.tree.map(lambda a, b: jnp.where(valid, a, b), nxt, state)

    one = one if step == "rules" else functools.partial(lean_step, rules)

    def ply(states, acts):
        return jax.vmap(one)(states, acts), states

    _, before = jax.lax.scan(ply, init, actions.T)
    return before, before.hash


def positions(before: State, hashes: jax.Array, game: jax.Array, ply: jax.Array,
              rank: jax.Array | None = None) -> Positions:
    """The positions before ``ply`` int32[B] of ``game`` int32[B] (indices into
    ``replay``'s games), with their games' board histories (sorted once a game:
    ``history``)."""
    pick = jax.tree.map(lambda x: x[ply, game], before)
    seen, seen_at = history(hashes)
    rank = jnp.full(game.shape, -1, jnp.int32) if rank is None else rank
    return Positions(pick.board, pick.chain, pick.to_play, pick.ko, pick.num_moves,
                     pick.played_at, pick.hash, seen[game], seen_at[game], rank)


def history(hashes: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(uint32[G, T, 2] each game's board hashes sorted, int32[G, T] the ply of
    each): from ``replay``'s hashes [T, G, 2] of the board before each ply. Among
    equal hashes the earliest ply sorts first, so a binary search finds it."""
    t = hashes.shape[0]
    hist = jnp.swapaxes(hashes, 0, 1)  # [G, T, 2]
    at = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), hist.shape[:2])
    hi, lo, at = jax.lax.sort((hist[..., 0], hist[..., 1], at), dimension=1, num_keys=3)
    return jnp.stack([hi, lo], axis=-1), at


def of_state(rules: Rules, state: State) -> Positions:
    """``Positions`` of one ``State`` (no batch axis) of any ``Rules``: its own
    ``seen`` with positional superko, else an empty history (simple ko only)."""
    seen = state.seen if rules.superko else jnp.full((1, 2), EMPTY_SLOT, jnp.uint32)
    return Positions(state.board, state.chain, state.to_play, state.ko, state.num_moves,
                     state.played_at, state.hash, seen, jnp.zeros(seen.shape[0], jnp.int32),
                     state.rank)


# --- the planes -----------------------------------------------------------------------


@functools.cache
def _bit_tables(size: int) -> tuple[np.ndarray, np.ndarray]:
    """(uint32[A, W] each point's own bit, uint32[A, W] its neighbours' bits)."""
    a = size * size
    words = (a + 31) // 32
    own = np.zeros((a, words), np.uint32)
    for p in range(a):
        own[p, p // 32] = np.uint32(1) << np.uint32(p % 32)
    nbr = neighbour_table(size)
    around = np.zeros((a, words), np.uint32)
    for p in range(a):
        for q in nbr[p]:
            if q < a:
                around[p] |= own[q]
    return own, around


def pack(mask: jax.Array) -> jax.Array:
    """uint32[W]: bool[A] as a bitset (point p is bit p % 32 of word p // 32)."""
    a = mask.shape[-1]
    words = (a + 31) // 32
    bits = jnp.pad(mask, (0, words * 32 - a)).reshape(words, 32).astype(jnp.uint32)
    return jnp.sum(bits << jnp.arange(32, dtype=jnp.uint32), axis=-1, dtype=jnp.uint32)


def unpack(bits: jax.Array, points: int) -> jax.Array:
    """bool[..., points]: ``pack``'s inverse."""
    one = (bits[..., :, None] >> jnp.arange(32, dtype=jnp.uint32)) & 1
    return one.reshape(*bits.shape[:-1], -1)[..., :points].astype(bool)


def popcount(bits: jax.Array) -> jax.Array:
    """int32[...]: the set bits of uint32[..., W]."""
    return jnp.sum(jax.lax.population_count(bits).astype(jnp.int32), axis=-1)


def after_move(size: int, board, chain, me, ko) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(int32[A] liberties of the new stone's chain, int32[A] stones captured,
    bool[A] legal but for superko) if ``me`` played each point: the numbers of
    ``go.features.after_move`` on the legal points, by bitsets. The new chain is
    the point and its friendly neighbour chains S; its liberties are the points
    next to S that are empty or captured, the point itself aside."""
    a = size * size
    own, around = (jnp.asarray(t) for t in _bit_tables(size))
    nbr = jnp.asarray(neighbour_table(size))
    chain32 = chain.astype(jnp.int32)
    chain32 = jnp.where(chain32 >= 0, chain32, a)
    ids = padded(chain32, a)[nbr]  # [A, 4]; A: no chain (empty, off the board)
    # stones[c]: chain c's points; near[c]: the points next to chain c (each
    # (chain, point) pair added once, so the adds are ORs)
    stones = jnp.zeros((a + 1, own.shape[1]), jnp.uint32).at[chain32].add(own).at[a].set(0)
    first = distinct(ids) & (ids < a)
    near = jnp.zeros((a + 1, own.shape[1]), jnp.uint32).at[ids].add(
        jnp.where(first[..., None], own[:, None, :], 0))
    move = analyse(size, board, chain, me, ko, jnp.arange(a), hashes=False)
    # row A of both tables is empty: the neighbours that are not merged or taken
    reach = around | _or4(near[jnp.where(move.friend, ids, a)])
    taken = _or4(stones[jnp.where(move.capture, ids, a)])
    free = pack(board == 0)
    libs = popcount(reach & (free | taken) & ~own)
    return libs, popcount(taken), move.legal


def _or4(x: jax.Array) -> jax.Array:
    return x[:, 0] | x[:, 1] | x[:, 2] | x[:, 3]


def legality(size: int, p: Positions) -> jax.Array:
    """bool[A]: the legal points of one position (suicide, simple ko, and
    positional superko against ``p.seen``), as ``Rules.legal_mask``."""
    a = size * size
    move = analyse(size, p.board, p.chain, stone(p.to_play), p.ko, jnp.arange(a), p.hash)
    at = jnp.minimum(lower_bound(p.seen, move.hash), p.seen.shape[0] - 1)
    repeats = jnp.all(p.seen[at] == move.hash, axis=-1) & (p.seen_at[at] <= p.num_moves)
    return move.legal & ~repeats


def base_planes(size: int, p: Positions, ranks: int = RANKS) -> tuple[jax.Array, jax.Array]:
    """(bool[A, C] every plane of one position with the ladder plane zero, bool[A]
    the legal points)."""
    board = p.board
    me = stone(p.to_play)
    legal = legality(size, p)
    libs = chain_liberties(size, board, p.chain)
    libs = jnp.where(p.chain >= 0, libs[p.chain.astype(jnp.int32)], 0)
    libs_after, captured, _ = after_move(size, board, p.chain, me, p.ko)
    age = p.num_moves - p.played_at.astype(jnp.int32)
    age = jnp.where(p.played_at >= 0, age, 5)
    planes = assemble(board, legal, libs, libs_after, age, captured,
                      jnp.zeros(size * size, bool), rank_planes(ranks, p.rank, size * size))
    return planes, legal


LADDER_CHANNEL = 26


def first_plies(size: int, board, chain, attacker, move, prey, depth: int) -> jax.Array:
    """int32[]: ``go.ladder.read``'s answer when its first two plies decide it:
    0 when ``move`` does not leave the prey in atari or some answer of the
    defender escapes at once (3 or more liberties: whatever the reading of the
    other answers, it ends in an escape or a cut-off, both a no), 1 when every
    answer is captured at once (at most 7 nodes), else -1 (a reading is needed).
    Meant for readings of at least 3 frames and 8 nodes."""
    def after(bd, ch, mover, m):
        row = jax.tree.map(lambda x: x[0], analyse(size, bd, ch, mover, jnp.int32(-1), m[None],
                                                   hashes=False))
        bd2, ch2, _, _ = place(size, bd, ch, mover, m, row)
        libs = chain_liberties(size, bd2, ch2)
        return row.legal, bd2, ch2, libs, libs[ch2[prey].astype(jnp.int32)]

    legal, bd1, ch1, libs1, prey_libs = after(board, chain, attacker, move)
    atari = legal & (prey_libs == 1) & (board[prey] == -attacker)
    options, count = ladder_lib.prey_options(size, bd1, ch1, libs1, prey, False)
    ok, _, _, _, libs = jax.vmap(lambda m: after(bd1, ch1, -attacker, m))(options)
    tried = jnp.arange(ladder_lib.MAX_OPTIONS) < count
    caught = ~ok | (libs == 1)
    escapes = jnp.any(tried & ~caught & (libs >= 3))
    decided = jnp.where(jnp.all(~tried | caught), 1, -1)
    return jnp.where(~atari | escapes, 0, decided).astype(jnp.int32)


def ladders(size: int, p: Positions, legal: jax.Array, mode: str = "auto", limit: int = 8,
            pool: int | None = None, depth: int | None = None,
            steps: int | None = None, map_batch: int | None = None) -> jax.Array:
    """bool[B, A]: the ladder plane of a batch of positions (``p`` and ``legal``
    with a leading axis [B]); the same plane whatever the mode (``go.features``'s:
    the first ``limit`` candidate (move, prey) pairs of each position read by
    ``go.ladder.read``).

    ``"vmap"``: ``go.ladder.ladder_moves`` of each position, vmapped (the reader's
    ``while_loop`` runs in lock-step until the batch's longest reading ends).
    The others read only the batch's actual candidates, packed into ``pool``
    lanes (default ``B * limit``, room for all; a smaller pool leaves those past
    it unread, no ladder), first deciding what ``first_plies`` decides for all of
    them at once; the rest are read in lock-step (``"pool"``, for an
    accelerator) or one after another (``"map"``, ``lax.map`` in chunks of
    ``map_batch``: on a CPU each reading then costs its own nodes only).
    ``"auto"``: ``"map"`` on a CPU, else ``"pool"``."""
    b, a = legal.shape
    me = jax.vmap(stone)(p.to_play)
    if mode == "auto":
        mode = "map" if jax.default_backend() == "cpu" else "pool"
    if mode == "vmap":
        return jax.vmap(lambda bd, ch, m, lg: ladder_lib.ladder_moves(
            size, bd, ch, m, lg, limit, depth, steps))(p.board, p.chain, me, legal)
    moves, preys, valid = jax.vmap(
        lambda bd, ch, m, lg: ladder_lib.candidates(size, bd, ch, m, lg, limit))(
        p.board, p.chain, me, legal)
    pool = b * limit if pool is None else pool
    slot = jnp.nonzero(valid.reshape(-1), size=pool, fill_value=b * limit)[0]
    used = slot < b * limit
    slot = jnp.minimum(slot, b * limit - 1)
    who = slot // limit
    move, prey = moves.reshape(-1)[slot], preys.reshape(-1)[slot]
    frames = ladder_lib.default_depth(size) if depth is None else depth
    nodes = ladder_lib.default_steps(size) if steps is None else steps
    if frames >= 3 and nodes >= 8:
        quick = jax.vmap(lambda w, m, q: first_plies(size, p.board[w], p.chain[w], me[w], m, q,
                                                     frames))(who, move, prey)
    else:
        quick = jnp.full(pool, -1, jnp.int32)
    deep = used & (quick < 0)
    # the readings left, packed to the front (the pool's order otherwise kept)
    order = jnp.argsort(~deep, stable=True)

    def read(w, m, q, on):
        return ladder_lib.read(size, p.board[w], p.chain[w], me[w], m, q, depth, steps, on)

    args = (who[order], move[order], prey[order], deep[order])
    if mode == "map":
        read_ = jax.lax.map(lambda x: read(*x), args, batch_size=map_batch)
    else:
        read_ = jax.vmap(read)(*args)
    works = jnp.zeros(pool, bool).at[order].set(read_)
    works = used & jnp.where(deep, works, quick == 1)
    return jnp.zeros((b, a), bool).at[who, move].max(works)


def planes(size: int, p: Positions, ranks: int = RANKS, ladder: str = "auto",
           ladder_limit: int = 8, ladder_pool: int | None = None,
           ladder_depth: int | None = None, ladder_steps: int | None = None,
           dtype=jnp.float32, ladder_bits: jax.Array | None = None) -> jax.Array:
    """[B, H, W, C] ``dtype``: ``go.features.features``'s planes of a batch of
    positions (the same numbers; ``ladder="none"``: the ladder plane zero).
    ``ladder_bits`` uint32[B, W]: the ladder plane known (``ladder_table``),
    not read."""
    if ladder not in LADDER_MODES:
        raise ValueError(f"ladder must be one of {LADDER_MODES}, got {ladder!r}")
    base, legal = jax.vmap(functools.partial(base_planes, size, ranks=ranks))(p)
    if ladder_bits is not None:
        base = base.at[..., LADDER_CHANNEL].set(unpack(ladder_bits, size * size))
    elif ladder != "none":
        lad = ladders(size, p, legal, ladder, ladder_limit, ladder_pool, ladder_depth,
                      ladder_steps)
        base = base.at[..., LADDER_CHANNEL].set(lad & legal)
    return base.astype(dtype).reshape(base.shape[0], size, size, -1)


def features(rules: Rules, state: State, ranks: int = RANKS, **kwargs) -> jax.Array:
    """float32[H, W, C]: ``planes`` of one ``State`` (no batch axis), a drop-in
    for ``go.features.features``."""
    p = jax.tree.map(lambda x: x[None], of_state(rules, state))
    return planes(rules.size, p, ranks, **kwargs)[0]


# --- drawing examples ---------------------------------------------------------------


def draw(key: jax.Array, s: Store, games: int, per_game: int) -> tuple[jax.Array, jax.Array]:
    """(game int32[games], ply int32[games, per_game]): ``games`` games drawn in
    proportion to their examples, ``per_game`` examples uniform within each."""
    k_game, k_pos = jax.random.split(key)
    e = s.examples.shape[0]
    anchor = s.examples[jax.random.randint(k_game, (games,), 0, e)]
    game = (jnp.searchsorted(s.offsets, anchor, side="right") - 1).astype(jnp.int32)
    lo, hi = s.first[game], s.first[game + 1]
    u = jax.random.uniform(k_pos, (games, per_game))
    pick = lo[:, None] + jnp.minimum((u * (hi - lo)[:, None]).astype(jnp.int32),
                                     (hi - lo - 1)[:, None])
    ply = s.examples[pick] - s.offsets[game][:, None]
    return game, ply.astype(jnp.int32)


def examples_at(rules: Rules, s: Store, game: jax.Array, ply: jax.Array, length: int,
                ranks: int = RANKS, **kwargs) -> tuple[jax.Array, Positions, jax.Array]:
    """(planes [G * K, H, W, C], Positions, target int32[G * K]) of the
    positions before ``ply`` int32[G, K] of ``game`` int32[G] (each game
    replayed once, ``length`` plies)."""
    g, k = ply.shape
    actions = game_moves(s, game, length)
    before, hashes = replay(rules, actions, None if s.setup is None else s.setup[game])
    local = jnp.repeat(jnp.arange(g), k)
    flat = ply.reshape(-1)
    rank = None
    if s.rank is not None:
        rank = s.rank[game[local], before.to_play[flat, local]]
    p = positions(before, hashes, local, flat, rank)
    target = actions[local, flat]
    if s.ladder is not None:
        kwargs = {**kwargs, "ladder_bits": s.ladder[s.offsets[game[local]] + flat]}
    return planes(rules.size, p, ranks, **kwargs), p, target


def ladder_table(s: Store, size: int, length: int, games: int = 8, **kwargs) -> np.ndarray:
    """uint32[N, W]: the ladder plane (``planes``' channel 26, ``kwargs`` its
    ladder settings) of the position before every stored move, as bitsets
    (``pack``), to keep in ``Store.ladder`` (48 bytes a 19x19 position): the
    plane is then looked up, not read, in every batch. ``games`` games are
    replayed at a time, each through all its ``length`` plies (the last call
    padded: one compilation)."""
    g_all = int(s.offsets.shape[0]) - 1
    words = (size * size + 31) // 32
    rules = replay_rules(size)
    bare = s._replace(ladder=None)

    @jax.jit
    def chunk(game):
        ply = jnp.broadcast_to(jnp.arange(length), (games, length))
        x, _, _ = examples_at(rules, bare, game, ply, length, 0, dtype=jnp.uint8, **kwargs)
        bits = jax.vmap(pack)(x[..., LADDER_CHANNEL].reshape(games * length, -1) > 0)
        return bits.reshape(games, length, words)

    offsets = np.asarray(s.offsets)
    out = np.zeros((int(offsets[-1]), words), np.uint32)
    for first in range(0, g_all, games):
        idx = np.minimum(np.arange(first, first + games), g_all - 1)
        bits = np.asarray(chunk(jnp.asarray(idx, jnp.int32)))
        for k, g in enumerate(range(first, min(first + games, g_all))):
            n = offsets[g + 1] - offsets[g]
            out[offsets[g]:offsets[g + 1]] = bits[k, :n]
    return out


def sample_batch(key: jax.Array, s: Store, batch_size: int, length: int, size: int = 19,
                 per_game: int = 1, ranks: int = 0, symmetries: bool = True,
                 dtype=jnp.float32, **kwargs) -> Batch:
    """``batch_size`` examples drawn uniformly over the stored positions before a
    move on the board (``draw``), ``per_game`` from each replayed game;
    ``length`` (static) >= the longest game (``longest(offsets)``); ``ranks``: 0
    (a constant plane) or 9 (``Store.rank``); ``kwargs``: ``planes``' ladder
    settings. Jit it with ``batch_size``, ``length``, ``size``, ``per_game``,
    ``ranks``, ``symmetries``, ``dtype`` and the ladder settings static."""
    if batch_size % per_game:
        raise ValueError(f"batch_size {batch_size} is not a multiple of per_game {per_game}")
    k_draw, k_sym = jax.random.split(key)
    rules = replay_rules(size)
    game, ply = draw(k_draw, s, batch_size // per_game, per_game)
    x, p, target = examples_at(rules, s, game, ply, length, ranks, dtype=dtype, **kwargs)
    games = jnp.repeat(game, per_game)
    g = jnp.zeros(batch_size, jnp.int32)
    if symmetries:
        g = symmetry.random_symmetry(k_sym, (batch_size,))
        x = jax.vmap(symmetry.transform_planes)(x, g)
        perm = jnp.asarray(symmetry.permutations(size))[g]  # [B, A]
        target = jnp.argmax(perm == target[:, None], axis=-1)
    return Batch(x, target.astype(jnp.int32), p.to_play.astype(jnp.int32), games,
                 ply.reshape(-1), g)


def random_store(size: int, games: int, plies: int, seed: int = 0, pass_p: float = 0.02):
    """(moves int16[N], offsets int64[G + 1]): random legal games (positional
    superko; a pass with probability ``pass_p``, or when nothing else is legal),
    each until two passes or ``plies`` plies: test and benchmark data."""
    rules = Rules(size, komi=0.0, max_moves=4 * size * size)

    @jax.jit
    def run(key):
        def ply(s, k):
            k1, k2 = jax.random.split(k)
            points = rules.legal_mask(s)[:-1]
            a = jax.random.categorical(k1, jnp.where(points, 0.0, -jnp.inf))
            a = jnp.where(points.any() & (jax.random.uniform(k2) > pass_p), a,
                          rules.pass_action)
            return rules.step(s, a), jnp.where(s.done, -1, a)

        def game(k):
            return jax.lax.scan(ply, rules.init(), jax.random.split(k, plies))[1]

        return jax.vmap(game)(jax.random.split(key, games))

    acts = np.asarray(run(jax.random.PRNGKey(seed)))
    kept = [a[a >= 0] for a in acts]
    return (np.concatenate(kept).astype(np.int16),
            np.concatenate([[0], np.cumsum([len(a) for a in kept])]).astype(np.int64))


@functools.cache
def sampler(length: int, size: int = 19, batch_size: int = 128, per_game: int = 1,
            ranks: int = 0, symmetries: bool = True, dtype=jnp.float32, ladder: str = "auto",
            ladder_limit: int = 8, ladder_pool: int | None = None):
    """``jax.jit(sample_batch)`` with these static settings: ``fn(key, store)``."""
    return jax.jit(functools.partial(
        sample_batch, batch_size=batch_size, length=length, size=size, per_game=per_game,
        ranks=ranks, symmetries=symmetries, dtype=dtype, ladder=ladder,
        ladder_limit=ladder_limit, ladder_pool=ladder_pool))


__all__ = ["Batch", "Positions", "Store", "after_move", "examples_at", "features",
           "game_moves", "history", "ladder_table", "ladders", "legality", "longest", "of_state",
           "planes", "positions", "random_store", "replay", "sample_batch", "sampler", "store",
           "subset"]
