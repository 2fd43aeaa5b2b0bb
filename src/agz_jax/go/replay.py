"""Games kept as move sequences on the device, and their replay.

``go.dataset`` replays SGF records on the host and stores the Table 1 planes of
every position on disk. Here games are kept as move sequences instead (the
compact store: every game's actions, ``row * size + col`` or ``size * size`` for
the pass, concatenated in ``moves`` int16[N] with ``offsets`` int64[G + 1]) and
the planes are made inside the training step (``go.sampling``, ``go.planes``).

``store(moves, offsets)`` builds the device ``Store`` once on the host
(``subset``: some games' host arrays, ``longest``: the static ``T``).
``replay`` plays games (``game_moves``), vmapped over the games, in one
``lax.scan`` over the plies, and keeps the state before each ply: by
``lean_step`` (default: ``board.place`` without the legality check and
without scatters, the same fields as ``Rules.step`` for legal games, tested)
or by ``Rules.step`` itself (``step="rules"``). ``random_store``: random legal
games, test and benchmark data.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.go.board import (
    OFF_BOARD,
    Move,
    distinct,
    neighbour_table,
    padded,
    place,
    stone,
    zobrist_table,
)
from agz_jax.go.rules import Rules, State


class Store(NamedTuple):
    """Games on the device. G games, N moves, E examples (moves on the board).

    moves int16[N] (each game's actions, concatenated), offsets int32[G + 1]
    (game g is ``moves[offsets[g]:offsets[g + 1]]``), examples int32[E] (the
    indices in ``moves`` of the moves on the board, in order), first int32[G + 1]
    (game g's examples are ``examples[first[g]:first[g + 1]]``), setup int8[G, A]
    or None (each game's starting board; None: empty boards), rank int32[G, 2] or
    None (black's and white's rank for the rank planes, 0..8 for 1..9 dan, -1
    unknown; None: unknown), ladder uint32[N, W] or None (the ladder plane of the
    position before each move, a bitset: ``go.sampling.ladder_table``; None:
    read it in every batch).
    """

    moves: jax.Array
    offsets: jax.Array
    examples: jax.Array
    first: jax.Array
    setup: jax.Array | None = None
    rank: jax.Array | None = None
    ladder: jax.Array | None = None


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


__all__ = ["Store", "game_moves", "lean_step", "longest", "random_store", "replay",
           "replay_rules", "store", "subset"]
