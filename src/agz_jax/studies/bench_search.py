"""The bench's self-play sections: the search and the net alone, Double Networks
routed against plain, lockstep against continuous self-play, bfloat16, and the
forced-move options. ``experiments.bench`` runs them; ``agz_jax.studies.bench_report``
prints their results.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.config.schema import SearchConfig, SelfPlayConfig
from agz_jax.game.gomoku import Rules, State
from agz_jax.game.tactics import search_moves
from agz_jax.nets.networks import Networks, PolicyValueNet, cast_params
from agz_jax.search.searcher import mask_logits
from agz_jax.studies.bench_inputs import (
    best_time,
    compile_timed,
    compiled_once,
    log,
    make_moves,
    repeated,
)
from agz_jax.training import replay

MODES = {"single": 1, "double": 2}
"""The two modes: a single net, and Double Networks."""
FORCED = ("forced_moves", "answer_threats", "answer_four_threes", "threat_values")
"""The forced-move options the ``forced`` section measures, each adding to the last."""

ROUTING_STEPS = 32
"""Search steps of each continuous self-play run the ``routing`` section times
(8 with ``--quick``)."""


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


