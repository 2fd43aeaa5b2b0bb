"""The bench's inputs and timers: random mid-game positions and a random replay
buffer, self-play moves built as self-play builds them, and the timing helpers
every section shares (best of several calls, compile timed, each program
compiled once). ``agz_jax.studies.bench_search`` and ``bench_measures`` time
with them; ``experiments.bench`` runs the sections.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.config.schema import SearchConfig, SelfPlayConfig
from agz_jax.game.gomoku import Rules, State, played_at_from_last
from agz_jax.nets.networks import Networks
from agz_jax.search import baseline
from agz_jax.search.searcher import Searcher, temperature
from agz_jax.training import replay

GAMMA = 0.95

_T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[bench {time.perf_counter() - _T0:5.0f} s] {msg}", file=sys.stderr, flush=True)


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Best wall time of ``repeats`` calls of ``fn`` (which blocks on its result)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return min(times)


def compile_timed(fn, *args):
    """(compiled executable, seconds to trace + lower + compile)."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t0


def midgame_positions(size: int, num_games: int, stones: int, seed: int,
                      mixed: bool = False) -> list[baseline.Position]:
    """Random unfinished positions with ``stones`` stones (``+ g % 2`` if ``mixed``,
    so half the batch has white to move). Winning moves are never played."""
    rng = np.random.default_rng(seed)
    out = []
    for g in range(num_games):
        pos = baseline.Position.initial(size)
        while pos.num_moves < stones + (g % 2 if mixed else 0):
            nxt = pos.play(int(rng.choice(np.flatnonzero(pos.legal()))))
            if not nxt.done:
                pos = nxt
        out.append(pos)
    return out


def to_state(positions: list[baseline.Position]) -> State:
    """Stack NumPy positions into a batched ``gomoku.State`` [B]."""
    i32 = lambda xs: jnp.asarray(np.array(xs, np.int32))
    return State(
        board=jnp.asarray(np.stack([p.board for p in positions])),
        to_play=i32([p.to_play for p in positions]),
        last_action=i32([p.last_action for p in positions]),
        num_moves=i32([p.num_moves for p in positions]),
        winner=i32([p.winner for p in positions]),
        done=jnp.asarray(np.array([p.done for p in positions])),
        illegal=jnp.zeros(len(positions), bool),
        played_at=jnp.stack([played_at_from_last(p.board.size, p.last_action, p.num_moves)
                             for p in positions]),
        rank=jnp.zeros(len(positions), jnp.int32),
    )


def random_buffer(num_nets: int, capacity: int, size: int, seed: int) -> replay.Buffer:
    """A full replay buffer of random positions, policies and +-1 labels."""
    rng = np.random.default_rng(seed)
    a = size * size
    order = np.argsort(rng.random((num_nets, capacity, a)), axis=-1)
    stones = rng.integers(0, a // 3, (num_nets, capacity, 1))
    rank = np.argsort(order, axis=-1)  # a random permutation rank of each point
    own = (rank < stones) & (rank % 2 == 0)
    opp = (rank < stones) & (rank % 2 == 1)
    last = rank == np.maximum(stones - 1, 0)
    obs = np.stack([own, opp, last & (stones > 0)], -1).reshape(num_nets, capacity, size, size, 3)
    policy = rng.dirichlet(np.full(a, 0.3), (num_nets, capacity)).astype(np.float32)
    z = rng.choice([-1.0, 1.0], (num_nets, capacity)).astype(np.float32)
    full = jnp.full(num_nets, capacity, jnp.int32)
    return replay.Buffer(jnp.asarray(obs.astype(np.int8)), jnp.asarray(policy), jnp.asarray(z),
                         full, jnp.zeros(num_nets, jnp.int32))


def make_moves(rules: Rules, nets: Networks, search_cfg: SearchConfig, num_moves: int):
    """``moves(variables, key, states [B]) -> states``: ``num_moves`` self-play moves,
    built exactly like ``selfplay.make_selfplay``'s move (root noise, semi-stochastic
    temperature)."""
    move_cfg = SelfPlayConfig()
    searcher = Searcher(rules=rules, nets=nets, settings=search_cfg, gamma=GAMMA)

    def moves(variables, key, states):
        def body(states, key):
            search_key, move_key = jax.random.split(key)
            out = searcher.run(variables, search_key, states, explore=True)
            tau = temperature(move_cfg, states.num_moves)
            action = searcher.choose(move_key, out, states, tau=tau)
            return jax.vmap(rules.step)(states, action), None

        states, _ = jax.lax.scan(body, states, jax.random.split(key, num_moves))
        return states

    return moves


def repeated(evaluate, reps: int):
    """``reps`` evaluations in one jitted loop. Each input depends (by a vanishing
    amount) on the previous output, so XLA cannot hoist or merge them."""

    def run(variables, obs, to_play):
        def body(_, acc):
            logits, value = evaluate(variables, obs + 1e-30 * acc, to_play)
            return acc + jnp.mean(value) + jnp.mean(logits)

        return jax.lax.fori_loop(0, reps, body, jnp.float32(0.0))

    return run


_COMPILED: dict = {}


def compiled_once(what: tuple, fn, *args):
    """``compile_timed(fn, *args)``, once per process for ``what`` (hashable: the
    program's name and the settings it is built from) and the shapes of ``args``:
    the sections time the same programs again (the forced section the net alone
    beside each of its searches, bf16's float32 run the search section's
    search). The seconds are those of the one compilation."""
    leaves = jax.tree.leaves(args)
    key = (what, jax.tree.structure(args),
           tuple((np.shape(x), str(jnp.result_type(x))) for x in leaves))
    if key not in _COMPILED:
        _COMPILED[key] = compile_timed(fn, *args)
    return _COMPILED[key]


