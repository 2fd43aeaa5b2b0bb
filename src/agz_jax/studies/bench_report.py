"""The bench's text report: the single-net / double-nets table and each
section's lines, from the results ``experiments.bench`` collected."""

from __future__ import annotations

from agz_jax.studies.bench_search import FORCED


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


def routing_lines(r: dict) -> list[str]:
    if not r:
        return []
    return [
        f"Double Networks, each position through its own net (routed) against both nets "
        f"on every position (plain) ({r['source']}):",
        f"  continuous self-play ({r['games']} games, gumbel {r['sims']} sims, {r['steps']} "
        f"search steps): plain {r['plain_useful_sims_per_s']:,.0f}, routed "
        f"{r['routed_useful_sims_per_s']:,.0f} useful simulations/s, "
        f"{r['selfplay_speedup']:.2f}x",
        f"  the net alone ({r['mixed_white']:.0%} of the batch white to move): plain "
        f"{r['plain_evals_per_s']:,.0f}, routed {r['routed_evals_per_s']:,.0f} "
        f"evaluations/s, {r['evals_speedup']:.2f}x",
        "",
    ]


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
        ("search", f"net evaluations/s (B={c['games']}, both colours)", "forward_evals_per_s",
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
    return {"forced": lambda: forced_lines(res, c),
            "selfplay": lambda: selfplay_lines(res.get("selfplay", {})),
            "routing": lambda: routing_lines(res.get("routing", {})),
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
    lines = ["Mentor (agz_jax.game.mentor) playing itself, one jitted batch per level:"]
    for level, m in mentor.items():
        lines.append(f"  level {level}: {m['games_per_s']:>8.2f} games/s, "
                     f"{m['moves_per_s']:>8.1f} moves/s (mean length {m['mean_length']:.1f}, "
                     f"compile {m['compile_s']:.1f} s); in chunks of 8 plies "
                     f"{m['chunked_games_per_s']:.2f} games/s "
                     f"(mean length {m['chunked_mean_length']:.1f})")
    return [*lines, ""]
