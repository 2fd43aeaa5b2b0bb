"""The bench's measurements: its inputs (random mid-game positions, a random
replay buffer) and one function per thing timed (self-play search and the net
alone, lockstep against continuous self-play, bf16, forced moves, training, the
NumPy baseline, the mentor, a matmul, sharded self-play). ``experiments.bench``
runs them in sections; ``agz_jax.studies.bench_report`` prints their results.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.config.schema import SearchConfig, SelfPlayConfig, TrainConfig
from agz_jax.game.gomoku import Rules, State, played_at_from_last
from agz_jax.game.tactics import search_moves
from agz_jax.nets.networks import Networks, PolicyValueNet, cast_params
from agz_jax.search import baseline
from agz_jax.search.searcher import Searcher, mask_logits, temperature
from agz_jax.training import replay
from agz_jax.training.train import init_train_state, make_train_step

GAMMA = 0.95
MODES = {"single": 1, "double": 2}
"""The two modes: a single net, and Double Networks."""
FORCED = ("forced_moves", "answer_threats", "answer_four_threes", "threat_values")
"""The forced-move options the ``forced`` section measures, each adding to the last."""

ROUTING_STEPS = 32
"""Search steps of each continuous self-play run the ``routing`` section times
(8 with ``--quick``)."""

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


def bench_search(rules, nets, variables, states, args, repeats: int, reps: int,
                 forward_states: State | None = None, **search_options) -> dict:
    """Self-play moves from ``states`` and the net alone (``nets.evaluate`` on
    ``forward_states``, default ``states``: a batch with both colours to move
    costs Double Networks more than a batch of one, ``agz_jax.nets.routing``);
    ``search_options``: ``SearchConfig`` fields, e.g. ``forced_moves=True``.

    Both are compiled ahead of time (so even a first run is compile-free) and
    timed alternately, fwd / self-play / fwd / ... / fwd, each the best of its
    runs, so that the overhead ratio compares runs made under the same load.
    """
    cfg = SearchConfig(num_simulations=args.sims, **search_options)
    key = jax.random.PRNGKey(args.seed)
    forward_states = states if forward_states is None else forward_states
    obs, to_play = nets.observe(rules, forward_states), forward_states.to_play
    play, compile_s = compiled_once(("moves", rules, nets, cfg, args.moves),
                                    make_moves(rules, nets, cfg, args.moves), variables, key,
                                    states)
    # The net alone as the search runs it: in cfg.dtype, its params cast once.
    cast = cast_params(variables, cfg.dtype)
    evaluate = functools.partial(nets.evaluate, dtype=cfg.dtype)
    fwd, _ = compiled_once(("forward", nets, cfg.dtype, reps), repeated(evaluate, reps), cast,
                           obs, to_play)
    jax.block_until_ready(fwd(cast, obs, to_play))
    fwd_times, play_times = [], []
    for i in range(2 * repeats + 1):
        if i % 2:
            play_times.append(best_time(lambda: play(variables, key, states), 1))
        else:
            fwd_times.append(best_time(lambda: fwd(cast, obs, to_play), 1) / reps)
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


def selfplay_setup(args):
    """(config, nets, variables, source) of the self-play sections: double nets
    and Gumbel with ``--selfplay-sims`` over ``--selfplay-games`` continuous
    slots; on 15x15 ``models/default``'s nets and the ``balanced15`` openings,
    on other boards untrained nets from the empty board."""
    from agz_jax.config.schema import Config, GameConfig, NetConfig
    from agz_jax.nets import models
    from agz_jax.training.run import make_networks

    config = Config(game=GameConfig(size=args.size), net=NetConfig(double=True),
                    search=SearchConfig(algorithm="gumbel", num_simulations=args.selfplay_sims),
                    selfplay=SelfPlayConfig(num_games=args.selfplay_games, continuous=True))
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    variables = jax.jit(nets.init)(jax.random.PRNGKey(args.seed))
    source = "untrained double nets, empty board"
    if args.size == 15:
        model = models.load("default")
        config = config.replace(**{"net": dataclasses.asdict(model.config.net),
                                   "openings.path": "balanced15"})
        nets = make_networks(config.net, board_size=config.game.size, features=config.features)
        variables = model.variables
        source = "models/default's nets, balanced15 openings"
    return config, nets, variables, source


def bench_routing(args, repeats: int, reps: int, mixed: State) -> dict:
    """Double Networks routed (``Networks.route``: each position through its own
    net, the default) against plain (both nets on every position), at the
    ``selfplay`` section's settings (``selfplay_setup``):

    * continuous self-play, ``ROUTING_STEPS`` search steps from the same fresh
      slots each time;
    * the net alone on ``mixed`` (mid-game positions, both colours to move).

    Both are compiled first and timed alternately, plain / routed / plain / ...,
    each the best of its runs.
    """
    from agz_jax.training.selfplay import make_continuous

    config, nets, variables, source = selfplay_setup(args)
    steps = 8 if args.quick else ROUTING_STEPS
    config = config.replace(**{"selfplay.steps": steps})
    rules, key = Rules(args.size), jax.random.PRNGKey(args.seed)
    games = args.selfplay_games
    obs = nets.observe(rules, mixed)
    plays, fwds, first_s = {}, {}, {}
    for route in (False, True):
        routed = dataclasses.replace(nets, route=route)
        init, play = make_continuous(rules, routed, search=config.search, decay=config.decay,
                                     selfplay=config.selfplay, openings=config.openings)
        buffer = replay.init_for(routed, rules, 4 * games * steps)
        # Fresh slots and replay for every call (the call donates them).
        plays[route] = functools.partial(_play_fresh, jax.jit(play, donate_argnums=(1, 2)),
                                         variables, init(key), buffer, key)
        t0 = time.perf_counter()
        plays[route]()
        first_s[route] = time.perf_counter() - t0
        fwd, _ = compile_timed(repeated(routed.evaluate, reps), variables, obs, mixed.to_play)
        fwds[route] = functools.partial(fwd, variables, obs, mixed.to_play)
    play_s, fwd_s = {False: [], True: []}, {False: [], True: []}
    for _ in range(repeats):
        for route in (False, True):
            play_s[route].append(best_time(plays[route], 1))
            fwd_s[route].append(best_time(fwds[route], 1) / reps)
    positions = games * steps
    out = {"source": source, "games": games, "sims": args.selfplay_sims, "steps": steps,
           "mixed_white": float(jnp.mean(mixed.to_play == 1))}
    for route, name in ((False, "plain"), (True, "routed")):
        out[f"{name}_useful_sims_per_s"] = positions * args.selfplay_sims / min(play_s[route])
        out[f"{name}_evals_per_s"] = obs.shape[0] / min(fwd_s[route])
        out[f"{name}_first_call_s"] = first_s[route]
    out["selfplay_speedup"] = out["routed_useful_sims_per_s"] / out["plain_useful_sims_per_s"]
    out["evals_speedup"] = out["routed_evals_per_s"] / out["plain_evals_per_s"]
    return out


def _play_fresh(play, variables, slots, buffer, key):
    """One continuous self-play call on copies of ``slots`` and ``buffer``."""
    copy = lambda tree: jax.tree.map(jnp.copy, tree)  # noqa: E731
    return jax.block_until_ready(play(variables, copy(slots), copy(buffer), key))


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
    from agz_jax.training.selfplay import make_continuous, make_selfplay

    games, sims = args.selfplay_games, args.selfplay_sims
    config, nets, variables, source = selfplay_setup(args)
    rules = Rules(args.size)
    key = jax.random.PRNGKey(args.seed)

    lock = jax.jit(make_selfplay(rules, nets, search=config.search, decay=config.decay,
                                 selfplay=config.selfplay, openings=config.openings))
    jax.block_until_ready(lock(variables, key))
    t0 = time.perf_counter()
    _, _, stats = jax.block_until_ready(lock(variables, key))
    lock_s = time.perf_counter() - t0
    stats = jax.device_get(stats)
    steps = int(stats["searched"]) // games
    useful = int(stats["moves"])

    config = config.replace(**{"selfplay.steps": steps})
    init, play = make_continuous(rules, nets, search=config.search, decay=config.decay,
                                 selfplay=config.selfplay, openings=config.openings)
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


def bench_bf16(rules: Rules, states: State, mixed: State, args, repeats: int, reps: int
               ) -> dict:
    """bfloat16 against float32 search inference (``search.dtype``), double nets:
    ``models/default``'s when ``--size`` is 15, else untrained ones.

    Speed: ``bench_search`` in each dtype (self-play moves from ``states`` and
    the net alone, PUCT, ``--sims``), compile excluded. Agreement
    (``dtype_agreement``) on ``states`` and ``mixed`` together, so that both
    nets answer.
    """
    from agz_jax.nets import models

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


def position_model(size: int, seed: int):
    """``models/default`` when ``size`` is 15; else its architecture and search
    settings on a ``size`` board, untrained."""
    from pathlib import Path

    from agz_jax.nets import models
    from agz_jax.nets.networks import make_networks

    default = models.load("default")
    if size == default.rules.size:
        return default
    config = default.config.replace(**{"game.size": size, "openings.path": ""})
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
    search, one leaf a step (plain), two trees in two threads (``threads=2``,
    root parallelism, the simulations split between them) and K leaves a step
    (``--leaves``: one batched net call a step, virtual loss); each engine
    compiled first, the searches interleaved (plain, two trees, K1, K2, ...,
    plain, ...) and each the best of
    ``repeats``, so that they compare under the same load.

    And what bounds the leaves' batching: the net alone (``Networks.evaluate``)
    and a whole expansion (the search's ``recurrent_fn``: a move, the net, the
    forced moves, the backup's values) at each batch size of ``--batches``,
    evaluations/s, on positions of both colours to move."""
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
    for name, leaves, threads in (("plain", 0, 1), ("trees_2", 0, 2),
                                  *((f"leaves_{k}", k, 1) for k in args.leaves)):
        log(f"position: the engine, {leaves or 'one'} {'leaves' if leaves > 1 else 'leaf'} a "
            f"step in {threads} tree{'s' if threads > 1 else ''}")
        # The search alone: the host's VCF reading (Engine(vcf=True)) is not timed here.
        e = engine.Engine(model, max_simulations=args.position_capacity, chunk=64,
                          algorithm="puct", reuse=False, leaves=leaves, seed=args.seed,
                          vcf=False, threads=threads)
        out[f"{name}_compile_s"] = e.warmup(rules)
        engines[name] = e
    best = dict.fromkeys(engines, 0.0)
    for _ in range(repeats + 1):
        for name, e in engines.items():
            e.forget()
            a = e.analyse(rules, state, simulations=args.position_sims)
            best[name] = max(best[name], a.simulations / a.elapsed)
    for name, rate in best.items():
        out[f"{name}_sims_per_s"] = rate
    out["trees_2_speedup"] = best["trees_2"] / best["plain"]
    out["best_speedup"] = max(best.values()) / best["plain"]
    return out


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
