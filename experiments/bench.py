"""Speed of self-play search, the net, training, and the in-repo NumPy baseline.

    python -m experiments.bench                      # the paper's net, 64 games x 64 sims
    python -m experiments.bench --games 128 --sims 32
    python -m experiments.bench --quick --json       # small and fast (used by a test)
    python -m experiments.bench --sections search,selfplay,bf16   # some sections only

The bench runs in sections (``--sections``, default all, always in this order):
search, train, baseline, forced, selfplay, routing, bf16, devices, mentor, position,
renju.
Each section's table lines go to stderr as soon as it finishes; the final table
(or ``--json`` report) holds the sections that ran. A bench stopped by SIGTERM
(a ``timeout``) or Ctrl-C still prints the report of the sections it finished,
names the one it was in (``stopped``), and exits with 143 or 130.

For the paper's net (``PolicyValueNet`` defaults: 32 filters, 2 residual blocks)
on a ``--size`` board, with a single net (num_nets=1) and Double Networks
(num_nets=2), it measures:

* self-play: a jitted ``lax.scan`` of ``--moves`` moves (``Searcher.run`` with root
  noise, ``Searcher.choose`` with the paper's temperature, ``rules.step``) from a
  batch of ``--games`` random mid-game positions; simulations/s and moves/s,
  compile time excluded (compiled ahead of time and reported separately);
* the net alone: ``Networks.evaluate`` on the same batch size, evaluations/s
  (many evaluations inside one jitted loop, so dispatch is not counted), on
  positions with black to move in half of them and white in the other half,
  as the leaves of a search mix them (Double Networks route each position to
  its own net, ``agz_jax.nets.routing``, so one colour alone would cost less);
* search overhead = time per move / ((sims + 1) x time of one batched evaluation):
  1.0 means the search costs nothing beyond its network calls;
* achieved network GFLOP/s (``networks.flops_per_position``) next to a large
  float32 matmul's on the same machine;
* training: the SGD step of ``train.py`` (every net on its own batch) with
  replay sampling and symmetry augmentation, ``--train-batch`` positions per
  net; steps/s and compile time;
* the baseline: ``agz_jax.search.baseline``, the same PUCT search in plain Python +
  NumPy, one leaf and one batch-1 jitted net call at a time, run for about
  ``--baseline-seconds`` per mode; its simulations/s and the JAX speed-up;
* self-play on 1 and on 4 devices (``--devices 1,4``): the same moves with the
  batch of games split over a mesh (``agz_jax.training.parallel``), each device count
  in a subprocess with ``XLA_FLAGS=--xla_force_host_platform_device_count=N``
  (on a CPU these devices share its cores: the point is that the sharded code
  path runs and what it costs, not a speed-up);
* bfloat16 against float32 search inference (``search.dtype``), on
  ``models/default``'s nets when ``--size`` is 15 (else untrained double nets):
  net evaluations/s and self-play simulations/s in each dtype, and how far
  bfloat16's policies and values are from float32's on the bench's positions.

Sections: ``search`` (matmul, self-play and the net alone, single and double),
``train``, ``baseline`` (its speed-up needs ``search`` too), ``forced``
(self-play with forced moves; their cost is relative to ``search``'s double
nets, measured here if ``search`` did not run), ``selfplay`` (lockstep against
continuous), ``routing`` (Double Networks routed, each position through its
own net, against both nets on every position: continuous self-play at the
``selfplay`` section's settings and the net alone on positions of both colours
to move), ``bf16``, ``devices`` (nothing when ``--devices`` is empty),
``mentor``, ``position`` (one position's search, as ``pbrain-agz`` and the
web board run it: ``engine.Engine`` with PUCT on ``models/default``'s nets
when ``--size`` is 15, one leaf a step against ``--leaves`` leaves a step in
one batched net call with virtual loss, simulations/s on this machine's CPUs;
and the net alone and a whole expansion at each batch size of ``--batches``,
evaluations/s: what batching the leaves can gain at most), ``renju`` (renju
against freestyle on the same positions with black to move: the legal mask
with black's forbidden points, the mask with all the search's tactics, and
self-play simulations/s with double nets).

Every timing is the best of a few runs (the machine may be shared). No
persistent compilation cache is used, since compile time is reported.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import sys
import time

import jax
import jax.numpy as jnp

from agz_jax.config.schema import SearchConfig
from agz_jax.game.gomoku import MAX_SIZE, MIN_SIZE, Rules
from agz_jax.nets.networks import Networks, PolicyValueNet, flops_per_position
from agz_jax.studies.bench_inputs import GAMMA, log, midgame_positions, to_state
from agz_jax.studies.bench_measures import (
    bench_baseline,
    bench_devices,
    bench_devices_worker,
    bench_mentor,
    bench_position,
    bench_rule_position,
    bench_train,
    matmul_gflops,
)
from agz_jax.studies.bench_report import lookup, section_lines, table
from agz_jax.studies.bench_search import (
    FORCED,
    MODES,
    bench_bf16,
    bench_routing,
    bench_search,
    bench_selfplay,
    time_search_moves,
)
from agz_jax.training import cli

SECTIONS = ("search", "train", "baseline", "forced", "selfplay", "routing", "bf16", "devices",
            "mentor", "position", "renju")
"""Every section, in the order they run."""

# Every number of the JSON's "results" (dotted paths) that a section reports; all
# are positive and finite. Devices' keys depend on --devices, position's on --leaves and
# --batches (``result_keys``).
SEARCH_KEYS = ("selfplay_compile_s", "selfplay_s", "sims_per_s", "moves_per_s",
               "forward_ms", "forward_evals_per_s", "search_overhead",
               "net_gflops", "net_vs_matmul")
TRAIN_KEYS = ("train_compile_s", "train_step_s", "train_steps_per_s")
BASELINE_KEYS = ("baseline_sims_per_s", "baseline_simulations")
SECTION_KEYS = {
    "search": (*(f"{mode}.{k}" for mode in MODES for k in SEARCH_KEYS), "matmul.gflops"),
    "train": tuple(f"{mode}.{k}" for mode in MODES for k in TRAIN_KEYS),
    "baseline": tuple(f"{mode}.{k}" for mode in MODES for k in BASELINE_KEYS),
    "forced": (*(f"{name}.{k}" for name in FORCED for k in ("sims_per_s", "cost")),
               *(f"{name}.search_moves_ms" for name in FORCED[:3])),
    "selfplay": tuple(f"selfplay.{k}" for k in (
        "lockstep_useful_sims_per_s", "lockstep_positions_per_s",
        "continuous_useful_sims_per_s", "continuous_positions_per_s", "speedup")),
    "routing": tuple(f"routing.{k}" for k in (
        "plain_useful_sims_per_s", "routed_useful_sims_per_s", "selfplay_speedup",
        "plain_evals_per_s", "routed_evals_per_s", "evals_speedup")),
    "bf16": tuple(f"bf16.{k}" for k in (
        "float32_evals_per_s", "bfloat16_evals_per_s", "evals_speedup",
        "float32_sims_per_s", "bfloat16_sims_per_s", "sims_speedup",
        "top1_agreement", "policy_tv_mean", "value_diff_max", "value_diff_mean")),
    "devices": (),
    "mentor": ("mentor.0.games_per_s", "mentor.0.moves_per_s", "mentor.1.games_per_s",
               "mentor.1.chunked_games_per_s"),
    "position": ("position.plain_sims_per_s", "position.plain_without_transpositions_sims_per_s",
                 "position.transpositions_speedup",
                 "position.trees_2_sims_per_s", "position.trees_2_speedup",
                 "position.best_speedup", "position.opening_plain_sims_per_s",
                 "position.opening_trees_2_sims_per_s"),
    "renju": tuple(f"renju.{k}" for k in (
        "freestyle_mask_ms", "renju_mask_ms", "mask_cost", "freestyle_tactics_ms",
        "renju_tactics_ms", "tactics_cost", "freestyle_sims_per_s", "renju_sims_per_s",
        "search_cost", "freestyle_position_sims_per_s", "renju_position_sims_per_s",
        "position_cost")),
}
SPEEDUP_KEYS = tuple(f"{mode}.speedup_vs_baseline" for mode in MODES)
"""Reported when both ``search`` and ``baseline`` ran."""
RESULT_KEYS = (*(k for keys in SECTION_KEYS.values() for k in keys), *SPEEDUP_KEYS)


def result_keys(sections, devices=(), leaves=(), batches=()) -> tuple[str, ...]:
    """The keys of ``RESULT_KEYS`` that a run of ``sections`` reports (and the
    devices section's, one per count of ``devices``; the position section's,
    one per K of ``leaves`` and two per size of ``batches``)."""
    keys = [k for name in sections for k in SECTION_KEYS[name]]
    if "search" in sections and "baseline" in sections:
        keys += SPEEDUP_KEYS
    if "devices" in sections:
        keys += [f"devices.{n}.sims_per_s" for n in devices]
    if "position" in sections:
        keys += [f"position.leaves_{k}_sims_per_s" for k in leaves]
        keys += [f"position.{what}_evals_per_s_{b}" for b in batches for what in ("net", "expand")]
    return tuple(keys)




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
    p.add_argument("--position-sims", type=int, default=None,
                   help="position: simulations of each timed search (2048)")
    p.add_argument("--position-capacity", type=int, default=None,
                   help="position: the engine's tree (8192; a simulation costs the same "
                        "in pbrain-agz's engine.PLAY_CAPACITY)")
    p.add_argument("--leaves", default=None,
                   help="position: the leaves a step to time against one ('4,8,16')")
    p.add_argument("--batches", default=None,
                   help="position: batch sizes of the net alone and an expansion "
                   "('1,4,8,16,32,64')")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true",
                   help="9x9, 8 games, 8 sims, small everything (defaults for unset flags)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--devices", default=None,
                   help="forced host device counts for sharded self-play ('1,4'; "
                   "'' skips it; --quick: '')")
    p.add_argument("--devices-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help="comma-separated sections to run (default: all), always in the "
                   f"order {', '.join(SECTIONS)}, whatever the order given")
    args = p.parse_args(argv)
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown or not chosen:
        p.error(f"--sections must name some of {', '.join(SECTIONS)}, got {args.sections!r}")
    args.sections = [name for name in SECTIONS if name in chosen]
    full = dict(games=64, sims=64, size=15, moves=4, train_batch=512, train_steps=3,
                baseline_seconds=14.0, matmul=2048, mentor_games=16, selfplay_games=64,
                selfplay_sims=16, position_sims=2048, position_capacity=8192,
                leaves="4,8,16", batches="1,4,8,16,32,64")
    quick = dict(games=8, sims=8, size=9, moves=2, train_batch=64, train_steps=2,
                 baseline_seconds=0.5, matmul=512, mentor_games=2, selfplay_games=8,
                 selfplay_sims=4, position_sims=64, position_capacity=128, leaves="4",
                 batches="1,8")
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
    for k in ("leaves", "batches"):
        try:
            setattr(args, k, [int(n) for n in getattr(args, k).split(",") if n.strip()])
            assert all(n >= 1 for n in getattr(args, k))
        except (ValueError, AssertionError):
            p.error(f"--{k} must be counts >= 1 ('4,8'), got {getattr(args, k)!r}")
    for k in ("games", "sims", "moves", "train_batch", "train_steps", "matmul", "mentor_games",
              "selfplay_games", "selfplay_sims", "position_sims", "position_capacity"):
        if getattr(args, k) < 1:
            p.error(f"--{k.replace('_', '-')} must be >= 1")
    if args.position_sims > args.position_capacity:
        p.error(f"--position-sims {args.position_sims} is more than the tree holds "
                f"(--position-capacity {args.position_capacity})")
    try:
        Rules(args.size)  # validates the size
    except ValueError:
        p.error(f"--size must be in {MIN_SIZE}..{MAX_SIZE}, got {args.size}")
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
        r = bench_search(b.rules, nets, variables, b.states, args, b.repeats, b.reps,
                         forward_states=b.mixed)
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


def section_routing(b: Bench) -> None:
    log(f"routing: Double Networks routed against plain, continuous self-play "
        f"{b.args.selfplay_games} games x {b.args.selfplay_sims} sims, and the net alone")
    b.results["routing"] = bench_routing(b.args, b.repeats, b.reps, b.mixed)


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


def section_position(b: Bench) -> None:
    b.results["position"] = bench_position(b.positions[0], b.mixed, b.args, b.repeats)


def section_renju(b: Bench) -> None:
    """Renju against freestyle on the same positions (black to move): the legal
    mask (black's forbidden points, ``agz_jax.game.renju``), the search's tactics,
    and plain self-play."""
    out = {}
    black = b.states._replace(to_play=jnp.zeros_like(b.states.to_play))
    for rule in ("freestyle", "renju"):
        rules = Rules(b.args.size, rule)
        log(f"renju: {rule}'s legal mask and tactics on {b.args.games} positions")
        out[f"{rule}_mask_ms"] = 1e3 * time_search_moves(rules, black, b.repeats, b.reps, False)
        out[f"{rule}_tactics_ms"] = 1e3 * time_search_moves(rules, black, b.repeats, b.reps,
                                                            True, True, True)
        nets, variables = b.nets("double")
        log(f"renju: {rule} self-play")
        out[f"{rule}_sims_per_s"] = bench_search(rules, nets, variables, b.states, b.args,
                                                 b.repeats, b.reps)["sims_per_s"]
        log(f"renju: {rule}, one position's search with the rule's model")
        out[f"{rule}_position_sims_per_s"] = bench_rule_position(
            rule, b.args, b.repeats)["sims_per_s"]
    out["mask_cost"] = out["renju_mask_ms"] / out["freestyle_mask_ms"]
    out["tactics_cost"] = out["renju_tactics_ms"] / out["freestyle_tactics_ms"]
    out["search_cost"] = out["freestyle_sims_per_s"] / out["renju_sims_per_s"]
    out["position_cost"] = (out["freestyle_position_sims_per_s"]
                            / out["renju_position_sims_per_s"])
    b.results["renju"] = out


def renju_lines(res: dict) -> list[str]:
    """The renju section's rows."""
    r = res.get("renju", {})
    if not r:
        return []
    return ["", "renju against freestyle (black to move; the cost is renju's time over "
                "freestyle's)",
            f"  {'':<34}{'freestyle':>10}{'renju':>10}{'cost':>8}",
            f"  {'legal mask, ms a batch':<34}{r['freestyle_mask_ms']:>10.3f}"
            f"{r['renju_mask_ms']:>10.3f}{r['mask_cost']:>7.1f}x",
            f"  {'mask and all tactics, ms a batch':<34}{r['freestyle_tactics_ms']:>10.3f}"
            f"{r['renju_tactics_ms']:>10.3f}{r['tactics_cost']:>7.1f}x",
            f"  {'self-play simulations/s':<34}{r['freestyle_sims_per_s']:>10.0f}"
            f"{r['renju_sims_per_s']:>10.0f}{r['search_cost']:>7.1f}x",
            f"  {'one position, simulations/s':<34}{r['freestyle_position_sims_per_s']:>10.0f}"
            f"{r['renju_position_sims_per_s']:>10.0f}{r['position_cost']:>7.1f}x"]


def position_lines(res: dict) -> list[str]:
    """The position section's rows (``bench_report`` has the others')."""
    r = res.get("position", {})
    if not r:
        return []
    batches = sorted(int(k.rsplit("_", 1)[1]) for k in r if k.startswith("net_evals_per_s_"))
    leaves = sorted(int(k.split("_")[1]) for k in r
                    if k.startswith("leaves_") and k.endswith("_sims_per_s"))
    lines = ["", f"one position, {os.cpu_count()} CPUs: simulations/s ({r['model']}, PUCT, "
             f"{r['simulations']} simulations a search in a tree of {r['capacity']}, "
             f"{r['stones']} stones)",
             f"  {'one leaf a step (plain)':<28}{r['plain_sims_per_s']:>10.0f}",
             f"  {'  without transpositions':<28}"
             f"{r['plain_without_transpositions_sims_per_s']:>10.0f}   "
             f"x{1 / r['transpositions_speedup']:.2f}   "
             f"({r['transposed_fraction']:.0%} of the tree's nodes transposed)",
             f"  {'two trees, two threads':<28}{r['trees_2_sims_per_s']:>10.0f}   "
             f"x{r['trees_2_speedup']:.2f}"]
    if "opening_plain_sims_per_s" in r:
        lines += [f"  a game's opening ({r['opening_stones']} stones, "
                  f"{r['opening_transposed_fraction']:.0%} transposed):",
                  f"  {'  one leaf a step (plain)':<28}{r['opening_plain_sims_per_s']:>10.0f}",
                  f"  {'  two trees, two threads':<28}{r['opening_trees_2_sims_per_s']:>10.0f}   "
                  f"x{r['opening_trees_2_sims_per_s'] / r['opening_plain_sims_per_s']:.2f}"]
    for k in leaves:
        rate = r[f"leaves_{k}_sims_per_s"]
        lines.append(f"  {f'{k} leaves a step, batched':<28}{rate:>10.0f}   "
                     f"x{rate / r['plain_sims_per_s']:.2f}")
    lines += ["  evaluations/s by batch size:  " + "  ".join(f"{b:>6}" for b in batches),
              "    the net alone              " + "  ".join(
                  f"{r[f'net_evals_per_s_{b}']:>6.0f}" for b in batches),
              "    a whole expansion          " + "  ".join(
                  f"{r[f'expand_evals_per_s_{b}']:>6.0f}" for b in batches)]
    return lines


LOCAL_LINES = {"position": position_lines, "renju": renju_lines}
"""The sections whose rows this module writes (``bench_report`` has the others')."""


def lines_of(name: str, results: dict, config: dict) -> list[str]:
    """A section's table lines: ``bench_report``'s, or this module's (``LOCAL_LINES``)."""
    if name in LOCAL_LINES:
        return LOCAL_LINES[name](results)
    return section_lines(name, results, config)


def full_table(report: dict) -> str:
    """``bench_report.table``, with the rows of ``LOCAL_LINES``' sections before its footer."""
    sections = report["sections"]
    local = [n for n in sections if n in LOCAL_LINES]
    text = table({**report, "sections": [n for n in sections if n not in LOCAL_LINES]})
    if not local:
        return text
    body, footer = text.rsplit("\n", 2)[0], text.rsplit("\n", 2)[1:]
    rows = [line for n in local for line in LOCAL_LINES[n](report["results"])]
    return "\n".join([body.replace("sections: " + ", ".join(n for n in sections
                                                              if n not in LOCAL_LINES),
                                    "sections: " + ", ".join(sections)),
                      *rows, *footer])


SECTION_FNS = {"search": section_search, "train": section_train,
               "baseline": section_baseline,
               "forced": section_forced, "selfplay": section_selfplay,
               "routing": section_routing, "bf16": section_bf16,
               "devices": section_devices, "mentor": section_mentor,
               "position": section_position, "renju": section_renju}
assert tuple(SECTION_FNS) == SECTIONS


def run(args: argparse.Namespace, command: str) -> dict:
    """Run the sections ``args.sections`` in order, logging each one's table
    lines as it finishes; the report of them all. SIGTERM or Ctrl-C
    (``cli.Interrupts``) ends the run early: a section is cut at once, a
    finished one is logged in full first; the report then holds the sections
    finished before it, and ``stopped`` names the first section not finished
    and the signal."""
    jax.config.update("jax_enable_compilation_cache", False)
    start = time.perf_counter()
    load_start = os.getloadavg()[0]
    b = Bench(args)
    config = b.config()
    done: list[str] = []
    kept: dict = {}  # the results of the sections in ``done``
    stopped = None
    with cli.Interrupts() as interrupts:
        try:
            for name in args.sections:
                t0 = time.perf_counter()
                interrupts.check()  # a signal recorded while the last section was logged
                SECTION_FNS[name](b)
                with interrupts.deferred():
                    done.append(name)
                    kept = dict(b.results)
                    lines = lines_of(name, b.results, config)
                    log("\n".join([f"section {name} done in {time.perf_counter() - t0:.0f} s",
                                   *lines]))
        except KeyboardInterrupt:
            b.results = kept  # no half-measured section in the report
            unfinished = [name for name in args.sections if name not in done]
            if unfinished:
                stopped = {"section": unfinished[0],
                           "signal": signal.Signals(interrupts.signum or signal.SIGINT).name}
                log(f"stopped by {stopped['signal']} in section {unfinished[0]}: the report "
                    f"holds the {len(done)} section(s) finished before it")
    report = {
        "command": command,
        "sections": done,
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
    if stopped is not None:
        report["stopped"] = stopped
    return report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.devices_worker:
        print(json.dumps(bench_devices_worker(args)))
        return 0
    command = shlex.join(["python", "-m", "experiments.bench", *argv])
    report = run(args, command)
    for key in result_keys(report["sections"], args.devices, args.leaves, args.batches):
        v = lookup(report["results"], key)
        if not (math.isfinite(v) and v > 0):
            log(f"warning: {key} = {v}")
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        print(full_table(report))
    if "stopped" in report:
        # At once: work cut in flight (a device computation) must not be waited on.
        cli.leave(cli.TERMINATED if report["stopped"]["signal"] == "SIGTERM"
                  else cli.INTERRUPTED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
