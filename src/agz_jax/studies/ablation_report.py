"""The ablation sweep's analysis and report: one maximum-likelihood
Elo over the whole ledger, per arm and per seed; each claim as a Welch 95%
interval; time to strength; and the files of the report (``summary.csv``,
``seeds.csv``, ``claims.csv``, ``summary.md``, ``curves.png``, ``final.png``).
The sweep itself, as data, is ``agz_jax.studies.ablation``.

Pure Python and numpy (no JAX): the report can be redrawn from the committed
ledger and index alone.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from agz_jax.base import rating
from agz_jax.config.presets import get_preset
from agz_jax.studies import sweep
from agz_jax.studies.ablation import POOL_PLAYER, Arm, Plan


def welch(a: list[float], b: list[float]) -> dict | None:
    """mean(a) - mean(b) with its 95% Welch t-interval (df rounded down, so the
    interval is a little wide rather than narrow); None with fewer than two
    values on either side."""
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    diff = float(np.mean(a) - np.mean(b))
    se = math.sqrt(va + vb)
    if se == 0:
        return {"diff": diff, "low": diff, "high": diff, "df": float("inf"), "se": 0.0}
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = sweep.t95(max(1, int(math.floor(df)))) * se
    return {"diff": diff, "low": diff - half, "high": diff + half, "df": df, "se": se}


def verdict(w: dict | None) -> str:
    if w is None:
        return "too few seeds"
    if w["low"] > 0:
        return "held"
    if w["high"] < 0:
        return "reversed"
    return "not resolved"


def _score(lines: list[dict], player: str, opponent: str) -> dict | None:
    """The player's wins, draws, losses and score against the opponent over every
    ledger match between them."""
    w = d = lo = 0
    for x in lines:
        if {x["a"], x["b"]} != {player, opponent}:
            continue
        if x["a"] == player:
            w, d, lo = w + x["wins"], d + x["draws"], lo + x["losses"]
        else:
            w, d, lo = w + x["losses"], d + x["draws"], lo + x["wins"]
    games = w + d + lo
    if not games:
        return None
    return {"wins": w, "draws": d, "losses": lo, "games": games, "score": (w + d / 2) / games}


def analyse(plan: Plan, index: dict, lines: list[dict]) -> dict:
    """Everything the report shows, from the index of snapshots and the ledger."""
    ev = plan.evaluation
    fit = rating.fit(rating.Match(x["a"], x["b"], x["wins"], x["draws"], x["losses"])
                     for x in lines) if lines else None
    ratings = {r.player: r for r in fit.ratings} if fit else {}
    planned = {(a.name, s) for a in plan.arms for s in plan.seeds}
    runs = []
    for r in index["runs"]:
        if (r["arm"], r["seed"]) not in planned:
            continue
        snaps = []
        for s in r["snapshots"]:
            rt = ratings.get(s["player"])
            vs = _score(lines, s["player"], ev.target)
            snaps.append({**s, "elo": rt.elo if rt else None, "elo_low": rt.low if rt else None,
                          "elo_high": rt.high if rt else None, "prior": bool(rt and rt.prior),
                          "vs_target": vs})
        final = next((s for s in snaps if s["final"]), None)
        reached = next((s for s in snaps if s["vs_target"]
                        and s["vs_target"]["games"] >= ev.target_games
                        and s["vs_target"]["score"] >= ev.target_score), None)
        evaluated = all(s["vs_target"] and s["elo"] is not None for s in snaps)
        runs.append({**r, "snapshots": snaps, "final_snapshot": final,
                     "evaluated": bool(final) and evaluated, "reached": reached})
    arms = []
    for a in plan.arms:
        done = [r for r in runs if r["arm"] == a.name and r["evaluated"]]
        elos = [r["final_snapshot"]["elo"] for r in done]
        scores = [r["final_snapshot"]["vs_target"]["score"] for r in done]
        hours = [r["final_snapshot"]["cpu_s"] / 3600 for r in done]
        to_target = [r["reached"]["cpu_s"] / 3600 for r in done if r["reached"]]
        arms.append({"arm": a.name, "seeds": [r["seed"] for r in done], "elo": elos,
                     "vs_target": scores, "cpu_hours": hours, "hours_to_target": to_target,
                     "reached": len(to_target)})
    by_arm = {a["arm"]: a for a in arms}
    claims = []
    for c in plan.claims:
        w = welch(by_arm[c.better]["elo"], by_arm[c.worse]["elo"])
        claims.append({"claim": c.name, "better": c.better, "worse": c.worse,
                       "n_better": len(by_arm[c.better]["elo"]),
                       "n_worse": len(by_arm[c.worse]["elo"]), "welch": w,
                       "verdict": verdict(w)})
    total = len(plan.arms) * len(plan.seeds)
    complete = sum(len(a["seeds"]) for a in arms)
    return {"fit": fit, "runs": runs, "arms": arms, "claims": claims, "total_runs": total,
            "code": list(index.get("code", [])),
            "complete_runs": complete, "partial": complete < total,
            "games": sum(x["games"] for x in lines), "matches": len(lines)}


# ------------------------------------------------------------------ the report


def _fmt_stats(values: list[float], digits: int = 0) -> str:
    if not values:
        return "–"
    s = sweep.stats(values)
    f = f"{{:.{digits}f}}"
    if s["n"] < 2:
        return f.format(s["mean"]) + " (1 seed)"
    return (f"{f.format(s['mean'])} ± {f.format(s['std'])} "
            f"[{f.format(s['low'])}, {f.format(s['high'])}]")


def summary_rows(result: dict) -> list[dict]:
    """summary.csv: per arm and metric, n, mean, std, 95% interval of the mean,
    and the per-seed values (the schema of ``agz_jax.studies.sweep``'s summary.csv)."""
    rows = []
    for a in result["arms"]:
        for metric, values in (("elo_final", a["elo"]), ("score_vs_target_final", a["vs_target"]),
                               ("cpu_hours", a["cpu_hours"]),
                               ("cpu_hours_to_target", a["hours_to_target"])):
            if values:
                rows.append({"arm": a["arm"], "metric": metric, **sweep.stats(values),
                             "values": " ".join(f"{v:.6g}" for v in values)})
    return rows


def seed_rows(plan: Plan, result: dict) -> list[dict]:
    """seeds.csv: every run's final net and its time to strength."""
    rows = []
    for r in result["runs"]:
        f = r["final_snapshot"]
        if not r["evaluated"]:
            continue
        reached = r["reached"]
        rows.append({
            "arm": r["arm"], "seed": r["seed"], "player": f["player"],
            "elo": f"{f['elo']:.1f}", "elo_low": f"{f['elo_low']:.1f}",
            "elo_high": f"{f['elo_high']:.1f}", "elo_bound": int(f["prior"]),
            "score_vs_target": f"{f['vs_target']['score']:.3f}",
            "target_games": f["vs_target"]["games"],
            "selfplay_games": f["selfplay_games"], "game_equivalents": f["games"],
            "cpu_hours": f"{f['cpu_s'] / 3600:.3f}",
            "curriculum_cpu_hours": (f"{r['curriculum']['cpu_s'] / 3600:.3f}"
                                     if r.get("curriculum") else ""),
            "cpu_hours_to_target": f"{reached['cpu_s'] / 3600:.3f}" if reached else "",
            "games_to_target": reached["games"] if reached else "",
        })
    return rows


def claim_rows(result: dict) -> list[dict]:
    rows = []
    for c in result["claims"]:
        w = c["welch"] or {}
        rows.append({"claim": c["claim"], "better": c["better"], "worse": c["worse"],
                     "n_better": c["n_better"], "n_worse": c["n_worse"],
                     "elo_difference": f"{w['diff']:.1f}" if w else "",
                     "low": f"{w['low']:.1f}" if w else "",
                     "high": f"{w['high']:.1f}" if w else "",
                     "verdict": c["verdict"]})
    return rows


def reading(plan: Plan, result: dict) -> list[str]:
    """The plain reading, one line a claim, made from the numbers."""
    lines = []
    for c in result["claims"]:
        w = c["welch"]
        if w is None:
            lines.append(f"- **{c['claim']}**: not testable yet ({c['n_better']} and "
                         f"{c['n_worse']} finished seeds; two a side are needed).")
            continue
        what = {"held": "held: the 95% interval of the difference lies above 0",
                "reversed": "reversed: the 95% interval lies below 0 (the other arm is "
                            "stronger)",
                "not resolved": "not resolved: the 95% interval contains 0, so these seeds "
                                "cannot tell the arms apart"}[c["verdict"]]
        lines.append(f"- **{c['claim']}** (`{c['better']}` − `{c['worse']}`, "
                     f"{c['n_better']} vs {c['n_worse']} seeds): {w['diff']:+.0f} Elo, 95% CI "
                     f"[{w['low']:+.0f}, {w['high']:+.0f}]: {what}.")
    ranked = sorted((a for a in result["arms"] if a["elo"]), key=lambda a: -np.mean(a["elo"]))
    if ranked:
        lines.append("- Arms by mean final Elo: " + ", ".join(
            f"`{a['arm']}` {np.mean(a['elo']):.0f} ({len(a['elo'])} seeds)" for a in ranked)
            + ". (The best gamma of the single-net and curriculum comparisons was "
            "pre-registered, not taken from this ranking.)")
    ev = plan.evaluation
    for a in result["arms"]:
        n = len(a["seeds"])
        if n:
            lines.append(f"- `{a['arm']}`: {a['reached']} of {n} seeds reached "
                         f"{ev.target_score:.2f} against `{ev.target}` within the budget.")
    return lines


def curriculum_check(arm: Arm, result: dict) -> dict | None:
    """The pre-registered conversion checked against the sweep's own numbers: the
    mean measured curriculum CPU seconds of the arm's finished seeds, and the mean
    CPU seconds per self-play game of its reference arm's finished seeds."""
    if arm.curriculum_reference is None:
        return None
    done = [r for r in result["runs"] if r["evaluated"]]
    cur = [r["curriculum"]["cpu_s"] for r in done
           if r["arm"] == arm.name and r.get("curriculum")]
    ref = [r["final_snapshot"]["cpu_s"] / r["final_snapshot"]["selfplay_games"] for r in done
           if r["arm"] == arm.curriculum_reference and r["final_snapshot"]["selfplay_games"]]
    if not cur or not ref:
        return None
    cpu, per_game = float(np.mean(cur)), float(np.mean(ref))
    return {"curriculum_cpu_s": cpu, "cpu_s_per_game": per_game,
            "equivalents": cpu / per_game, "seeds": (len(cur), len(ref))}


def measured_curriculum(arm: Arm, result: dict) -> str:
    c = curriculum_check(arm, result)
    if c is None:
        return ""
    return (f" Measured in this sweep: the curriculum took {c['curriculum_cpu_s']:.0f} CPU-s "
            f"(mean of {c['seeds'][0]} seeds), a self-play game of `{arm.curriculum_reference}` "
            f"{c['cpu_s_per_game']:.3f} CPU-s (mean of {c['seeds'][1]} seeds): "
            f"{c['equivalents']:.0f} game equivalents against the pre-registered "
            f"{arm.curriculum_games}.")


def index_code(result: dict) -> list[str]:
    return result.get("code", [])


def markdown(plan: Plan, result: dict, regenerate: str, data: Path | None = None) -> str:
    """summary.md's text; ``data``: where the data lies relative to the
    report (None: beside it)."""
    ev = plan.evaluation
    base = get_preset(plan.preset).replace(**plan.common)
    size = base.game.size
    out = [f"# Ablation `{plan.name}`: {plan.title} ({size}x{size})", ""]
    if result["partial"]:
        out += [f"**PARTIAL RESULTS: {result['complete_runs']} of {result['total_runs']} "
                "arm-seeds trained and evaluated.** Every number below covers only those; "
                "the sweep goes on.", ""]
    gpi = {a.name: plan.games_per_iteration(a) for a in plan.arms}
    budget = [f"Budget: {plan.games_per_arm:,} self-play games per arm and seed (lockstep "
              f"self-play, {', '.join(sorted({str(v) for v in gpi.values()}))} games an "
              "iteration, from preset "
              f"`{plan.preset}` with {', '.join(f'{k}={v}' for k, v in plan.common.items())})."]
    starts = {(tuple(sorted(a.curriculum.items())), a.curriculum_games,
               plan.iterations(a) * gpi[a.name]) for a in plan.arms}
    first = plan.arms[0]
    if first.curriculum and len(starts) == 1:  # one start shared by every arm: said once
        budget.append(f"Every arm first runs the same curriculum "
                      f"({first.curriculum.get('curriculum.stages')}), counted as "
                      f"{first.curriculum_games:,} self-play games, so each plays "
                      f"{plan.iterations(first) * gpi[first.name]:,} self-play games."
                      + measured_curriculum(first, result))
    else:
        for a in (a for a in plan.arms if a.curriculum):
            budget.append(f"Arm `{a.name}` first runs the curriculum "
                          f"({a.curriculum.get('curriculum.stages')}), counted as "
                          f"{a.curriculum_games:,} self-play games (pre-registered: its CPU "
                          "time over the CPU time of a self-play game, both measured before "
                          f"the sweep), so it plays {plan.iterations(a) * gpi[a.name]:,} "
                          "self-play games." + measured_curriculum(a, result))
    out += [" ".join(budget), ""]
    code = index_code(result)
    if code:
        out += [("Code: commit " if len(code) == 1 else "Code: commits ")
                + ", ".join(f"`{c[:12]}`" for c in code)
                + (" (the sweep was continued on newer code)" if len(code) > 1 else "")
                + " (as the runner recorded it).", ""]
    fit = result["fit"]
    out += [f"Strength: one maximum-likelihood Elo fit (`agz_jax.base.rating`, random = 0) over "
            f"all {result['games']:,} games of {result['matches']} matches in `games.jsonl`; "
            f"a net plays as `mcts:NET:{ev.sims}` (its own search config), every game "
            f"from {ev.opening_plies} random central moves, colours alternating. "
            f"Each snapshot played `{ev.target}` ({ev.target_games} games)"
            + (f" and {', '.join(f'`{x}`' for x in ev.anchors)} ({ev.anchor_games} each)"
               if ev.anchors else "") + "; each final "
            f"net also the whole pool ({ev.pool_games} each); within a seed, the arms' "
            f"snapshots at equal game equivalents, with self-play behind them, played each other "
            f"({ev.peer_games} each). Mean ± std across seeds [95% t-interval "
            "of the mean]. Regenerate: `" + regenerate + "`.", ""]
    if fit is None:
        return "\n".join(out + ["No match played yet."]) + "\n"
    out += ["## Final nets, per arm", "",
            f"| arm | seeds | Elo | per-seed Elo [fit 95% CI] | score vs `{ev.target}` | "
            f"CPU-hours | reached {ev.target_score:.2f} |",
            "|:--|--:|:--|:--|:--|--:|--:|"]
    by_run = {(r["arm"], r["seed"]): r for r in result["runs"]}
    for a in result["arms"]:
        per_seed = []
        for s in a["seeds"]:
            f = by_run[(a["arm"], s)]["final_snapshot"]
            mark = "†" if f["prior"] else ""
            per_seed.append(f"s{s}: {f['elo']:.0f}{mark} [{f['elo_low']:.0f}, "
                            f"{f['elo_high']:.0f}]")
        out.append(f"| `{a['arm']}` | {len(a['seeds'])} | {_fmt_stats(a['elo'])} | "
                   f"{'; '.join(per_seed) or '–'} | {_fmt_stats(a['vs_target'], 2)} | "
                   f"{_fmt_stats(a['cpu_hours'], 2)} | {a['reached']}/{len(a['seeds'])} |")
    out += ["", "## The claims (difference of mean final Elo, Welch 95% interval)", "",
            "| claim | better − worse | seeds | Elo difference | 95% CI | verdict |",
            "|:--|:--|--:|--:|:--|:--|"]
    for c in result["claims"]:
        w = c["welch"]
        diff = f"{w['diff']:+.0f}" if w else "–"
        ci = f"[{w['low']:+.0f}, {w['high']:+.0f}]" if w else "–"
        out.append(f"| {c['claim']} | `{c['better']}` − `{c['worse']}` | "
                   f"{c['n_better']} vs {c['n_worse']} | {diff} | {ci} | {c['verdict']} |")
    out += ["", f"## Time to strength: CPU-hours until {ev.target_score:.0%} against "
            f"`{ev.target}` over {ev.target_games} games", "",
            "| arm | seed | CPU-hours | game equivalents | final score |",
            "|:--|--:|:--|--:|--:|"]
    for r in result["runs"]:
        if not r["snapshots"]:
            continue
        f = r["final_snapshot"]
        if r["reached"]:
            hours = f"{r['reached']['cpu_s'] / 3600:.2f}"
            games = f"{r['reached']['games']:,}"
        elif r["evaluated"]:
            hours = f"not reached within budget ({f['cpu_s'] / 3600:.2f} h)"
            games = "–"
        else:
            hours, games = "not yet (run unfinished)", "–"
        final = f"{f['vs_target']['score']:.2f}" if f and f["vs_target"] else "–"
        out.append(f"| `{r['arm']}` | {r['seed']} | {hours} | {games} | {final} |")
    out += ["", "CPU-hours: the process CPU time (user + system, every thread) of the run's "
            "self-play iterations (self-play, training, gating; compiling included) and, for a "
            "curriculum arm, of its curriculum, until the first snapshot at the target; "
            f"snapshots every {plan.snapshot_every} iterations, so a time is an upper bound "
            "within one snapshot's spacing.", "", "## Reading", "", *reading(plan, result)]
    if any(r.prior for r in fit.ratings):
        out += ["", "† no finite maximum-likelihood Elo relative to `random` (a one-sided "
                "record against a group): rated with one virtual draw per one-sided match, "
                "a bound (`agz_jax.base.rating`)."]
    place = "" if data is None else f" in [`{data.as_posix()}/`]({data.as_posix()}/)"
    out += ["", "Files: `summary.csv` (per arm and metric), `seeds.csv` (per run), "
            "`claims.csv`, `curves.png`, `final.png`, `pool.md` (every player's rating); "
            f"the data{place}: `games.jsonl` (the matches), `index.json` (the snapshots), "
            "`ablation.json` (the sweep file as run)."]
    return "\n".join(out) + "\n"


def plot(plan: Plan, result: dict, out: Path) -> list[Path]:
    """curves.png (Elo and score against the target over self-play game
    equivalents; mean over seeds, band min..max) and final.png (every seed's
    final Elo with its fit interval, the arm's mean and 95% t-interval)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ev = plan.evaluation
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for i, a in enumerate(plan.arms):
        runs = [r for r in result["runs"] if r["arm"] == a.name]
        for ax, key in ((axes[0], "elo"), (axes[1], "score")):
            points: dict[int, list[float]] = {}
            for r in runs:
                for s in r["snapshots"]:
                    y = s["elo"] if key == "elo" else (
                        s["vs_target"]["score"] if s["vs_target"] else None)
                    if y is not None:
                        points.setdefault(s["games"], []).append(y)
            if not points:
                continue
            xs = sorted(points)
            mean = [float(np.mean(points[x])) for x in xs]
            n = max(len(v) for v in points.values())
            ax.plot(xs, mean, marker="o", ms=3, color=f"C{i}", label=f"{a.name} ({n} seeds)")
            ax.fill_between(xs, [min(points[x]) for x in xs], [max(points[x]) for x in xs],
                            color=f"C{i}", alpha=0.18, linewidth=0)
    if result["fit"] is not None:
        fixed = {r.player: r.elo for r in result["fit"].ratings if POOL_PLAYER.match(r.player)}
        for p, elo in fixed.items():
            axes[0].axhline(elo, color="grey", lw=0.7, ls="--")
            axes[0].text(0.99, elo, p, fontsize=7, va="bottom", ha="right",
                         transform=axes[0].get_yaxis_transform())
    axes[0].set_ylabel("Elo (random = 0)")
    axes[1].set_ylabel(f"score against {ev.target} ({ev.target_games} games)")
    axes[1].axhline(ev.target_score, color="grey", lw=0.7, ls="--")
    axes[1].set_ylim(-0.03, 1.03)
    for ax in axes:
        ax.set_xlabel("self-play games (curriculum: + its game equivalents)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(f"{plan.name}: mean over seeds, band = min..max"
                 + (" (PARTIAL)" if result["partial"] else ""), fontsize=9)
    fig.tight_layout()
    written = [out / "curves.png"]
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(max(5.0, 1.5 * len(plan.arms) + 1.5), 4.0))
    by_run = {(r["arm"], r["seed"]): r for r in result["runs"]}
    for i, a in enumerate(result["arms"]):
        finals = [by_run[(a["arm"], s)]["final_snapshot"] for s in a["seeds"]]
        if not finals:
            continue
        xs = i + np.linspace(-0.15, 0.15, len(finals))
        ys = [f["elo"] for f in finals]
        ax.errorbar(xs, ys, yerr=[[f["elo"] - f["elo_low"] for f in finals],
                                  [f["elo_high"] - f["elo"] for f in finals]],
                    fmt="o", color=f"C{i}", alpha=0.6, ms=4, capsize=2, lw=0.8)
        s = sweep.stats(ys)
        err = 0.0 if math.isnan(s["high"]) else s["high"] - s["mean"]
        ax.errorbar([i + 0.3], [s["mean"]], yerr=[err], color="black", capsize=6, marker="_",
                    markersize=16)
    ax.set_xticks(range(len(result["arms"])), [a["arm"] for a in result["arms"]], fontsize=8,
                  rotation=12)
    ax.set_ylabel("final Elo (random = 0)")
    ax.set_title("final nets: seeds (dots, fit 95% CI); black: mean and 95% t-interval"
                 + (" (PARTIAL)" if result["partial"] else ""), fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    written.append(out / "final.png")
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)
    return written


def write_report(plan: Plan, index: dict, lines: list[dict], out: Path,
                 regenerate: str, data: Path | None = None) -> dict:
    """summary.csv, seeds.csv, claims.csv, summary.md and the plots in ``out``
    (``data``: where the data lies relative to ``out``, None: in it);
    returns ``analyse``'s result."""
    result = analyse(plan, index, lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.csv").write_text(sweep.csv_text(summary_rows(result), [
        "arm", "metric", "n", "mean", "std", "low", "high", "values"]))
    (out / "seeds.csv").write_text(sweep.csv_text(seed_rows(plan, result), [
        "arm", "seed", "player", "elo", "elo_low", "elo_high", "elo_bound", "score_vs_target",
        "target_games", "selfplay_games", "game_equivalents", "cpu_hours",
        "curriculum_cpu_hours", "cpu_hours_to_target", "games_to_target"]))
    (out / "claims.csv").write_text(sweep.csv_text(claim_rows(result), [
        "claim", "better", "worse", "n_better", "n_worse", "elo_difference", "low", "high",
        "verdict"]))
    (out / "summary.md").write_text(markdown(plan, result, regenerate, data))
    plot(plan, result, out)
    return result


def read_json(path: Path, default):
    return json.loads(path.read_text()) if path.exists() else default
