"""The self-play reinforcement-learning loop (paper IV.D, AlphaGo Zero's pipeline).

One iteration, each phase a jitted pure function of arrays:

1. self-play: the best net plays ``selfplay.num_games`` games against itself;
2. the games become (s, pi, z) examples with decayed z, added to the replay;
3. ``train.steps_per_iteration`` SGD steps on uniform, symmetry-augmented
   samples (each net on its own colour's positions);
4. gating (every ``gating.every`` iterations): the candidate (the trained net)
   plays the best net; it becomes the best if its score reaches
   ``gating.threshold``;
5. every ``eval.every`` iterations: the best net (with search) against a
   uniformly random player.

The host loop only sequences these and writes checkpoints and metrics; the
whole state lives in ``RunState`` and is checkpointed after every iteration,
so a killed run resumes exactly where it stopped: same seed and config on the
same backend give the same metrics, resumed or not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.base import clock
from agz_jax.config import files
from agz_jax.config.schema import Config
from agz_jax.config.sections import SearchConfig
from agz_jax.game.gomoku import Rules
from agz_jax.match import arena
from agz_jax.nets.networks import Networks, make_networks
from agz_jax.search.searcher import Searcher
from agz_jax.training import parallel, replay
from agz_jax.training.selfplay import make_continuous, make_selfplay, to_examples
from agz_jax.training.train import TrainState, init_train_state, make_train_step

TIMING_KEYS = ("time/", "speed/")


class RunState(NamedTuple):
    iteration: jax.Array  # int32[], iterations completed
    key: jax.Array  # uint32[2]
    train: TrainState  # the candidate being trained
    best: Any  # variables of the best net so far (plays self-play)
    replay: replay.Buffer
    slots: Any = ()  # continuous self-play's games in progress (selfplay.Slots); () lockstep


@dataclasses.dataclass(frozen=True)
class Components:
    config: Config
    rules: Rules
    nets: Networks
    selfplay: Callable
    ingest: Callable
    train: Callable
    gate: Callable
    evaluate: Callable
    sharder: parallel.Sharder | None = None
    start_slots: Callable | None = None  # continuous self-play: key -> Slots


def build(config: Config) -> Components:
    """The jitted phases of an iteration (compiled lazily on first call): the
    assembler of a whole run config, which hands each builder its sections.

    Each phase runs over the device mesh of ``config.parallel`` (see
    ``agz_jax.training.parallel``): games and training examples split over devices,
    everything else replicated. Raises ConfigError, before compiling, if the
    global batches do not split evenly over the devices.
    """
    rules = Rules(config.game.size, config.game.rule)
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    gamma = config.decay.gamma
    searcher = Searcher.of(rules, nets, search=config.search, decay=config.decay)
    mesh = parallel.make_mesh(config.parallel)
    config.check_devices(mesh.size)
    sharder = parallel.Sharder(mesh)
    openings = files.opening_set(config)
    selfplay_args = dict(search=config.search, decay=config.decay, selfplay=config.selfplay,
                         openings=config.openings, shard=sharder.constrain)
    if config.selfplay.continuous:
        start_slots, play = make_continuous(rules, nets, **selfplay_args)
    else:
        start_slots, play = None, make_selfplay(rules, nets, **selfplay_args)
    step = make_train_step(nets, config.train)
    tcfg = config.train

    def ingest(buffer, traj, final):
        return replay.add(buffer, to_examples(traj, final, gamma))

    def train_step(state: TrainState, buffer: replay.Buffer, key):
        # The batch [N, B, ...] is split over devices along B; the replicated
        # parameters' gradients are summed across devices by GSPMD's all-reduce.
        batch = sharder.constrain(replay.sample(buffer, key, tcfg.batch_size), 1)
        return step(state, batch)

    g = config.gating

    def gate_players(variables):
        """(candidate, best) players of the gating match, for ``variables`` = both nets."""
        return tuple(arena.mcts_player(searcher, v, num_simulations=g.num_simulations,
                                       move_cfg=config.selfplay) for v in variables)

    def gate(candidate, best, key):
        return arena.play_match(rules, *gate_players((candidate, best)), key, g.num_games,
                                openings=openings)

    def gate_compact(candidate, best, key):
        return arena.play_match_compact(rules, gate_players, (candidate, best), key,
                                        g.num_games, chunk=g.chunk, openings=openings)

    def evaluate(best, key):
        """The best net against a uniformly random player: with search, and raw
        (the policy's argmax, no search; Maddison et al.'s "network alone")."""
        e = config.eval
        k_search, k_raw = jax.random.split(key)
        rnd = arena.random_player(rules)
        a = arena.mcts_player(searcher, best, num_simulations=e.num_simulations)
        raw = arena.policy_player(rules, nets, best)
        return (arena.play_match(rules, a, rnd, k_search, e.num_games, openings=openings),
                arena.play_match(rules, raw, rnd, k_raw, e.num_games, openings=openings))

    rep = sharder.replicated
    if config.selfplay.continuous:
        # Slots [B, ...] split over devices; the replay (updated in the scan) replicated.
        # The slots and the replay are donated: the scan updates them in place.
        play_fn = jax.jit(play, out_shardings=(sharder.batch(0), rep, rep, sharder.batch(1)),
                          donate_argnums=(1, 2))
        start_fn = jax.jit(start_slots, out_shardings=sharder.batch(0))
    else:
        play_out = (sharder.batch(1), sharder.batch(0), rep)  # Trajectory [T, B], State, stats
        play_fn, start_fn = jax.jit(play, out_shardings=play_out), None
    gate_fn = gate_compact if g.chunk else jax.jit(gate, out_shardings=rep)
    return Components(config, rules, nets, play_fn,
                      jax.jit(ingest, out_shardings=rep), jax.jit(train_step, out_shardings=rep),
                      gate_fn, jax.jit(evaluate, out_shardings=rep), sharder, start_fn)


def init_state(comps: Components) -> RunState:
    config = comps.config
    key = jax.random.PRNGKey(config.seed)
    key, init_key = jax.random.split(key)
    train_state = jax.jit(lambda k: init_train_state(comps.nets, config.train, k))(init_key)
    buffer = replay.init_for(comps.nets, comps.rules, config.replay.capacity)
    slots = ()
    if comps.start_slots is not None:
        # A key of its own, so that the lockstep runs' keys stay what they were.
        slots = comps.start_slots(jax.random.fold_in(init_key, 1))
    state = RunState(jnp.int32(0), key, train_state, train_state.variables, buffer, slots)
    return comps.sharder.replicate(state) if comps.sharder else state


def run_iteration(comps: Components, state: RunState) -> tuple[RunState, dict]:
    """One iteration; returns the new state and its metrics (plain floats)."""
    config = comps.config
    key, k_play, k_train, k_gate, k_eval = jax.random.split(state.key, 5)
    metrics: dict[str, float] = {}
    it = int(state.iteration) + 1

    t0 = clock.running()
    slots = state.slots
    if config.selfplay.continuous:
        slots, buffer, stats, _ = comps.selfplay(state.best, slots, state.replay, k_play)
        stats = jax.device_get(stats)
    else:
        traj, final, stats = comps.selfplay(state.best, k_play)
        stats = jax.device_get(stats)
    t_play = clock.running() - t0
    metrics.update(selfplay_metrics(stats, t_play, search=config.search))
    if not config.selfplay.continuous:
        buffer = comps.ingest(state.replay, traj, final)
    t0 = clock.running()
    trained = bool(np.all(np.asarray(buffer.size) >= config.train.min_replay))
    train_state = state.train
    if trained:
        # One jitted step per call: XLA:CPU runs convolution gradients inside a
        # rolled loop (lax.scan / fori_loop) about 10x slower than the same step
        # called on its own (measured: 40 steps of a 9x9 double net took 147 s
        # in a scan, ~15 s as separate calls), and a step is long enough that
        # the host dispatch costs nothing.
        for i, k in enumerate(jax.random.split(k_train, config.train.steps_per_iteration)):
            train_state, m = comps.train(train_state, buffer, k)
            if i == 0:
                first = m
        metrics.update(train_metrics(first, m))
    metrics["time/train_s"] = clock.running() - t0
    metrics["train/trained"] = float(trained)
    metrics["replay/size"] = float(np.min(np.asarray(buffer.size)))

    best = state.best
    if not config.gating.enabled:
        best = train_state.variables
    elif trained and it % config.gating.every == 0:
        t0 = clock.running()
        result = arena.score(comps.gate(train_state.variables, state.best, k_gate))
        metrics["time/gating_s"] = clock.running() - t0
        accepted = result.score >= config.gating.threshold
        metrics["gating/score"] = result.score
        metrics["gating/accepted"] = float(accepted)
        if accepted:
            best = train_state.variables

    last_iteration = it == config.iterations
    if config.eval.every and (it % config.eval.every == 0 or last_iteration):
        metrics.update(evaluate(comps, best, k_eval))

    iteration = jnp.int32(it)
    if comps.sharder is not None:  # a global array, as every other input of a phase
        iteration = comps.sharder.replicate(iteration)
    new_state = RunState(iteration, key, train_state, best, buffer, slots)
    return new_state, metrics


def selfplay_metrics(stats: dict, seconds: float, *, search: SearchConfig) -> dict:
    """``selfplay/*``, ``speed/*`` and ``time/selfplay_s`` of one run's self-play
    phase (``stats``: its scalars on the host; ``seconds``: the phase's running
    time, ``agz_jax.base.clock``; ``search``: the run's search section)."""
    moves, searched = int(stats["moves"]), int(stats["searched"])
    return {**{f"selfplay/{k}": float(v) for k, v in stats.items()},
            "selfplay/wasted": 1.0 - moves / max(searched, 1),
            "time/selfplay_s": seconds,
            "speed/games_per_s": float(stats["games"]) / seconds,
            "speed/moves_per_s": moves / seconds,
            # New simulations only: a search from a reused subtree runs fewer.
            "speed/sims_per_s": moves * (search.num_simulations
                                         - float(stats.get("reused_visits", 0.0))) / seconds}


def train_metrics(first: dict, last: dict) -> dict:
    """``train/first_*`` and ``train/*``: one run's first and last step metrics,
    averaged over its nets."""
    return {**{f"train/first_{k}": float(np.mean(v)) for k, v in first.items()},
            **{f"train/{k}": float(np.mean(v)) for k, v in last.items()}}


def evaluate(comps: Components, variables, key) -> dict:
    """Match metrics of ``variables`` against a uniformly random player."""
    t0 = clock.running()
    with_search, raw = comps.evaluate(variables, key)
    metrics = {}
    for name, result in (("vs_random", with_search), ("policy_vs_random", raw)):
        s = arena.score(result)
        metrics[f"eval/{name}_score"] = s.score
        metrics[f"eval/{name}_low"] = s.low
        metrics[f"eval/{name}_wins"] = float(s.wins)
        metrics[f"eval/{name}_games"] = float(s.games)
    metrics["time/eval_s"] = clock.running() - t0
    return metrics


def initial_evaluation(comps: Components, state: RunState) -> dict:
    """Iteration 0: the untrained net against random, the baseline of learning."""
    return evaluate(comps, state.best, jax.random.fold_in(state.key, 0))


def params_hash(state: RunState) -> str:
    """sha256 over every array of the trained and the best variables (dtype, shape,
    bytes, in tree order): equal hashes mean bit-identical nets."""
    h = hashlib.sha256()
    for leaf in jax.tree.leaves((state.train.variables, state.best)):
        a = np.asarray(leaf)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


# The main job's loop (agz_jax.training.driver.loop) adds three timings to iteration i's
# metrics line. Every time here is running time (``agz_jax.base.clock``): wall time less
# any time the process was stopped (kill -STOP, Ctrl-Z), which STOPPED_S logs
# apart. ITERATION_S: the running time from the start of iteration i to its line
# (every phase and the host's work between them). PREVIOUS_CHECKPOINT_S: the
# seconds the loop spent on checkpoint i-1, which it saves after line i-1 (absent
# when this process saved none before iteration i: a resumed run's first line).
# Iteration i's own checkpoint cannot be in its line: the line is written before
# the checkpoint so that a run killed at any moment has logged every iteration its
# checkpoints hold (lines past the last checkpoint are dropped on resume,
# ``MetricsLog``); a line written after the commit would be lost by a kill
# between the two. Together the two keys of line i cover the loop's wall time
# from the end of line i-1 to line i.
ITERATION_S = "time/iteration_s"
PREVIOUS_CHECKPOINT_S = "time/previous_checkpoint_s"
STOPPED_S = "time/stopped_s"  # in none of the times above (0.0 when it ran throughout)


def wall_seconds(line: dict) -> float:
    """A metrics line's wall time, stops left out (lines logged before the stopped
    time was logged, late on 2026-11-27, include them): ``time/iteration_s`` plus
    ``time/previous_checkpoint_s`` where the main job logged them, else (older
    logs, iteration 0's evaluation, other loops) the sum of the phases'
    ``time/*_s`` (``time/stopped_s`` left out)."""
    if ITERATION_S in line:
        return line[ITERATION_S] + line.get(PREVIOUS_CHECKPOINT_S, 0.0)
    return sum(v for k, v in line.items()
               if k.startswith("time/") and k.endswith("_s") and k != STOPPED_S)


def selfplay_share(lines: list[dict]) -> float | None:
    """Self-play's share of the wall time of the iterations whose lines carry
    ``time/iteration_s``: the sum of their ``time/selfplay_s`` over the sum of
    their ``wall_seconds`` (checkpoints included); None if no line has it."""
    timed = [m for m in lines if ITERATION_S in m]
    if not timed:
        return None
    return sum(m["time/selfplay_s"] for m in timed) / sum(wall_seconds(m) for m in timed)


def deterministic(metrics: dict) -> dict:
    """The metrics that must be identical across runs of one seed (no timings)."""
    return {k: v for k, v in metrics.items() if not k.startswith(TIMING_KEYS)}


class MetricsLog:
    """``metrics.jsonl`` (one line per iteration) and TensorBoard event files."""

    def __init__(self, run_dir: Path, keep_through: int, write: bool = True):
        self.path = run_dir / "metrics.jsonl"
        self._write = write  # False: another process (process 0) writes this log
        # On resume, drop lines of iterations the checkpoint does not contain.
        if write and self.path.exists():
            lines = [ln for ln in self.path.read_text().splitlines() if ln.strip()]
            kept = [ln for ln in lines if json.loads(ln)["iteration"] <= keep_through]
            self.path.write_text("".join(ln + "\n" for ln in kept))
        self._tb = None
        self._tb_dir = run_dir / "tb"

    def write(self, iteration: int, metrics: dict) -> None:
        if not self._write:
            return
        with self.path.open("a") as f:
            f.write(json.dumps({"iteration": iteration, **metrics}, sort_keys=True) + "\n")
        if self._tb is None:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(str(self._tb_dir))
        for k, v in metrics.items():
            if np.isfinite(v):
                self._tb.add_scalar(k, v, iteration)
        self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()

    def read(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(ln) for ln in self.path.read_text().splitlines() if ln.strip()]
