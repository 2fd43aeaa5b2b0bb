"""Move prediction's report (``experiments.studies.movepred``): the table of settings
(Maddison et al., Section 5.1/5.2), as CSV, JSON and markdown, and the
accuracy curves (Fig. 1) and accuracy by move number, as plots."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np


def table_rows(labels: list[str], recs: list[dict]) -> list[dict]:
    """One row per setting (Maddison et al., Section 5.1/5.2's table): parameters,
    held-out accuracy, and the raw net's score against the opponent with its
    standard error; with rank conditioning, the score asked to play at the highest
    rank and at the lowest."""
    rows = []
    for label, rec in zip(labels, recs, strict=True):
        held = rec["heldout"]
        row = {"setting": label, "params": rec["params"], "nets": rec["nets"],
               "train_positions": rec["train_positions"],
               "heldout_games": held["games"], "heldout_positions": held["positions"],
               "top1": held["top1"], "top5": held["top5"], "top10": held["top10"],
               "policy_ce": held["policy_ce"], "value_mse": held["value_mse"],
               "opponent": rec["movepred"]["opponent"], "train_s": rec["time"]["train_s"]}
        if "top1_by_rank" in held:
            row["top1_by_rank"] = json.dumps(held["top1_by_rank"])
        if rec["strength"]:
            best, low = rec["strength"][-1], rec["strength"][0]
            row.update({"score": best["score"], "score_se": best["se"],
                        "wins": best["wins"], "draws": best["draws"],
                        "losses": best["losses"], "games": best["games"]})
            if len(rec["strength"]) > 1:
                row.update({"rank_high": best["rank"], "rank_low": low["rank"],
                            "score_low_rank": low["score"], "score_low_rank_se": low["se"],
                            "wins_low_rank": low["wins"], "draws_low_rank": low["draws"],
                            "losses_low_rank": low["losses"]})
        rows.append(row)
    return rows


def write_tables(rows: list[dict], recs: list[dict], out: Path) -> list[Path]:
    """``table.csv``, ``table.md`` and ``by_move.csv`` (top-1 accuracy per bin of
    move numbers, one column per setting) in ``out``."""
    from agz_jax.studies.sweep import csv_text

    fields = list(dict.fromkeys(k for r in rows for k in r))
    (out / "table.csv").write_text(csv_text(rows, fields))
    (out / "table.md").write_text(markdown(rows))
    edges = max((r["heldout"]["by_move"]["edges"] for r in recs), key=len)
    lines = ["plies," + ",".join(f'"{r["setting"]}"' for r in rows)]
    for i in range(len(edges) - 1):
        cells = []
        for rec in recs:
            acc = rec["heldout"]["by_move"]["accuracy"]
            v = acc[i] if i < len(acc) else float("nan")
            cells.append("" if v is None or math.isnan(v) else f"{v:.4f}")
        lines.append(f"{edges[i]}-{edges[i + 1] - 1}," + ",".join(cells))
    (out / "by_move.csv").write_text("\n".join(lines) + "\n")
    return [out / "table.csv", out / "table.md", out / "by_move.csv"]


def markdown(rows: list[dict]) -> str:
    """The table in Markdown: accuracies in %, scores in % ± standard error."""
    opponent = rows[0]["opponent"] if rows else ""
    ranked = any("rank_high" in r for r in rows)
    head = ["setting", "params", "top-1 %", "top-5 %", "top-10 %", "policy CE", "value MSE",
            f"score vs {opponent} % (W/D/L)"]
    if ranked:
        head.append(f"score vs {opponent} at the lowest rank % (W/D/L)")
    head.append("train s")
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in rows:
        cells = [r["setting"], f"{r['params']:,}", f"{100 * r['top1']:.1f}",
                 f"{100 * r['top5']:.1f}", f"{100 * r['top10']:.1f}",
                 f"{r['policy_ce']:.3f}", f"{r['value_mse']:.3f}"]
        if "score" in r:
            cells.append(f"{100 * r['score']:.1f} ± {100 * r['score_se']:.1f} "
                         f"({r['wins']}/{r['draws']}/{r['losses']})")
        else:
            cells.append("")
        if ranked:
            cells.append(f"{100 * r['score_low_rank']:.1f} ± {100 * r['score_low_rank_se']:.1f} "
                         f"({r['wins_low_rank']}/{r['draws_low_rank']}/{r['losses_low_rank']})"
                         if "rank_high" in r else "")
        cells.append(f"{r['train_s']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    if rows:
        r = rows[0]
        lines += ["", f"Held-out: {r['heldout_games']} whole games ({r['heldout_positions']} "
                  "positions) never trained on. Score = (wins + draws / 2) / games of the raw "
                  "net (policy argmax, no search) ± its standard error; params: all nets "
                  "together."]
        if ranked:
            lines.append("The score column of a rank-conditioned net is asked to play at the "
                         "highest rank; the next at the lowest.")
        for r in rows:
            if "top1_by_rank" in r:
                cells = "; ".join(
                    f"rank {t} moves: " + ", ".join(f"asked {a} {100 * v:.1f}%"
                                                    for a, v in enumerate(row) if v is not None)
                    for t, row in enumerate(json.loads(r["top1_by_rank"])))
                lines.append(f"Held-out top-1 of {r['setting']} by the moves' rank, the net "
                             f"asked at each rank: {cells}.")
    return "\n".join(lines) + "\n"


def plot(labels: list[str], recs: list[dict], out: Path) -> list[Path]:
    """``topn.png`` (held-out top-n accuracy for n = 1..10, Maddison et al.'s
    Fig. 1) and ``by_move.png`` (top-1 accuracy by move number) in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def lines(name, curves, xlabel, ylabel, title):
        fig, ax = plt.subplots(figsize=(5.2, 3.8))
        for i, (label, (x, y)) in enumerate(zip(labels, curves, strict=True)):
            ax.plot(x, 100 * np.asarray(y, float), marker="o", markersize=3,
                    color=f"C{i % 10}", label=label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        return out / name

    topn = [(range(1, len(r["heldout"]["topn"]) + 1), r["heldout"]["topn"]) for r in recs]
    by_move = []
    for r in recs:
        edges = np.asarray(r["heldout"]["by_move"]["edges"], float)
        acc = [np.nan if v is None else v for v in r["heldout"]["by_move"]["accuracy"]]
        by_move.append(((edges[:-1] + edges[1:] - 1) / 2, acc))
    return [lines("topn.png", topn, "n", "held-out top-n accuracy (%)",
                  "move prediction: the move played is among the net's n best"),
            lines("by_move.png", by_move, "move number (plies, bin centre)",
                  "held-out top-1 accuracy (%)", "top-1 accuracy by move number")]
