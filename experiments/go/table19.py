"""Table 3 at 19x19: held-out top-1 of ``experiments.go.train19`` runs side by side,
with the paper's column.

    python -m experiments.go.table19 RUN [RUN ...] [--at STEPS]

Each RUN is a run folder (``settings.json`` and ``history.json``, finished or
not). A row is a run at its last evaluation, or at step ``--at`` when every run
reached it (so that runs of other lengths are compared after the same number of
positions). Parameters are counted from the net's config.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agz_jax.go.train19 import PAPER_TOP1, params_count


def row(run: Path, at: int | None) -> dict:
    settings = json.loads((run / "settings.json").read_text())
    history = json.loads((run / "history.json").read_text())
    if at is not None:
        history = [r for r in history if r["step"] <= at]
    if not history or (at is not None and history[-1]["step"] != at):
        raise ValueError(f"{run} has no evaluation at step {at}")
    r, net, train = history[-1], settings["net"], settings["train"]
    return {"run": str(run), "layers": net["layers"], "filters": net["filters"],
            "step": r["step"], "batch": train["batch_size"], "positions": r["positions"],
            "top1": r["heldout/top1"], "lo": r["heldout/top1_lo"], "hi": r["heldout/top1_hi"],
            "top5": r["heldout/top5"], "ce": r["heldout/policy_ce"],
            "train_s": r["train_s"], "cpu_s": r["cpu_s"],
            "paper": PAPER_TOP1.get((net["layers"], net["filters"]))}


def markdown(rows: list[dict]) -> str:
    from agz_jax.go import net as net_lib

    out = ["| layers | filters | params | steps x batch | held-out top-1 % [95%] | top-5 % | "
           "held-out CE | train s (CPU s) | paper top-1 % (19x19 KGS, 128 filters "
           "unless said) |", "|--:|--:|--:|--:|---|--:|--:|--:|---|"]
    for r in sorted(rows, key=lambda r: (r["layers"], r["filters"])):
        params = params_count(net_lib.NetConfig(size=19, channels=28, layers=r["layers"],
                                                filters=r["filters"]))
        paper = {k: v for k, v in PAPER_TOP1.items() if k[0] == r["layers"]}
        paper_text = "; ".join(f"{v} ({f} filters)" for (_, f), v in sorted(paper.items()))
        out.append(f"| {r['layers']} | {r['filters']} | {params:,} | {r['step']:,} x "
                   f"{r['batch']} | {100 * r['top1']:.1f} [{100 * r['lo']:.1f}, "
                   f"{100 * r['hi']:.1f}] | {100 * r['top5']:.1f} | {r['ce']:.3f} | "
                   f"{r['train_s']:,.0f} ({r['cpu_s']:,.0f}) | {paper_text or '-'} |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.go.table19",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("runs", type=Path, nargs="+")
    p.add_argument("--at", type=int, default=None,
                   help="compare every run at this step (each must have an evaluation there)")
    args = p.parse_args(argv)
    try:
        rows = [row(run, args.at) for run in args.runs]
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
