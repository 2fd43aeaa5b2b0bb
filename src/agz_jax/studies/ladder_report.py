"""The rating ladder's outputs (``experiments.play.ladder``): ladder.md, the Elo
fit's table with how it was made, and ladder.png, the self-play runs' Elo
against their self-play games and training time."""

from __future__ import annotations

import re
from pathlib import Path

from agz_jax.studies.ledger import DEFAULT_LEDGER


def table(fit, lines: list[dict], ledger: Path, where: Path | None = None) -> str:
    """ladder.md: the fit's ratings, best first, and how they were made;
    ``where``: the ledger's directory relative to the table's (None: the same)."""
    size, rule = lines[0]["size"], lines[0]["rule"]
    games = sum(x["games"] for x in lines)
    again = "python -m experiments.play.ladder --table-only" + (
        "" if ledger == DEFAULT_LEDGER else f" --ledger {ledger}")
    how = ("`random` = 0" if fit.anchor == "random" else
           f"`{fit.anchor}` = 0 (no match of `random` in the ledger: the ledger's first "
           "player is the anchor)")
    starts = sorted({(x.get("openings"), x.get("opening_plies")) for x in lines}, key=str)
    how_started = "; ".join(
        (f"openings `{o}` (each drawn opening once with each colour)" if o else
         "the empty board") + (f", then {p} random central moves" if p else "")
        for o, p in starts)
    out = [
        "# Rating ladder",
        "",
        f"{games} games in {len(lines)} matches on {size}x{size} {rule} "
        + (f"(`{ledger.name}` beside this file)" if where is None else
           f"([`{(where / ledger.name).as_posix()}`]({(where / ledger.name).as_posix()}))")
        + f"; the games started from {how_started}. "
        "Elo: the maximum-likelihood fit over all of "
        "them (logistic, 400·log10 scale, a draw half a win and half a loss, "
        f"`agz_jax.base.rating`), anchored at {how}; 95% intervals "
        "±1.96 standard errors from the observed Fisher information, of the distance "
        "from the anchor (two players far from it can be closer to each other than "
        "their intervals suggest). Score: the player's "
        "points per game over all its games. Regenerate: "
        f"`{again}`.",
        "",
        "| # | player | Elo | 95% CI | games | score |",
        "|--:|:--|--:|:-:|--:|--:|",
    ]
    for i, r in enumerate(fit.ratings, 1):
        mark = " †" if r.prior else ""
        ci = "anchor" if r.player == fit.anchor else f"{r.low:.0f} .. {r.high:.0f}"
        out.append(f"| {i} | `{r.player}` | {r.elo:.0f}{mark} | {ci} | {r.games} | "
                   f"{r.score:.3f} |")
    if any(r.prior for r in fit.ratings):
        out += ["", f"† No finite maximum-likelihood rating relative to `{fit.anchor}`: a "
                "group of players holding this one won (or lost) every game against the "
                "rest, so their distance has no maximum. Each such one-sided match is "
                "rated with one virtual draw added (20-0 as 20 wins and a draw: 645 Elo), "
                "which pulls the groups together; the real distance is larger, so read "
                f"the Elo as a bound (a lower bound above `{fit.anchor}`, an upper bound "
                "below). Differences within a group are fitted as usual."]
    return "\n".join(out) + "\n"


def plot_series(fit, lines: list[dict]) -> tuple[dict[str, list], list]:
    """The plot's data: {run's player SPEC: [(Rating, selfplay progress), ...]}
    for the checkpoints of self-play runs (``SPEC@itN`` with progress in the
    ledger), and the Ratings of every other player (reference lines)."""
    progress: dict[str, dict] = {}
    for x in lines:
        progress.update(x.get("selfplay") or {})
    series: dict[str, list] = {}
    for r in fit.ratings:
        if r.player in progress:
            # One series per run or campaign model: SPEC@itN / SPEC@gN under SPEC.
            series.setdefault(re.sub(r"@(it|g)\d+$", "", r.player), []).append(
                (r, progress[r.player]))
    return series, [r for r in fit.ratings if r.player not in progress]


def plot(fit, lines: list[dict], path: Path) -> None:
    """ladder.png: Elo against self-play games and against training time for the
    players with self-play progress, the others as horizontal reference lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series, refs = plot_series(fit, lines)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), sharey=True)
    for ax, key, label in ((axes[0], "games", "self-play games"),
                           (axes[1], "hours", "training time (hours, all phases)")):
        for k, r in enumerate(refs):  # labels left and right in turn: fewer overlaps
            ax.axhline(r.elo, color="grey", lw=0.8, ls="--")
            ax.text(0.99 if k % 2 else 0.01, r.elo, f"{r.player}{' †' if r.prior else ''}",
                    fontsize=7, va="bottom", ha="right" if k % 2 else "left",
                    transform=ax.get_yaxis_transform())
        for name, points in series.items():
            points = sorted(points, key=lambda rp: rp[1][key])
            xs = [p[key] for _, p in points]
            ys = [r.elo for r, _ in points]
            err = [[r.elo - r.low for r, _ in points], [r.high - r.elo for r, _ in points]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=name)
        if series:
            ax.legend(fontsize=8, loc="lower right")
        else:
            ax.text(0.5, 0.5, "no self-play run rated yet", ha="center",
                    transform=ax.transAxes, color="grey")
        ax.set_xlabel(label)
        ax.set_title(f"Elo against {label.split(' (')[0]}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"Elo ({fit.anchor} = 0; bars: 95% CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

