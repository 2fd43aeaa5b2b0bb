"""The bench's other sections: training, the NumPy baseline, one position's
search (``position``), the mentor, a matmul and sharded self-play over devices.
The self-play sections are ``agz_jax.studies.bench_search``'s, the inputs and
timers ``bench_inputs``'. ``experiments.bench`` runs them in sections;
``agz_jax.studies.bench_report`` prints their results.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.config.schema import SearchConfig, TrainConfig
from agz_jax.game.gomoku import Rules, State
from agz_jax.nets.networks import Networks, PolicyValueNet
from agz_jax.search import baseline
from agz_jax.search.searcher import Searcher
from agz_jax.studies.bench_inputs import (
    GAMMA,
    best_time,
    compile_timed,
    log,
    make_moves,
    midgame_positions,
    random_buffer,
    repeated,
    to_state,
)
from agz_jax.training import replay
from agz_jax.training.train import init_train_state, make_train_step


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


def position_model(size: int, seed: int, rule: str = "freestyle"):
    """The shipped model of ``rule`` (``models/default``; ``models/renju``
    under renju) when ``size`` is 15; else its architecture and search
    settings on a ``size`` board, untrained."""
    from pathlib import Path

    from agz_jax.nets import models
    from agz_jax.nets.networks import make_networks

    shipped = models.load("renju" if rule == "renju" else "default")
    if size == shipped.rules.size:
        return shipped
    config = shipped.config.replace(**{"game.size": size, "openings.path": ""})
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    return models.Model(name=f"untrained {size}x{size}", path=Path("."), config=config,
                        rules=Rules(size, config.game.rule), nets=nets,
                        variables=jax.jit(nets.init)(jax.random.PRNGKey(seed)))


def _batch_rates(model, recurrent_fn, states: State, repeats: int) -> tuple[float, float]:
    """Evaluations/s of the net alone and of ``recurrent_fn`` on ``states [B]``,
    many calls in one jitted loop (each the best of ``repeats + 1`` runs)."""
    batch = states.to_play.shape[0]
    reps = max(4, 256 // batch)
    obs = model.nets.observe(model.rules, states)
    net, _ = compile_timed(repeated(model.nets.evaluate, reps), model.variables, obs,
                           states.to_play)
    net_s = best_time(lambda: net(model.variables, obs, states.to_play), repeats + 1)
    actions = jnp.argmax(states.board == 0, axis=-1).astype(jnp.int32)

    def expand(variables, states):
        def body(_, acc):  # acc (never < 0) chains the calls: none is hoisted
            board = jnp.where(acc < 0, 0, states.board).astype(states.board.dtype)
            step, _ = recurrent_fn(variables, None, actions, states._replace(board=board))
            return acc + jnp.sum(jnp.abs(step.value)) + 1.0
        return jax.lax.fori_loop(0, reps, body, jnp.float32(0.0))

    fn, _ = compile_timed(expand, model.variables, states)
    expand_s = best_time(lambda: fn(model.variables, states), repeats + 1)
    return batch * reps / net_s, batch * reps / expand_s


def bench_position(position: baseline.Position, mixed: State, args, repeats: int) -> dict:
    """One position's search on this machine's CPUs: ``engine.Engine`` (PUCT with
    the model's c_puct and forced moves, a tree of ``--position-capacity``)
    growing one tree from ``position``, ``--position-sims`` simulations a
    search, one leaf a step (plain; and without transpositions, each position
    of the tree evaluated once), two trees in two threads (``threads=2``,
    root parallelism, the simulations split between them) and K leaves a step
    (``--leaves``: one batched net call a step, virtual loss); each engine
    compiled first, the searches interleaved (plain, two trees, K1, K2, ...,
    plain, ...) and each the best of
    ``repeats``, so that they compare under the same load.

    And what bounds the leaves' batching: the net alone (``Networks.evaluate``)
    and a whole expansion (the search's ``recurrent_fn``: a move, the net, the
    forced moves, the backup's values) at each batch size of ``--batches``,
    evaluations/s, on positions of both colours to move.

    And the plain and two-tree searches again on a position of a game's
    opening (``opening_state``: on 15x15 the first of ``rapfi15``, 3 stones,
    the first position the engine searches as white in the outside
    matches; the ``opening_*`` keys): the random stones of ``position``
    repeat many positions in a tree, an opening few, so its net is
    evaluated at more of the simulations."""
    from agz_jax.play import engine

    model = position_model(args.size, args.seed)
    out: dict = {"model": model.name, "capacity": args.position_capacity,
                 "simulations": args.position_sims, "stones": int(position.num_moves)}
    recurrent_fn = Searcher.of(model.rules, model.nets, search=model.config.search,
                               decay=model.config.decay).recurrent_fn()
    for batch in args.batches:
        log(f"position: the net alone and a whole expansion, batch {batch}")
        states = jax.tree.map(lambda x, n=batch: jnp.resize(x, (n,) + x.shape[1:]), mixed)
        net, expand = _batch_rates(model, recurrent_fn, states, repeats)
        out[f"net_evals_per_s_{batch}"], out[f"expand_evals_per_s_{batch}"] = net, expand
    rules = model.rules
    state = engine.make_state(rules, position.board, position.to_play, position.last_action)
    engines = {}
    for name, leaves, threads, transpositions in (
            ("plain", 0, 1, True), ("plain_without_transpositions", 0, 1, False),
            ("trees_2", 0, 2, True), *((f"leaves_{k}", k, 1, False) for k in args.leaves)):
        log(f"position: the engine, {leaves or 'one'} {'leaves' if leaves > 1 else 'leaf'} a "
            f"step in {threads} tree{'s' if threads > 1 else ''}"
            f"{'' if transpositions else ', without transpositions'}")
        # The search alone: the host's VCF reading (Engine(vcf=True)) is not timed here.
        e = engine.Engine(model, max_simulations=args.position_capacity, chunk=64,
                          algorithm="puct", reuse=False, leaves=leaves, seed=args.seed,
                          vcf=False, threads=threads, transpositions=transpositions)
        out[f"{name}_compile_s"] = e.warmup(rules)
        engines[name] = e
    opening = opening_state(rules)
    searches = [(name, e, state) for name, e in engines.items()]
    searches += [(f"opening_{name}", engines[name], opening) for name in ("plain", "trees_2")]
    best = {name: 0.0 for name, _, _ in searches}
    transposed = {}
    for _ in range(repeats + 1):
        for name, e, where in searches:
            e.forget()
            a = e.analyse(rules, where, simulations=args.position_sims)
            best[name] = max(best[name], a.simulations / a.elapsed)
            transposed[name] = e.transposed()  # of its first tree: the evaluations saved
    for name, rate in best.items():
        out[f"{name}_sims_per_s"] = rate
    out["transposed_fraction"] = transposed["plain"]
    out["opening_transposed_fraction"] = transposed["opening_plain"]
    out["opening_stones"] = int(opening.num_moves)
    out["transpositions_speedup"] = best["plain"] / best["plain_without_transpositions"]
    out["trees_2_speedup"] = best["trees_2"] / best["plain"]
    out["best_speedup"] = max(best.values()) / best["plain"]
    return out


def bench_rule_position(rule: str, args, repeats: int) -> dict:
    """One position's search under ``rule``, as ``bench_position``'s plain
    engine (one tree, PUCT with the model's c_puct, the host's VCF reading
    off) with the rule's shipped model (``position_model``), on the position
    after the first canonical renju opening (three stones at the centre);
    the best of ``repeats + 1`` searches of ``--position-sims``."""
    from agz_jax.game import openings
    from agz_jax.play import engine

    model = position_model(args.size, args.seed, rule)
    e = engine.Engine(model, max_simulations=args.position_capacity, chunk=64,
                      algorithm="puct", reuse=False, seed=args.seed, vcf=False)
    rules = e.rules(rule)
    e.warmup(rules)
    state = rules.from_moves(openings.renju_canonical(rules.size)[0])
    best = 0.0
    for _ in range(repeats + 1):
        e.forget()
        a = e.analyse(rules, state, simulations=args.position_sims)
        best = max(best, a.simulations / a.elapsed)
    return {"model": model.name, "sims_per_s": best}


OPENING = ("rapfi15", 0)
"""The opening set and index of ``bench_position``'s game position on 15x15."""


def opening_state(rules: Rules) -> State:
    """The position after ``OPENING``'s stones (on another board, after the
    first of the canonical renju openings, three stones at its centre)."""
    from agz_jax.game import openings

    name, index = OPENING
    moves = (openings.load(name, rules.size)[index] if rules.size == 15
             else openings.renju_canonical(rules.size)[0])
    return rules.from_moves(moves)


def bench_mentor(rules: Rules, games: int, levels, seed: int) -> dict:
    """Mentor-vs-mentor games in one jitted batch (play_match), per level."""
    from agz_jax.game.mentor import Mentor
    from agz_jax.match import arena

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

    from agz_jax.training import parallel

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
