"""Speed of self-play search, the net, training, and the in-repo NumPy baseline.

    python -m experiments.bench                      # the paper's net, 64 games x 64 sims
    python -m experiments.bench --games 128 --sims 32
    python -m experiments.bench --quick --json       # small and fast (used by a test)
    python -m experiments.bench --sections search,selfplay,bf16   # some sections only

The bench runs in sections (``--sections``, default all, always in this order):
search, train, baseline, strategies, forced, selfplay, bf16, devices, mentor.
Each section's table lines go to stderr as soon as it finishes; the final table
(or ``--json`` report) holds the sections that ran.

For the paper's net (``PolicyValueNet`` defaults: 32 filters, 2 residual blocks)
on a ``--size`` board, with a single net (num_nets=1) and Double Networks
(num_nets=2), it measures:

* self-play: a jitted ``lax.scan`` of ``--moves`` moves (``Searcher.run`` with root
  noise, ``Searcher.choose`` with the paper's temperature, ``rules.step``) from a
  batch of ``--games`` random mid-game positions; simulations/s and moves/s,
  compile time excluded (compiled ahead of time and reported separately);
* the net alone: ``Networks.evaluate`` on the same batch size, evaluations/s
  (many evaluations inside one jitted loop, so dispatch is not counted);
* search overhead = time per move / ((sims + 1) x time of one batched evaluation):
  1.0 means the search costs nothing beyond its network calls;
* achieved network GFLOP/s (``networks.flops_per_position``) next to a large
  float32 matmul's on the same machine;
* training: the SGD step of ``train.py`` (every net on its own batch) with
  replay sampling and symmetry augmentation, ``--train-batch`` positions per
  net; steps/s and compile time;
* the baseline: ``agz_jax.baseline``, the same PUCT search in plain Python +
  NumPy, one leaf and one batch-1 jitted net call at a time, run for about
  ``--baseline-seconds`` per mode; its simulations/s and the JAX speed-up;
* self-play on 1 and on 4 devices (``--devices 1,4``): the same moves with the
  batch of games split over a mesh (``agz_jax.parallel``), each device count
  in a subprocess with ``XLA_FLAGS=--xla_force_host_platform_device_count=N``
  (on a CPU these devices share its cores: the point is that the sharded code
  path runs and what it costs, not a speed-up);
* Double Networks evaluation strategies on a mixed-colour batch, each written
  out here so the table does not depend on what ``Networks.evaluate`` does
  today: both nets under ``jax.vmap`` over the stacked params then select; a
  per-position parameter gather (``vmap`` of ``apply_one``, ``in_axes=(0, 0)``);
  both nets one after the other (a Python loop over the two param sets) then
  select; next to ``Networks.evaluate`` itself and a single net;
* bfloat16 against float32 search inference (``search.dtype``), on
  ``models/default``'s nets when ``--size`` is 15 (else untrained double nets):
  net evaluations/s and self-play simulations/s in each dtype, and how far
  bfloat16's policies and values are from float32's on the bench's positions.

Sections: ``search`` (matmul, self-play and the net alone, single and double),
``train``, ``baseline`` (its speed-up needs ``search`` too), ``strategies``,
``forced`` (self-play with forced moves; their cost is relative to ``search``'s
double nets, measured here if ``search`` did not run), ``selfplay`` (lockstep
against continuous), ``bf16``, ``devices`` (nothing when ``--devices`` is
empty), ``mentor``.

Every timing is the best of a few runs (the machine may be shared). No
persistent compilation cache is used, since compile time is reported.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax import baseline, replay
from agz_jax.config import SearchConfig, SelfPlayConfig, TrainConfig
from agz_jax.gomoku import Rules, State, played_at_from_last
from agz_jax.networks import Networks, PolicyValueNet, cast_params, flops_per_position
from agz_jax.search import Searcher, mask_logits, temperature
from agz_jax.tactics import search_moves
from agz_jax.train import init_train_state, make_train_step

GAMMA = 0.95
MODES = {"single": 1, "double": 2}

SECTIONS = ("search", "train", "baseline", "strategies", "forced", "selfplay", "bf16",
            "devices", "mentor")
"""Every section, in the order they run."""

# Every number of the JSON's "results" (dotted paths) that a section reports; all
# are positive and finite. Devices' keys depend on --devices (``result_keys``).
SEARCH_KEYS = ("selfplay_compile_s", "selfplay_s", "sims_per_s", "moves_per_s",
               "forward_ms", "forward_evals_per_s", "search_overhead",
               "net_gflops", "net_vs_matmul")
TRAIN_KEYS = ("train_compile_s", "train_step_s", "train_steps_per_s")
BASELINE_KEYS = ("baseline_sims_per_s", "baseline_simulations")
FORCED = ("forced_moves", "answer_threats", "answer_four_threes", "threat_values")
SECTION_KEYS = {
    "search": (*(f"{mode}.{k}" for mode in MODES for k in SEARCH_KEYS), "matmul.gflops"),
    "train": tuple(f"{mode}.{k}" for mode in MODES for k in TRAIN_KEYS),
    "baseline": tuple(f"{mode}.{k}" for mode in MODES for k in BASELINE_KEYS),
    "strategies": tuple(f"double_strategies.{k}_evals_per_s"
                        for k in ("evaluate", "vmap", "gather", "sequential", "single_net")),
    "forced": (*(f"{name}.{k}" for name in FORCED for k in ("sims_per_s", "cost")),
               *(f"{name}.search_moves_ms" for name in FORCED[:3])),
    "selfplay": tuple(f"selfplay.{k}" for k in (
        "lockstep_useful_sims_per_s", "lockstep_positions_per_s",
        "continuous_useful_sims_per_s", "continuous_positions_per_s", "speedup")),
    "bf16": tuple(f"bf16.{k}" for k in (
        "float32_evals_per_s", "bfloat16_evals_per_s", "evals_speedup",
        "float32_sims_per_s", "bfloat16_sims_per_s", "sims_speedup",
        "top1_agreement", "policy_tv_mean", "value_diff_max", "value_diff_mean")),
    "devices": (),
    "mentor": ("mentor.0.games_per_s", "mentor.0.moves_per_s", "mentor.1.games_per_s",
               "mentor.1.chunked_games_per_s"),
}
SPEEDUP_KEYS = tuple(f"{mode}.speedup_vs_baseline" for mode in MODES)
"""Reported when both ``search`` and ``baseline`` ran."""
RESULT_KEYS = (*(k for keys in SECTION_KEYS.values() for k in keys), *SPEEDUP_KEYS)


def result_keys(sections, devices=()) -> tuple[str, ...]:
    """The keys of ``RESULT_KEYS`` that a run of ``sections`` reports (and the
    devices section's, one per count of ``devices``)."""
    keys = [k for name in sections for k in SECTION_KEYS[name]]
    if "search" in sections and "baseline" in sections:
        keys += SPEEDUP_KEYS
    if "devices" in sections:
        keys += [f"devices.{n}.sims_per_s" for n in devices]
    return tuple(keys)


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


# ---------------------------------------------------------------------------- inputs


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


# ------------------------------------------------------------------- the functions


def vmap_evaluate(nets: Networks):
    """Both nets on the whole batch under ``jax.vmap`` over the stacked params
    (``in_axes=(0, None)``), then each position's net selected."""

    def evaluate(variables, obs, to_play):
        logits, value = jax.vmap(nets.apply_one, in_axes=(0, None))(variables, obs)
        idx, batch = nets.net_index(to_play), jnp.arange(obs.shape[0])
        return logits[idx, batch], value[idx, batch]

    return evaluate


def gather_evaluate(nets: Networks):
    """Per-position params: ``vmap`` of ``apply_one`` over (params[to_play], obs)."""

    def evaluate(variables, obs, to_play):
        per = jax.tree.map(lambda v: v[nets.net_index(to_play)], variables)
        logits, value = jax.vmap(lambda v, o: nets.apply_one(v, o[None]))(per, obs)
        return logits[:, 0], value[:, 0]

    return evaluate


def sequential_evaluate(nets: Networks):
    """Each net on the whole batch, one after the other (a Python loop), then select."""

    def evaluate(variables, obs, to_play):
        outs = [nets.apply_one(jax.tree.map(lambda v, i=i: v[i], variables), obs)
                for i in range(nets.num_nets)]
        idx = nets.net_index(to_play)
        logits = sum(jnp.where((idx == i)[:, None], o[0], 0.0) for i, o in enumerate(outs))
        value = sum(jnp.where(idx == i, o[1], 0.0) for i, o in enumerate(outs))
        return logits, value

    return evaluate


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


def time_evaluate(evaluate, variables, obs, to_play, reps: int, repeats: int) -> float:
    """Seconds per batched evaluation (compile excluded)."""
    fn, _ = compile_timed(repeated(evaluate, reps), variables, obs, to_play)
    jax.block_until_ready(fn(variables, obs, to_play))
    return best_time(lambda: fn(variables, obs, to_play), repeats) / reps


# ------------------------------------------------------------------------ measures


def bench_search(rules, nets, variables, states, args, repeats: int, reps: int,
                 **search_options) -> dict:
    """Self-play moves and the net alone (``nets.evaluate`` on the root batch);
    ``search_options``: ``SearchConfig`` fields, e.g. ``forced_moves=True``.

    Both are compiled ahead of time (so even a first run is compile-free) and
    timed alternately, fwd / self-play / fwd / ... / fwd, each the best of its
    runs, so that the overhead ratio compares runs made under the same load.
    """
    cfg = SearchConfig(num_simulations=args.sims, **search_options)
    key = jax.random.PRNGKey(args.seed)
    obs = nets.observe(rules, states)
    play, compile_s = compile_timed(make_moves(rules, nets, cfg, args.moves), variables, key,
                                    states)
    # The net alone as the search runs it: in cfg.dtype, its params cast once.
    evaluate = functools.partial(nets.evaluate, dtype=cfg.dtype)
    cast = cast_params(variables, cfg.dtype)
    fwd, _ = compile_timed(repeated(evaluate, reps), cast, obs, states.to_play)
    jax.block_until_ready(fwd(cast, obs, states.to_play))
    fwd_times, play_times = [], []
    for i in range(2 * repeats + 1):
        if i % 2:
            play_times.append(best_time(lambda: play(variables, key, states), 1))
        else:
            fwd_times.append(best_time(lambda: fwd(cast, obs, states.to_play), 1) / reps)
    seconds, forward = min(play_times), min(fwd_times)
    final = play(variables, key, states)
    moves = int(jnp.sum(final.num_moves - states.num_moves))
    sims = args.games * args.moves * args.sims  # searched, finished games or not
    per_sim = seconds / args.moves / (args.sims + 1)
    return {"selfplay_compile_s": compile_s, "selfplay_s": seconds,
            "sims_per_s": sims / seconds, "moves_per_s": moves / seconds,
            "forward_ms": forward * 1e3, "forward_evals_per_s": args.games / forward,
            "search_overhead": per_sim / forward,
            "search_extra_ms_per_sim": (per_sim - forward) * 1e3}


def bench_selfplay(args) -> dict:
    """Lockstep against continuous self-play at equal settings (the main job's two
    ``selfplay`` modes): the same double nets, batch ``--selfplay-games``,
    ``--selfplay-sims`` Gumbel simulations per move.

    On 15x15 the nets are ``models/default``'s and the games start from the
    ``balanced15`` openings (realistic game lengths); on other boards untrained
    nets from the empty board. Lockstep plays one batch of games to the end of
    its longest game; continuous then runs as many search steps as lockstep
    ran. Useful work counts the positions of games in progress only, so
    lockstep's wasted fraction is 1 - (its games' positions) / (batch x its
    longest game). Each is compiled first and timed on a second call.
    """
    from agz_jax import models
    from agz_jax.config import Config, GameConfig, NetConfig
    from agz_jax.run import make_networks
    from agz_jax.selfplay import make_continuous, make_selfplay

    games, sims = args.selfplay_games, args.selfplay_sims
    config = Config(game=GameConfig(size=args.size), net=NetConfig(double=True),
                    search=SearchConfig(algorithm="gumbel", num_simulations=sims),
                    selfplay=SelfPlayConfig(num_games=games, continuous=True))
    nets = make_networks(config)
    variables = jax.jit(nets.init)(jax.random.PRNGKey(args.seed))
    source = "untrained double nets, empty board"
    if args.size == 15:
        model = models.load("default")
        config = config.replace(**{"net": dataclasses.asdict(model.config.net),
                                   "openings.path": "balanced15"})
        nets, variables = make_networks(config), model.variables
        source = "models/default's nets, balanced15 openings"
    rules = Rules(args.size)
    key = jax.random.PRNGKey(args.seed)

    lock = jax.jit(make_selfplay(config, rules, nets))
    jax.block_until_ready(lock(variables, key))
    t0 = time.perf_counter()
    _, _, stats = jax.block_until_ready(lock(variables, key))
    lock_s = time.perf_counter() - t0
    stats = jax.device_get(stats)
    steps = int(stats["searched"]) // games
    useful = int(stats["moves"])

    config = config.replace(**{"selfplay.steps": steps})
    init, play = make_continuous(config, rules, nets)
    play = jax.jit(play, donate_argnums=(1, 2))
    fresh = lambda: (init(key), replay.init_for(nets, rules, 4 * games * steps))  # noqa: E731
    jax.block_until_ready(play(variables, *fresh(), key))
    slots, buffer = fresh()
    t0 = time.perf_counter()
    _, buffer, cstats, _ = jax.block_until_ready(play(variables, slots, buffer, key))
    cont_s = time.perf_counter() - t0
    cstats = jax.device_get(cstats)
    positions = games * steps
    return {
        "source": source, "games": games, "sims": sims, "steps": steps,
        "lockstep_s": lock_s, "continuous_s": cont_s,
        "lockstep_useful_sims_per_s": useful * sims / lock_s,
        "lockstep_positions_per_s": useful / lock_s,
        "lockstep_wasted": 1.0 - useful / (games * steps),
        "lockstep_games": int(stats["games"]),
        "lockstep_mean_length": float(stats["mean_length"]),
        "continuous_useful_sims_per_s": positions * sims / cont_s,
        "continuous_positions_per_s": positions / cont_s,
        "continuous_games": int(cstats["games"]),
        "continuous_positions_in_replay": int(np.sum(np.asarray(buffer.size))),
        "speedup": (positions / cont_s) / (useful / lock_s),
    }


def selfplay_lines(r: dict) -> list[str]:
    if not r:
        return []
    return [
        f"Self-play, lockstep against continuous ({r['source']}; {r['games']} games, "
        f"gumbel {r['sims']} sims, {r['steps']} search steps each):",
        f"  lockstep:   {r['lockstep_useful_sims_per_s']:>10,.0f} useful simulations/s, "
        f"{r['lockstep_positions_per_s']:>8,.1f} positions/s; {r['lockstep_wasted']:.0%} of "
        f"its searches were on finished games ({r['lockstep_games']} games, mean length "
        f"{r['lockstep_mean_length']:.1f})",
        f"  continuous: {r['continuous_useful_sims_per_s']:>10,.0f} useful simulations/s, "
        f"{r['continuous_positions_per_s']:>8,.1f} positions/s; {r['continuous_games']} games "
        f"finished, {r['continuous_positions_in_replay']} positions in the replay; "
        f"{r['speedup']:.2f}x lockstep's positions/s",
        "",
    ]


def bench_bf16(rules: Rules, states: State, mixed: State, args, repeats: int, reps: int
               ) -> dict:
    """bfloat16 against float32 search inference (``search.dtype``), double nets:
    ``models/default``'s when ``--size`` is 15, else untrained ones.

    Speed: ``bench_search`` in each dtype (self-play moves from ``states`` and
    the net alone, PUCT, ``--sims``), compile excluded. Agreement
    (``dtype_agreement``) on ``states`` and ``mixed`` together, so that both
    nets answer.
    """
    from agz_jax import models

    if args.size == 15:
        model = models.load("default")
        nets, variables, source = model.nets, model.variables, "models/default's nets"
    else:
        nets = Networks(PolicyValueNet(board_size=args.size), num_nets=2)
        variables = jax.jit(nets.init)(jax.random.PRNGKey(args.seed))
        source = "untrained double nets"
    out: dict = {"source": source}
    for dtype in ("float32", "bfloat16"):
        log(f"bf16: self-play and the net alone in {dtype} ({source})")
        r = bench_search(rules, nets, variables, states, args, repeats, reps, dtype=dtype)
        out.update({f"{dtype}_evals_per_s": r["forward_evals_per_s"],
                    f"{dtype}_sims_per_s": r["sims_per_s"],
                    f"{dtype}_compile_s": r["selfplay_compile_s"]})
    out["evals_speedup"] = out["bfloat16_evals_per_s"] / out["float32_evals_per_s"]
    out["sims_speedup"] = out["bfloat16_sims_per_s"] / out["float32_sims_per_s"]
    both = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), states, mixed)
    out.update(dtype_agreement(rules, nets, variables, both, "bfloat16"))
    return out


def dtype_agreement(rules: Rules, nets: Networks, variables, states: State, dtype: str
                    ) -> dict:
    """How far the nets in ``dtype`` are from float32 on positions ``states [B]``:
    the fraction whose policy argmax agrees, the mean and max total-variation
    distance 1/2 sum |p - q| of the policies (softmax of the logits masked to the
    legal moves, as the search's priors), the max and mean |value difference|."""
    obs = nets.observe(rules, states)
    legal = jax.vmap(rules.legal_mask)(states)

    @jax.jit
    def policies(variables):
        out = []
        for d in ("float32", dtype):
            logits, value = nets.evaluate(variables, obs, states.to_play, dtype=d)
            out.append((jax.nn.softmax(mask_logits(logits, legal)), value))
        return out

    (p, v), (q, w) = jax.device_get(policies(variables))
    tv, dv = 0.5 * np.abs(p - q).sum(-1), np.abs(v - w)
    return {"positions": len(v),
            "top1_agreement": float(np.mean(np.argmax(p, -1) == np.argmax(q, -1))),
            "policy_tv_mean": float(tv.mean()), "policy_tv_max": float(tv.max()),
            "value_diff_max": float(dv.max()), "value_diff_mean": float(dv.mean())}


def bf16_lines(r: dict) -> list[str]:
    if not r:
        return []
    return [
        f"bfloat16 against float32 search inference (search.dtype; {r['source']}; "
        "PUCT self-play from the bench's positions, and the net alone):",
        *(f"  {d + ':':10}{r[f'{d}_evals_per_s']:>10,.0f} net evaluations/s, "
          f"{r[f'{d}_sims_per_s']:>10,.0f} simulations/s "
          f"(self-play compile {r[f'{d}_compile_s']:.1f} s)" for d in ("float32", "bfloat16")),
        f"  bfloat16 / float32: {r['evals_speedup']:.2f}x evaluations/s, "
        f"{r['sims_speedup']:.2f}x simulations/s",
        f"  agreement on {r['positions']} positions (both colours to move): policy argmax "
        f"{r['top1_agreement']:.1%}, total variation mean {r['policy_tv_mean']:.4f} "
        f"(max {r['policy_tv_max']:.4f}), |value difference| max {r['value_diff_max']:.4f}, "
        f"mean {r['value_diff_mean']:.4f}",
        "",
    ]


def time_search_moves(rules: Rules, states: State, repeats: int, reps: int,
                      forced_moves: bool, answer_threats: bool = False,
                      answer_four_threes: bool = False) -> float:
    """Seconds of one ``search_moves`` on the whole batch (what every expanded
    node of a batched simulation pays for forced moves), ``reps`` in one loop."""

    def run(states):
        def body(_, acc):  # acc (a count, never < 0) chains the calls: none is hoisted
            board = jnp.where(acc < 0, 0, states.board).astype(states.board.dtype)
            moves = search_moves(rules, states._replace(board=board), forced_moves,
                                 answer_threats, answer_four_threes)
            return acc + jnp.sum(moves, dtype=jnp.int32)

        return jax.lax.fori_loop(0, reps, body, jnp.int32(0))

    fn, _ = compile_timed(run, states)
    jax.block_until_ready(fn(states))
    return best_time(lambda: fn(states), repeats) / reps


def bench_train(nets, args, budget: float = 8.0) -> dict:
    """One untimed step, then up to ``--train-steps`` timed ones (fewer once
    ``budget`` seconds are spent); the best step time."""
    tcfg = TrainConfig(batch_size=args.train_batch)
    step = make_train_step(nets, tcfg)
    state = jax.jit(lambda k: init_train_state(nets, tcfg, k))(jax.random.PRNGKey(args.seed))
    buffer = random_buffer(nets.num_nets, 2 * args.train_batch, args.size, args.seed)

    def train_step(state, buffer, key):  # as in run.build's train loop body
        return step(state, replay.sample(buffer, key, tcfg.batch_size))

    key = jax.random.PRNGKey(1)
    fn, compile_s = compile_timed(train_step, state, buffer, key)
    state, _ = jax.block_until_ready(fn(state, buffer, key))
    times = []
    while len(times) < args.train_steps and (not times or sum(times) < budget):
        t0 = time.perf_counter()
        state, _ = jax.block_until_ready(fn(state, buffer, key))
        times.append(time.perf_counter() - t0)
    seconds = min(times)
    return {"train_compile_s": compile_s, "train_step_s": seconds,
            "train_steps_per_s": 1.0 / seconds}


def bench_baseline(nets, variables, positions, args, budget: float) -> dict:
    """The NumPy MCTS on up to 4 of the positions, one move of each in turn, until
    ``budget`` seconds are spent (at least one move)."""
    net_fn = baseline.make_net_fn(nets, variables)
    kw = dict(num_simulations=args.sims, gamma=GAMMA, num_nets=nets.num_nets)
    net_fn(positions[0].observe(), 0)  # compile the batch-1 net
    games = list(positions[:4])
    sims = moves = 0
    seconds = 0.0
    while seconds < budget and not all(g.done for g in games):
        for i, pos in enumerate(games):
            out = baseline.play([pos], net_fn, num_moves=1, seed=args.seed + moves, **kw)
            games[i] = out["positions"][0]
            sims, moves = sims + out["simulations"], moves + out["moves"]
            seconds += out["seconds"]
    return {"baseline_sims_per_s": sims / seconds, "baseline_simulations": float(sims),
            "baseline_games": len(games), "baseline_moves": moves, "baseline_s": seconds}


def bench_mentor(rules: Rules, games: int, levels, seed: int) -> dict:
    """Mentor-vs-mentor games in one jitted batch (play_match), per level."""
    from agz_jax import arena
    from agz_jax.mentor import Mentor

    out = {}
    for level in levels:
        mentor = Mentor(rules, level)
        match = jax.jit(lambda key, m=mentor: arena.play_match(rules, m.act, m.act, key, games,
                                                                 2))
        log(f"mentor level {level}: {games} games against itself")
        t0 = time.perf_counter()
        jax.block_until_ready(match(jax.random.PRNGKey(seed)))
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = jax.block_until_ready(match(jax.random.PRNGKey(seed + 1)))
        wall = time.perf_counter() - t0
        moves = int(np.sum(np.asarray(result.length)))
        out[str(level)] = {"games_per_s": games / wall, "moves_per_s": moves / wall,
                           "mean_length": moves / games, "seconds": wall,
                           "compile_s": max(first - wall, 0.0)}
        # The same batch in chunks of 8 plies, finished games dropped between
        # chunks (play_match_compact, as the arena CLI and the imitate stage).
        # The first call compiles every batch size the games shrink through
        # (another key could shrink through others), the second is timed.
        players = lambda variables, m=mentor: (m.act, m.act)
        for _ in range(2):
            t0 = time.perf_counter()
            chunked = arena.play_match_compact(rules, players, None,
                                               jax.random.PRNGKey(seed + 1), games, 2)
            wall = time.perf_counter() - t0
        out[str(level)].update({
            "chunked_games_per_s": games / wall,
            "chunked_mean_length": float(np.mean(chunked.length))})
    return out


def matmul_gflops(n: int, repeats: int) -> float:
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
    b = jax.random.normal(jax.random.PRNGKey(1), (n, n), jnp.float32)
    f = jax.jit(jnp.dot)
    jax.block_until_ready(f(a, b))
    return 2 * n**3 / best_time(lambda: f(a, b), repeats) / 1e9


def bench_devices_worker(args) -> dict:
    """In a process with N (forced) devices: ``--moves`` self-play moves of the
    double net with the games split over all N devices; sims/s, compile excluded."""
    from jax.sharding import Mesh

    from agz_jax import parallel

    sharder = parallel.Sharder(Mesh(np.array(jax.devices()), (parallel.AXIS,)))
    rules = Rules(args.size)
    nets = Networks(PolicyValueNet(board_size=args.size), num_nets=2)
    variables = sharder.replicate(jax.jit(nets.init)(jax.random.PRNGKey(args.seed)))
    states = jax.device_put(
        to_state(midgame_positions(args.size, args.games,
                                   max(2, (args.size * args.size) // 10) // 2 * 2, args.seed)),
        sharder.batch(0))
    key = sharder.replicate(jax.random.PRNGKey(args.seed))
    moves = make_moves(rules, nets, SearchConfig(num_simulations=args.sims), args.moves)
    t0 = time.perf_counter()
    play = jax.jit(moves, out_shardings=sharder.batch(0)).lower(variables, key, states).compile()
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(play(variables, key, states))
    seconds = best_time(lambda: play(variables, key, states), 2)
    sims = args.games * args.moves * args.sims
    return {"devices": jax.device_count(), "games_per_device": args.games // jax.device_count(),
            "selfplay_compile_s": compile_s, "selfplay_s": seconds, "sims_per_s": sims / seconds}


def bench_devices(args) -> dict:
    """``bench_devices_worker`` in one subprocess per device count."""
    out = {}
    for n in args.devices:
        env = dict(os.environ)
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                            f" --xla_force_host_platform_device_count={n}").strip()
        cmd = [sys.executable, "-m", "experiments.bench", "--devices-worker", "--json",
               "--games", str(args.games), "--sims", str(args.sims), "--size", str(args.size),
               "--moves", str(args.moves), "--seed", str(args.seed), "--devices", ""]
        log(f"self-play on {n} forced host device(s) (subprocess)")
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed:\n{proc.stderr[-3000:]}")
        out[str(n)] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


# ---------------------------------------------------------------------------- main


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--games", type=int, default=None, help="games in the batch B (64)")
    p.add_argument("--sims", type=int, default=None, help="simulations per move (64)")
    p.add_argument("--size", type=int, default=None, help="board side (15)")
    p.add_argument("--moves", type=int, default=None, help="self-play moves timed (4)")
    p.add_argument("--train-batch", type=int, default=None, help="positions per net (512)")
    p.add_argument("--train-steps", type=int, default=None, help="timed train steps (3)")
    p.add_argument("--baseline-seconds", type=float, default=None,
                   help="NumPy baseline time per mode (14)")
    p.add_argument("--matmul", type=int, default=None, help="matmul side (2048)")
    p.add_argument("--mentor-games", type=int, default=None,
                   help="games in the mentor's batch, per level (16)")
    p.add_argument("--selfplay-games", type=int, default=None,
                   help="lockstep vs continuous self-play: games (64)")
    p.add_argument("--selfplay-sims", type=int, default=None,
                   help="lockstep vs continuous self-play: simulations per move (16)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true",
                   help="9x9, 8 games, 8 sims, small everything (defaults for unset flags)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--devices", default=None,
                   help="forced host device counts for sharded self-play ('1,4'; "
                   "'' skips it; --quick: '')")
    p.add_argument("--devices-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated sections to run, in the order {','.join(SECTIONS)} "
                   "whatever the order given (default: all)")
    args = p.parse_args(argv)
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown or not chosen:
        p.error(f"--sections must name some of {', '.join(SECTIONS)}, got {args.sections!r}")
    args.sections = [name for name in SECTIONS if name in chosen]
    full = dict(games=64, sims=64, size=15, moves=4, train_batch=512, train_steps=3,
                baseline_seconds=14.0, matmul=2048, mentor_games=16, selfplay_games=64,
                selfplay_sims=16)
    quick = dict(games=8, sims=8, size=9, moves=2, train_batch=64, train_steps=2,
                 baseline_seconds=0.5, matmul=512, mentor_games=2, selfplay_games=8,
                 selfplay_sims=4)
    full["devices"], quick["devices"] = "1,4", ""
    for k, v in (quick if args.quick else full).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    try:
        args.devices = [int(d) for d in args.devices.split(",") if d.strip()]
        assert all(d >= 1 for d in args.devices) and args.games % math.lcm(1, *args.devices) == 0
    except (ValueError, AssertionError):
        p.error(f"--devices must be counts >= 1 that divide --games {args.games}, "
                f"got {args.devices!r}")
    for k in ("games", "sims", "moves", "train_batch", "train_steps", "matmul", "mentor_games",
              "selfplay_games", "selfplay_sims"):
        if getattr(args, k) < 1:
            p.error(f"--{k.replace('_', '-')} must be >= 1")
    Rules(args.size)  # validates the size
    return args


class Bench:
    """What the sections share: the inputs (built once), the nets of each mode
    (made on first use) and the results so far."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rules = Rules(args.size)
        self.module = PolicyValueNet(board_size=args.size)
        self.stones = max(2, (args.size * args.size) // 10) // 2 * 2  # even: black to move
        self.positions = midgame_positions(args.size, args.games, self.stones, args.seed)
        self.states = to_state(self.positions)
        self.mixed = to_state(midgame_positions(args.size, args.games, self.stones,
                                                args.seed + 1, mixed=True))
        self.flops = flops_per_position(args.size, self.module.filters, self.module.blocks,
                                        3, self.module.value_hidden)
        self.repeats = 2  # timed runs of each (plus one more of the net alone)
        self.reps = max(4, min(64, 1024 // args.games))  # evaluations per timed forward call
        self.results: dict = {}
        self._nets: dict = {}

    def nets(self, mode: str):
        """(Networks, variables) of ``mode`` ('single' or 'double'), untrained."""
        if mode not in self._nets:
            nets = Networks(self.module, num_nets=MODES[mode])
            self._nets[mode] = nets, jax.jit(nets.init)(jax.random.PRNGKey(self.args.seed))
        return self._nets[mode]

    def config(self) -> dict:
        a = self.args
        return {"size": a.size, "filters": self.module.filters, "blocks": self.module.blocks,
                "games": a.games, "sims": a.sims, "moves": a.moves,
                "midgame_stones": self.stones, "c_puct": SearchConfig().c_puct,
                "gamma": GAMMA, "train_batch": a.train_batch,
                "flops_per_position": self.flops, "forward_reps": self.reps}


def section_search(b: Bench) -> None:
    args = b.args
    log(f"matmul {args.matmul}x{args.matmul}")
    mm = matmul_gflops(args.matmul, 5)
    b.results["matmul"] = {"n": args.matmul, "gflops": mm}
    for mode in MODES:
        nets, variables = b.nets(mode)
        log(f"{mode}: self-play {args.moves} moves x {args.games} games x {args.sims} sims, "
            "and the net alone")
        r = bench_search(b.rules, nets, variables, b.states, args, b.repeats, b.reps)
        # Useful work: one net per position, whatever the evaluation strategy runs.
        r["net_gflops"] = b.flops * r["forward_evals_per_s"] / 1e9
        r["net_vs_matmul"] = r["net_gflops"] / mm
        b.results.setdefault(mode, {}).update(r)


def section_train(b: Bench) -> None:
    for mode in MODES:
        log(f"{mode}: train step, {b.args.train_batch} positions per net")
        b.results.setdefault(mode, {}).update(bench_train(b.nets(mode)[0], b.args))


def section_baseline(b: Bench) -> None:
    for mode in MODES:
        nets, variables = b.nets(mode)
        log(f"{mode}: NumPy baseline, ~{b.args.baseline_seconds:g} s")
        r = bench_baseline(nets, variables, b.positions, b.args, b.args.baseline_seconds)
        if "sims_per_s" in b.results.get(mode, {}):  # the search section ran
            r["speedup_vs_baseline"] = b.results[mode]["sims_per_s"] / r["baseline_sims_per_s"]
        b.results.setdefault(mode, {}).update(r)


def section_strategies(b: Bench) -> None:
    log("double: evaluation strategies on a mixed-colour batch")
    nets, variables = b.nets("double")
    single = Networks(b.module, num_nets=1)
    one = jax.tree.map(lambda v: v[:1], variables)
    obs = single.observe(b.rules, b.mixed)
    t = lambda f, v: b.args.games / time_evaluate(f, v, obs, b.mixed.to_play, b.reps,
                                                  b.repeats + 1)
    b.results["double_strategies"] = {
        "evaluate_evals_per_s": t(nets.evaluate, variables),
        "vmap_evals_per_s": t(vmap_evaluate(nets), variables),
        "gather_evals_per_s": t(gather_evaluate(nets), variables),
        "sequential_evals_per_s": t(sequential_evaluate(nets), variables),
        "single_net_evals_per_s": t(single.evaluate, one),
    }


def section_forced(b: Bench) -> None:
    nets, variables = b.nets("double")
    search = lambda **options: bench_search(b.rules, nets, variables, b.states, b.args,
                                            b.repeats, b.reps, **options)
    reference = b.results.get("double", {}).get("sims_per_s")
    if reference is None:
        log("double: plain self-play (what the forced moves' cost is relative to)")
        reference = search()["sims_per_s"]
    answers = {"forced_moves": True, "answer_threats": True}
    for name, options in (("forced_moves", {"forced_moves": True}),
                          ("answer_threats", answers),
                          ("answer_four_threes", {**answers, "answer_four_threes": True}),
                          ("threat_values", {**answers, "answer_four_threes": True,
                                             "threat_values": True})):
        log(f"double: self-play with search.{name}" + (" too" if name != "forced_moves" else ""))
        forced = search(**options)
        b.results[name] = {
            "sims_per_s": forced["sims_per_s"], "selfplay_compile_s": forced["selfplay_compile_s"],
            "cost": reference / forced["sims_per_s"],
            "search_moves_ms": 1e3 * time_search_moves(
                b.rules, b.states, b.repeats, b.reps,
                **{k: v for k, v in options.items() if k != "threat_values"})}


def section_selfplay(b: Bench) -> None:
    log(f"self-play: lockstep against continuous, {b.args.selfplay_games} games x "
        f"{b.args.selfplay_sims} sims")
    b.results["selfplay"] = bench_selfplay(b.args)


def section_bf16(b: Bench) -> None:
    b.results["bf16"] = bench_bf16(b.rules, b.states, b.mixed, b.args, b.repeats, b.reps)


def section_devices(b: Bench) -> None:
    if b.args.devices:
        b.results["devices"] = bench_devices(b.args)
    else:
        log("devices: skipped (--devices is empty)")


def section_mentor(b: Bench) -> None:
    levels = (0, 1) if b.args.quick else (0, 1, 2, 3)
    b.results["mentor"] = bench_mentor(b.rules, b.args.mentor_games, levels, b.args.seed)


SECTION_FNS = {"search": section_search, "train": section_train,
               "baseline": section_baseline, "strategies": section_strategies,
               "forced": section_forced, "selfplay": section_selfplay, "bf16": section_bf16,
               "devices": section_devices, "mentor": section_mentor}
assert tuple(SECTION_FNS) == SECTIONS


def run(args: argparse.Namespace, command: str) -> dict:
    """Run the sections ``args.sections`` in order, logging each one's table
    lines as it finishes; the report of them all."""
    jax.config.update("jax_enable_compilation_cache", False)
    start = time.perf_counter()
    load_start = os.getloadavg()[0]
    b = Bench(args)
    config = b.config()
    for name in args.sections:
        t0 = time.perf_counter()
        SECTION_FNS[name](b)
        lines = section_lines(name, b.results, config)
        log("\n".join([f"section {name} done in {time.perf_counter() - t0:.0f} s", *lines]))
    return {
        "command": command,
        "sections": list(args.sections),
        "backend": jax.default_backend(),
        "device_count": jax.device_count(),
        "devices": str(jax.devices()),
        "jax_version": jax.__version__,
        "cpu_count": os.cpu_count(),
        "load_avg_1min": {"start": load_start, "end": os.getloadavg()[0]},
        "config": config,
        "results": b.results,
        "total_s": time.perf_counter() - start,
    }


def lookup(d: dict, dotted: str):
    for part in dotted.split("."):
        d = d[part]
    return d


MODE_SECTIONS = ("search", "train", "baseline")
"""The sections reported in the single-net / double-nets columns."""


def mode_lines(res: dict, c: dict, sections) -> list[str]:
    """The single-net / double-nets table: the rows of ``sections`` that ran."""
    s, d = res.get("single", {}), res.get("double", {})
    mm = res.get("matmul", {}).get("gflops", float("nan"))
    rows = [
        ("search", "self-play simulations/s", "sims_per_s", "{:,.0f}"),
        ("search", "self-play moves/s", "moves_per_s", "{:,.1f}"),
        ("search", "self-play move fn compile (s)", "selfplay_compile_s", "{:.1f}"),
        ("search", f"net evaluations/s (evaluate, B={c['games']})", "forward_evals_per_s",
         "{:,.0f}"),
        ("search", "net time per batched evaluation (ms)", "forward_ms", "{:.2f}"),
        ("search", "search overhead (target <= 1.3)", "search_overhead", "{:.2f}x"),
        ("search", "  search time beyond the net / sim (ms)", "search_extra_ms_per_sim",
         "{:.2f}"),
        ("search", "net GFLOP/s (one net per position)", "net_gflops", "{:.1f}"),
        ("search", f"  / matmul's {mm:.0f} GFLOP/s", "net_vs_matmul", "{:.0%}"),
        ("train", f"train steps/s ({c['train_batch']} per net)", "train_steps_per_s", "{:.2f}"),
        ("train", "train step compile (s)", "train_compile_s", "{:.1f}"),
        ("baseline", "NumPy baseline simulations/s", "baseline_sims_per_s", "{:,.0f}"),
        ("baseline", "speed-up vs baseline (target >= 2)", "speedup_vs_baseline", "{:.1f}x"),
    ]
    rows = [r for r in rows if r[0] in sections and r[2] in s and r[2] in d]
    if not rows:
        return []
    lines = [f"{'':38}{'single net':>12}{'double nets':>13}"]
    lines += [f"{label:38}{fmt.format(s[key]):>12}{fmt.format(d[key]):>13}"
              for _, label, key, fmt in rows]
    return [*lines, ""]


def search_notes(res: dict) -> list[str]:
    return [f"matmul {res['matmul']['n']}x{res['matmul']['n']} float32 (jitted jnp.dot): "
            f"{res['matmul']['gflops']:.1f} GFLOP/s",
            "search overhead = (time per move) / ((sims + 1) x time of one batched "
            "evaluation).", ""]


def baseline_notes(res: dict, c: dict) -> list[str]:
    s, d = res["single"], res["double"]
    return [f"NumPy baseline runs: single {s['baseline_moves']} moves of {s['baseline_games']} "
            f"games in {s['baseline_s']:.1f} s, double {d['baseline_moves']} moves of "
            f"{d['baseline_games']} games in {d['baseline_s']:.1f} s "
            f"({c['sims']} sims per move, one leaf and one batch-1 net call at a time)", ""]


def strategies_lines(st: dict, c: dict) -> list[str]:
    return [
        f"Double Networks evaluation strategies, mixed-colour batch of {c['games']} "
        "(evaluations/s):",
        *(f"  {label:56}{st[key]:>10,.0f}" for label, key in (
            ("Networks.evaluate (as in the repo now)", "evaluate_evals_per_s"),
            ("both nets under vmap over stacked params, select", "vmap_evals_per_s"),
            ("per-position param gather (vmap, in_axes=(0, 0))", "gather_evals_per_s"),
            ("both nets one after the other, select", "sequential_evals_per_s"),
            ("single net (reference: one net, no selection)", "single_net_evals_per_s"))),
        "",
    ]


def forced_lines(res: dict, c: dict) -> list[str]:
    f, t, ft, tv = (res[name] for name in FORCED)
    return [
        f"Self-play with search.forced_moves (double nets): {f['sims_per_s']:,.0f} "
        f"simulations/s, {f['cost']:.2f}x the time of plain search per simulation "
        f"(the forced moves of every node are found on the board: fives, blocks, "
        f"open and double fours; search_moves alone {f['search_moves_ms']:.2f} ms per "
        f"batch of {c['games']}).",
        f"With search.answer_threats as well: {t['sims_per_s']:,.0f} simulations/s, "
        f"{t['cost']:.2f}x (the answers to the opponent's open-four points are checked "
        f"at every node; search_moves alone {t['search_moves_ms']:.2f} ms per batch).",
        f"With search.answer_four_threes as well: {ft['sims_per_s']:,.0f} simulations/s, "
        f"{ft['cost']:.2f}x (the opponent's four-three points and their answers too; "
        f"search_moves alone {ft['search_moves_ms']:.2f} ms per batch).",
        f"With search.threat_values as well: {tv['sims_per_s']:,.0f} simulations/s, "
        f"{tv['cost']:.2f}x (every expanded node's stones are read for a forced win: "
        "five, open or double four, four-three, four then one of those).",
        "",
    ]


def section_lines(name: str, res: dict, c: dict) -> list[str]:
    """The table lines of section ``name`` (the single/double columns of its own
    rows, for the search, train and baseline sections)."""
    if name in MODE_SECTIONS:
        notes = {"search": lambda: search_notes(res),
                 "baseline": lambda: baseline_notes(res, c)}.get(name, list)
        return [*mode_lines(res, c, (name,)), *notes()]
    return {"strategies": lambda: strategies_lines(res["double_strategies"], c),
            "forced": lambda: forced_lines(res, c),
            "selfplay": lambda: selfplay_lines(res.get("selfplay", {})),
            "bf16": lambda: bf16_lines(res.get("bf16", {})),
            "devices": lambda: devices_lines(res.get("devices", {}), c),
            "mentor": lambda: mentor_lines(res.get("mentor", {}))}[name]()


def table(report: dict) -> str:
    c, res, sections = report["config"], report["results"], report["sections"]
    lines = [
        f"command: {report['command']}",
        f"jax {report['jax_version']}, backend {report['backend']}, "
        f"{report['device_count']} device(s) {report['devices']}, {report['cpu_count']} CPUs, "
        f"load avg {report['load_avg_1min']['start']:.1f} -> "
        f"{report['load_avg_1min']['end']:.1f}",
        f"net {c['size']}x{c['size']}, {c['filters']} filters, {c['blocks']} blocks "
        f"({c['flops_per_position'] / 1e6:.2f} MFLOP/position); {c['games']} games x "
        f"{c['sims']} sims, {c['moves']} moves timed from {c['midgame_stones']}-stone "
        f"positions; c_puct {c['c_puct']}, gamma {c['gamma']}",
        f"sections: {', '.join(sections)}",
        "",
        *mode_lines(res, c, sections),
    ]
    if "search" in sections:
        lines += search_notes(res)
    if "baseline" in sections:
        lines += baseline_notes(res, c)
    for name in sections:
        if name not in MODE_SECTIONS:
            lines += section_lines(name, res, c)
    lines += ["Timings are the best of a few runs, compile excluded; the machine may be "
              "shared.", f"total bench time {report['total_s']:.0f} s"]
    return "\n".join(lines)


def devices_lines(devices: dict, c: dict) -> list[str]:
    if not devices:
        return []
    lines = [f"Sharded self-play (double nets, {c['games']} games split over the devices, "
             "each count in its own process with forced host devices):"]
    for n, d in devices.items():
        lines.append(f"  {n} device(s), {d['games_per_device']} games each: "
                     f"{d['sims_per_s']:>10,.0f} simulations/s "
                     f"(compile {d['selfplay_compile_s']:.1f} s)")
    return [*lines, ""]


def mentor_lines(mentor: dict) -> list[str]:
    if not mentor:
        return []
    lines = ["Mentor (agz_jax.mentor) playing itself, one jitted batch per level:"]
    for level, m in mentor.items():
        lines.append(f"  level {level}: {m['games_per_s']:>8.2f} games/s, "
                     f"{m['moves_per_s']:>8.1f} moves/s (mean length {m['mean_length']:.1f}, "
                     f"compile {m['compile_s']:.1f} s); in chunks of 8 plies "
                     f"{m['chunked_games_per_s']:.2f} games/s "
                     f"(mean length {m['chunked_mean_length']:.1f})")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.devices_worker:
        print(json.dumps(bench_devices_worker(args)))
        return 0
    command = shlex.join(["python", "-m", "experiments.bench", *argv])
    report = run(args, command)
    for key in result_keys(args.sections, args.devices):
        v = lookup(report["results"], key)
        if not (math.isfinite(v) and v > 0):
            log(f"warning: {key} = {v}")
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
