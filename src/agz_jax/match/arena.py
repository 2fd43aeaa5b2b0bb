"""Matches between two players, in one jitted scan, with statistics.

A *player* is a pure function ``act(key, states [G]) -> actions int32[G]``.
``play_match`` plays ``num_games`` (even) games: player A is black in the first
half and white in the second. Since all games move in lockstep, at every ply
exactly one half has A to move; each player acts once per ply on its half, so
a match costs what one player's games cost, not twice that.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.config.schema import SelfPlayConfig
from agz_jax.game import openings as opening_sets
from agz_jax.game.gomoku import Rules, State
from agz_jax.nets import features
from agz_jax.nets.networks import Networks
from agz_jax.search.searcher import Searcher

Player = Callable[[jax.Array, State], jax.Array]


class MatchResult(NamedTuple):
    """winner int32[G] (-1 draw), a_black bool[G], length int32[G], moves int32[T, G]."""

    winner: jax.Array
    a_black: jax.Array
    length: jax.Array
    moves: jax.Array


def random_player(rules: Rules) -> Player:
    """Uniform over legal moves."""

    def act(key, states):
        legal = jax.vmap(rules.legal_mask)(states)
        logits = jnp.where(legal, 0.0, -jnp.inf)
        return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)

    return act


def mcts_player(searcher: Searcher, variables, *, num_simulations: int,
                move_cfg: SelfPlayConfig | None = None, rank=None) -> Player:
    """Search without self-play's root noise; the move by ``Searcher.play``'s
    rule with ``move_cfg``'s policy (PUCT: its temperature; Gumbel: the root's
    Gumbel noise where that temperature is above 0), or the search's own
    choice if None.

    ``rank`` (an int or int32[], for nets with rank planes) asks the nets to play
    at that strength: the roots get it, so every node of the tree does; None
    keeps the states' own rank.
    """

    def act(key, states):
        states = states if rank is None else features.with_rank(states, rank)
        return searcher.play(variables, key, states, move_cfg=move_cfg,
                             num_simulations=num_simulations)[0]

    return act


def policy_player(rules: Rules, nets: Networks, variables, rank=None) -> Player:
    """The raw network, argmax over legal moves, no search; ``rank`` as in
    ``mcts_player``."""

    def act(key, states):
        del key
        states = states if rank is None else features.with_rank(states, rank)
        obs = nets.observe(rules, states)
        logits, _ = nets.evaluate(variables, obs, states.to_play)
        legal = jax.vmap(rules.legal_mask)(states)
        return jnp.argmax(jnp.where(legal, logits, -jnp.inf), axis=-1).astype(jnp.int32)

    return act


def _ply(rules: Rules, act_a: Player, act_b: Player, opening_plies: int, start_ply: int = 0):
    """``body(states [G], (t, key)) -> (states, played int32[G])``: one ply of a
    match whose first half has A as black and second half A as white.

    The games started with ``start_ply`` stones on the board (an opening set's
    length), so at ply ``t`` the same colour is to move in every unfinished
    game and exactly one half has A to move; each player acts once, on its half.
    """
    centre = rules.size // 2
    rows, cols = np.divmod(np.arange(rules.num_actions), rules.size)
    box = jnp.asarray((abs(rows - centre) <= 2) & (abs(cols - centre) <= 2))

    def both_act(states, t, key):
        half = states.done.shape[0] // 2
        k_a, k_b, k_open = jax.random.split(key, 3)
        first, second = jax.tree.map(lambda x: x[:half], states), jax.tree.map(
            lambda x: x[half:], states)
        a_first = ((t + start_ply) % 2) == 0  # black to move: A moves in the first half
        pick = lambda x, y: jax.tree.map(lambda u, v: jnp.where(a_first, u, v), x, y)
        a_states, b_states = pick(first, second), pick(second, first)
        a_act, b_act = act_a(k_a, a_states), act_b(k_b, b_states)
        acts = jnp.concatenate([jnp.where(a_first, a_act, b_act),
                                jnp.where(a_first, b_act, a_act)])
        if opening_plies:
            legal = jax.vmap(rules.legal_mask)(states)
            opening = jax.random.categorical(
                k_open, jnp.where(legal & box, 0.0, -jnp.inf), axis=-1).astype(jnp.int32)
            acts = jnp.where(t < opening_plies, opening, acts)
        return acts

    def body(states, inp):
        t, key = inp
        # Once every game is over the players (searches) are skipped: stepping
        # a finished game is a no-op whatever the action.
        acts = jax.lax.cond(jnp.any(~states.done), both_act,
                            lambda s, t, k: jnp.zeros(s.done.shape[0], jnp.int32),
                            states, t, key)
        played = jnp.where(states.done, -1, acts)
        return jax.vmap(rules.step)(states, acts), played

    return body


def _start(rules: Rules, openings: np.ndarray | None, key: jax.Array, num_games: int):
    """A match's first states [G], their openings' moves int32[M, G], M, and the
    key of its plies. The openings are drawn with ``split(key)[1]`` and the plies
    get ``split(key)[0]``; a match without openings keeps ``key`` for its plies."""
    if openings is None:
        states = jax.vmap(lambda _: rules.init())(jnp.arange(num_games))
        return states, jnp.zeros((0, num_games), jnp.int32), 0, key
    ply_key, open_key = jax.random.split(key)
    states, index = opening_sets.paired_states(rules, openings, open_key, num_games)
    return states, jnp.asarray(openings)[index].T, int(openings.shape[1]), ply_key


def play_match(rules: Rules, act_a: Player, act_b: Player, key: jax.Array, num_games: int,
               opening_plies: int = 0, openings: np.ndarray | None = None) -> MatchResult:
    """Play ``num_games`` games of A against B, colours alternated by halves.

    ``openings`` (an opening set int32[K, M], ``agz_jax.game.openings``): every game
    starts from one of them, each opening drawn for a game of the first half is
    also played in the second, so with the colours swapped. ``opening_plies``
    further first moves are uniform random in the central 5x5 box (so that
    deterministic players still play distinct games). One ``lax.scan`` over the
    board's empty points (jittable): every ply costs a full batch until the
    last game ends; ``play_match_compact`` drops finished games instead.
    ``moves`` int32[A, G] (A = board points) holds each game from the empty
    board: the opening's stones, then the players' moves, then -1.
    """
    if num_games % 2:
        raise ValueError(f"num_games must be even, got {num_games}")
    half = num_games // 2
    states, opened, start_ply, key = _start(rules, openings, key, num_games)
    body = _ply(rules, act_a, act_b, opening_plies, start_ply)
    plies = rules.num_actions - start_ply
    final, moves = jax.lax.scan(body, states, (jnp.arange(plies), jax.random.split(key, plies)))
    moves = jnp.concatenate([opened, moves])
    a_black = jnp.arange(num_games) < half
    return MatchResult(final.winner, a_black, final.num_moves, moves)


@functools.lru_cache(maxsize=64)
def _chunk_fn(rules: Rules, players, opening_plies: int, chunk: int, start_ply: int = 0):
    """The jitted chunk of plies (compiled once per batch size); cached, so that
    matches with the same ``players`` function reuse its compilations."""

    @jax.jit
    def run_chunk(variables, states, t0, ks):
        body = _ply(rules, *players(variables), opening_plies, start_ply)
        return jax.lax.scan(body, states, (t0 + jnp.arange(chunk), ks))

    return run_chunk


def drop_compiled() -> None:
    """Drop every compiled program: the chunked matches' (``_chunk_fn``) and
    JAX's caches. XLA's code for the CPU lives in memory maps, and a process
    that plays match after match with new players (a ladder, a sweep) reaches
    the kernel's limit (``vm.max_map_count``; LLVM's "Cannot allocate memory")
    unless it drops them."""
    _chunk_fn.cache_clear()
    jax.clear_caches()


def _take(tree, index: np.ndarray):
    """Rows ``index`` of every array of a batched pytree."""
    index = jnp.asarray(index)
    return jax.tree.map(lambda x: x[index], tree)


def _bucket(n: int, cap: int) -> int:
    """The smallest power of two >= n, at most ``cap``."""
    return min(cap, 1 << max(0, n - 1).bit_length())


def play_match_compact(rules: Rules, players: Callable[[object], tuple[Player, Player]],
                       variables, key: jax.Array, num_games: int, opening_plies: int = 0,
                       chunk: int = 8,
                       on_chunk: Callable[[int, MatchResult, np.ndarray], None] | None = None,
                       openings: np.ndarray | None = None) -> MatchResult:
    """``play_match`` for long matches: the same plies, run ``chunk`` at a time,
    and finished games dropped between chunks.

    In one scan the longest game sets the cost of every game: a 15x15 match
    whose games last 20 to 60 plies runs all 225 plies at full batch if one game
    is drawn. Here, after each jitted chunk of plies, the unfinished games of
    each half are gathered into a batch of the next power of two (both halves
    padded to the same size with finished games, which stepping leaves alone),
    so a batch size compiles once and later plies cost what their live games
    cost. The per-ply keys are ``play_match``'s; a player whose move does not
    depend on the other games of its batch (an argmax of its own position's
    scores) plays exactly the games of ``play_match``; a batch-keyed sampler
    draws other, equally random moves once the batch has shrunk.

    ``players(variables) -> (act_a, act_b)`` builds the two players inside the
    jitted chunk, so that ``variables`` (any pytree: the nets' weights) are
    arguments of the compiled chunk rather than constants baked into it; the
    compilations are kept per ``players`` function, so pass the same one to
    play several matches.

    Runs on the host between chunks (one device round trip per ``chunk``
    plies), so it is not itself jittable. ``on_chunk(ply, result, finished)``
    is called after each chunk with the plies played so far, the match so far
    and bool[G], the games over (progress, running scores). Returns numpy
    arrays.
    """
    if num_games % 2:
        raise ValueError(f"num_games must be even, got {num_games}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    half = num_games // 2
    states, opened, start_ply, key = _start(rules, openings, key, num_games)
    total = rules.num_actions - start_ply
    n_chunks = -(-total // chunk)
    # play_match's per-ply keys; the plies past the board's points (every game
    # is over by then) get keys of their own.
    keys = jax.random.split(key, total)
    extra = n_chunks * chunk - total
    if extra:
        keys = jnp.concatenate([keys, jax.random.split(jax.random.fold_in(key, total), extra)])
    run_chunk = _chunk_fn(rules, players, opening_plies, chunk, start_ply)
    opened = np.asarray(opened)
    slots = np.arange(num_games)  # the game in each slot; -1: padding
    winner = np.full(num_games, -1, np.int32)
    length = np.zeros(num_games, np.int32)
    moves = np.full((n_chunks * chunk, num_games), -1, np.int32)

    finished = np.zeros(num_games, bool)
    a_black = np.arange(num_games) < half

    def record(states, slots) -> np.ndarray:
        """Store the real slots' results; the batch's done flags."""
        w, n, d = jax.device_get((states.winner, states.num_moves, states.done))
        real = slots >= 0
        winner[slots[real]] = w[real]
        length[slots[real]] = n[real]
        finished[slots[real]] = d[real]
        return d

    for c in range(n_chunks):
        t0 = c * chunk
        states, played = run_chunk(variables, states, t0, keys[t0:t0 + chunk])
        played = np.asarray(played)
        real = slots >= 0
        moves[t0:t0 + chunk, slots[real]] = played[:, real]
        done = record(states, slots)
        if on_chunk is not None:
            on_chunk(min(t0 + chunk, total),
                     MatchResult(winner.copy(), a_black, length.copy(),
                                 np.concatenate([opened, moves[:total]])), finished.copy())
        size = len(slots) // 2
        live = [np.flatnonzero(~done[h * size:(h + 1) * size] & real[h * size:(h + 1) * size])
                + h * size for h in (0, 1)]
        new_size = _bucket(max(len(live[0]), len(live[1]), 1), size)
        if not live[0].size and not live[1].size:
            break
        if new_size == size:
            continue
        picked = []
        for h in (0, 1):
            idx = live[h]
            pad = np.full(new_size - len(idx), h * size + np.argmax(done[h * size:(h + 1) * size]))
            picked.append((idx, pad))
        index = np.concatenate([np.concatenate(p) for p in picked])
        new_slots = np.concatenate([np.concatenate([slots[idx], np.full(len(pad), -1)])
                                    for idx, pad in picked])
        states = _take(states, index)
        slots = new_slots
    return MatchResult(winner, a_black, length, np.concatenate([opened, moves[:total]]))


class Score(NamedTuple):
    games: int
    wins: int
    draws: int
    losses: int
    wins_as_black: int
    wins_as_white: int
    score: float  # (wins + draws / 2) / games
    low: float  # 95% interval of the score
    high: float
    elo: float  # Elo difference implied by the score (A minus B)


def score(result: MatchResult) -> Score:
    """A's results with a 95% Wilson interval of the score and the implied Elo."""
    winner = np.asarray(result.winner)
    a_black = np.asarray(result.a_black)
    a_colour = np.where(a_black, 0, 1)
    wins = winner == a_colour
    draws = winner < 0
    losses = ~wins & ~draws
    n = len(winner)
    s = float((wins.sum() + 0.5 * draws.sum()) / n)
    low, high = wilson(s, n)
    return Score(
        games=n, wins=int(wins.sum()), draws=int(draws.sum()), losses=int(losses.sum()),
        wins_as_black=int((wins & a_black).sum()), wins_as_white=int((wins & ~a_black).sum()),
        score=s, low=low, high=high, elo=elo(s),
    )


def wilson(s: float, n: int) -> tuple[float, float]:
    """The 95% Wilson interval of a score ``s`` over ``n`` games."""
    z = 1.96
    centre = (s + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(s * (1 - s) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # The interval contains s; the clamps undo rounding at s = 0 or 1.
    return float(min(max(0.0, centre - half), s)), float(max(min(1.0, centre + half), s))


def elo(s: float) -> float:
    """Elo difference for an expected score s (clipped to +-800 at 0 or 1)."""
    if s <= 0:
        return -800.0
    if s >= 1:
        return 800.0
    return float(max(-800.0, min(800.0, -400.0 * math.log10(1.0 / s - 1.0))))
