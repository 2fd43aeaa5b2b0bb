"""What the training driver (``training.driver``) prints: the line that starts
a new run (``header``), iteration 0's (``initial_line``), each iteration's
(``fmt_line``) and the end-of-run report (``summary``).
"""

from __future__ import annotations

from pathlib import Path

from agz_jax.config.schema import Config


def header(run_dir: Path, config: Config, comps, state, preset: str | None) -> str:
    """The console line that starts a new run."""
    import jax

    return (f"run {run_dir}: preset {preset or 'cpu'}, "
            f"{config.game.size}x{config.game.size} {config.game.rule}, "
            f"{'double' if config.net.double else 'single'} net "
            f"{config.net.blocks} blocks x {config.net.filters} filters "
            f"({comps.nets.num_params(state.best):,} parameters a net), "
            f"{config.search.algorithm} {config.search.num_simulations} sims, "
            f"{config.selfplay.num_games} games/iteration, backend "
            f"{jax.default_backend()} x {comps.sharder.num_devices} device(s)"
            + (f" on {jax.process_count()} processes" if jax.process_count() > 1 else ""))


def initial_line(config: Config, metrics: dict) -> str:
    return (f"it    0/{config.iterations} | untrained net vs random: "
            f"search {metrics['eval/vs_random_score']:.2f}, raw policy "
            f"{metrics['eval/policy_vs_random_score']:.2f}")


def fmt_line(it: int, total: int, m: dict) -> str:
    """The console line of iteration ``it`` of ``total``."""
    parts = [f"it {it:>4}/{total}"]
    parts.append(f"games/s {m['speed/games_per_s']:.2f}")
    parts.append(f"sims/s {m['speed/sims_per_s']:,.0f}")
    parts.append(f"len {m['selfplay/mean_length']:.1f}")
    parts.append(f"B/W/D {m['selfplay/black_wins']:.2f}/{m['selfplay/white_wins']:.2f}/"
                 f"{m['selfplay/draws']:.2f}")
    if m.get("train/trained"):
        parts.append(f"loss {m['train/loss']:.3f} (v {m['train/value_loss']:.3f} "
                     f"p {m['train/policy_loss']:.3f})")
    else:
        parts.append(f"filling replay {m['replay/size']:.0f}")
    if "gating/score" in m:
        verdict = "accepted" if m["gating/accepted"] else "rejected"
        parts.append(f"gate {m['gating/score']:.2f} {verdict}")
    if "eval/vs_random_score" in m:
        parts.append(f"vs random: search {m['eval/vs_random_score']:.2f}, "
                     f"raw {m['eval/policy_vs_random_score']:.2f}")
    if m.get("time/stopped_s", 0.0) >= 1.0:  # agz_jax.base.clock: shown, so it is not missed
        parts.append(f"stopped {m['time/stopped_s']:.0f} s")
    return " | ".join(parts)


def summary(history: list[dict], wall: float, run_dir: Path,
            last_checkpoint_s: float | None = None) -> str:
    """The end-of-run report; ``last_checkpoint_s``: the seconds the loop spent on
    the last checkpoint, which no metrics line holds."""
    from agz_jax.training import run

    iterations = [h for h in history if h["iteration"] > 0]
    trained = [h for h in iterations if h.get("train/trained")]
    lines = [f"done: {len(iterations)} iterations in {run_dir} ({wall:.0f} s this session)"]
    share = run.selfplay_share(iterations)
    if share is not None:
        timed = [h for h in iterations if run.ITERATION_S in h]
        saves = [h[run.PREVIOUS_CHECKPOINT_S] for h in timed if run.PREVIOUS_CHECKPOINT_S in h]
        if last_checkpoint_s is not None:
            saves.append(last_checkpoint_s)
        lines.append(
            f"  self-play took {share:.0%} of the wall time of {len(timed)} iterations "
            f"({sum(run.wall_seconds(h) for h in timed):.0f} s, checkpoints included)"
            + (f"; checkpoints {sum(saves) / len(saves):.1f} s each on average "
               f"({len(saves)} saves)" if saves else ""))
    if trained:
        first, last = trained[0], trained[-1]
        lines.append(
            f"  loss (first step of the first trained iteration -> last step of the last) "
            f"{first['train/first_loss']:.3f} -> {last['train/loss']:.3f}: value "
            f"{first['train/first_value_loss']:.3f} -> {last['train/value_loss']:.3f}, policy "
            f"{first['train/first_policy_loss']:.3f} -> {last['train/policy_loss']:.3f}")
    gates = [h for h in iterations if "gating/score" in h]
    if gates:
        acc = sum(h["gating/accepted"] for h in gates)
        lines.append(f"  gating: {acc:.0f}/{len(gates)} candidates accepted")
    evals = [h for h in history if "eval/vs_random_score" in h]
    for e in evals[:1] + evals[1:][-1:]:
        lines.append(f"  vs random at iteration {e['iteration']}: with search "
                     f"{e['eval/vs_random_score']:.2f} (95% CI from {e['eval/vs_random_low']:.2f}),"
                     f" raw policy {e['eval/policy_vs_random_score']:.2f} "
                     f"({e['eval/vs_random_games']:.0f} games each)")
    lines.append(f"  metrics: {run_dir / 'metrics.jsonl'}, TensorBoard: {run_dir / 'tb'}")
    return "\n".join(lines)


__all__ = ["fmt_line", "header", "initial_line", "summary"]
