"""Reproducibility sweeps: a grid of seeds x config overrides, summarised.

The grid, its bookkeeping and its reports (the runs themselves are the main
job's, see ``experiments/studies/sweep.py``):

* ``parse_seeds("0-3,8")``, ``parse_set("search.num_simulations=32,64")``;
  ``grid`` validates every run's config (ConfigError naming the field) before
  anything runs;
* each run lives in ``OUT/runs/<setting>/seed_<n>/`` (a main-job run dir) and,
  once finished, its ``record.json`` (config, seed, package versions, final
  metrics, params hash, wall time): a run with a record is never redone;
* ``summarise``: per setting and metric, mean, std (ddof 1) and the 95%
  interval of the mean (Student t) across seeds -> ``summary.csv`` and
  ``summary.md``;
* ``plot``: ``curves.png`` (learning curves, mean over seeds with a min-max
  band) and ``final.png`` (final strength per setting, every seed a dot).
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.metadata
import io
import json
import math
import platform
from pathlib import Path

import numpy as np

from agz_jax.config import files
from agz_jax.config.schema import Config, ConfigError
from agz_jax.training.cli import grid_points, parse_assignment


class Tee(io.TextIOBase):
    """Captures what is written, and passes it on unless ``quiet``."""

    def __init__(self, target, quiet: bool):
        self.target, self.quiet, self.parts = target, quiet, []

    def write(self, s: str) -> int:
        self.parts.append(s)
        if not self.quiet:
            self.target.write(s)
        return len(s)

    def flush(self) -> None:
        self.target.flush()


# Final metrics summarised, when a run logged them.
SUMMARY_METRICS = (
    "eval/vs_random_score", "eval/policy_vs_random_score", "train/loss", "train/value_loss",
    "train/policy_loss", "selfplay/mean_length", "gating/accepted_rate",
)
CURVE_METRICS = ("train/loss", "train/value_loss", "train/policy_loss", "eval/vs_random_score")
PACKAGES = ("agz_jax", "jax", "jaxlib", "flax", "optax", "mctx", "numpy", "orbax-checkpoint")

# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(df: int) -> float:
    return _T95[df - 1] if df <= len(_T95) else 1.96


# ---------------------------------------------------------------------------- the grid


def parse_seeds(text: str) -> list[int]:
    """``"0-7"``, ``"0,2,5"``, ``"0-3,8"`` -> sorted distinct seeds."""
    seeds: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if lo > hi:
                    raise ValueError
                seeds.update(range(lo, hi + 1))
            else:
                seeds.add(int(part))
        except ValueError:
            raise ConfigError(
                f"--seeds must be like 0-7 or 0,2,5 (non-negative), got {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise ConfigError(f"--seeds must be like 0-7 or 0,2,5 (non-negative), got {text!r}")
    return sorted(seeds)


def parse_set(text: str) -> tuple[str, list]:
    """``"search.num_simulations=32,64"`` -> (``"search.num_simulations"``, [32, 64])."""
    key, parsed = parse_assignment(text, "--set")
    if key == "seed":
        raise ConfigError("--set seed=... is not a grid axis: use --seeds")
    return key, parsed


@dataclasses.dataclass(frozen=True)
class Run:
    setting: tuple[tuple[str, object], ...]  # the grid's overrides of this run
    seed: int
    config: Config

    @property
    def label(self) -> str:
        """The setting, e.g. ``num_simulations=32 gamma=1.0`` (``base`` if none)."""
        return " ".join(f"{k.split('.')[-1]}={v}" for k, v in self.setting) or "base"

    @property
    def slug(self) -> str:
        """The setting's directory name."""
        return "__".join(f"{k}={v}" for k, v in self.setting) or "base"

    def dir(self, out: Path) -> Path:
        return out / "runs" / self.slug / f"seed_{self.seed}"


def grid(base: Config, seeds: list[int], sets: list[tuple[str, list]]) -> tuple[Config, list[Run]]:
    """Every (setting, seed). ``--set`` fields with one value are fixed overrides of
    the base (returned), those with several are the grid's axes. Every run's config
    is built here, so a bad value fails before anything runs."""
    keys = [k for k, _ in sets]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup:
        raise ConfigError(f"--set {sorted(dup)[0]} is given twice")
    fixed = {k: v[0] for k, v in sets if len(v) == 1}
    axes = [(k, v) for k, v in sets if len(v) > 1]
    base = base.replace(**fixed) if fixed else base
    runs = [Run(s, seed, files.check(base.replace(**dict(s), seed=seed)))
            for s in grid_points(axes) for seed in seeds]
    return files.check(base), runs


def to_flags(overrides: dict) -> list[str]:
    """Dotted overrides as the main job's flags (bools as ``--a.b`` / ``--a.no-b``)."""
    flags = []
    for key, value in overrides.items():
        *section, name = key.replace("_", "-").split(".")
        if isinstance(value, bool):
            flags.append("--" + ".".join([*section, name if value else f"no-{name}"]))
        else:
            flags += ["--" + ".".join([*section, name]), str(value)]
    return flags


def config_overrides(base: Config, config: Config) -> dict:
    """The dotted fields where ``config`` differs from ``base``."""
    out = {}
    a, b = base.to_dict(), config.to_dict()
    for key in a:
        if isinstance(a[key], dict):
            out.update({f"{key}.{k}": b[key][k] for k in a[key] if a[key][k] != b[key][k]})
        elif a[key] != b[key]:
            out[key] = b[key]
    return out


# ---------------------------------------------------------------------------- records


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def read_history(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def final_metrics(history: list[dict]) -> dict:
    """The last value of every metric over the run (evaluation runs only every few
    iterations), plus the gating acceptance rate."""
    final: dict = {}
    for h in history:
        final.update({k: v for k, v in h.items() if k != "iteration"})
    gates = [h["gating/accepted"] for h in history if "gating/accepted" in h]
    if gates:
        final["gating/accepted_rate"] = float(np.mean(gates))
    final["iterations"] = max((h["iteration"] for h in history), default=0)
    return final


def record_path(run_dir: Path) -> Path:
    return run_dir / "record.json"


def write_record(run: Run, run_dir: Path, params_sha256: str, wall_s: float,
                 extra: dict | None = None) -> dict:
    """``record.json`` of a finished run; ``extra`` fields are added to it (a
    vmapped run names its group, ``vmap_group``)."""
    record = {
        "setting": dict(run.setting), "label": run.label, "seed": run.seed,
        "config": run.config.to_dict(), "versions": versions(),
        "final": final_metrics(read_history(run_dir)), "params_sha256": params_sha256,
        "wall_s": wall_s, **(extra or {}),
    }
    record_path(run_dir).write_text(json.dumps(record, indent=2, sort_keys=True))
    return record


def read_record(run_dir: Path) -> dict | None:
    path = record_path(run_dir)
    return json.loads(path.read_text()) if path.exists() else None


# ---------------------------------------------------------------------------- reports


def stats(values: list[float]) -> dict:
    """n, mean, std (ddof 1) and the 95% t-interval of the mean."""
    x = np.asarray(values, np.float64)
    n = len(x)
    mean = float(np.mean(x))
    std = float(np.std(x, ddof=1)) if n > 1 else 0.0
    half = t95(n - 1) * std / math.sqrt(n) if n > 1 else float("nan")
    return {"n": n, "mean": mean, "std": std, "low": mean - half, "high": mean + half}


def summarise(runs: list[Run], records: dict[Path, dict], out: Path) -> list[dict]:
    """Rows (setting x metric) of ``summary.csv``; also writes ``summary.md``."""
    rows = []
    labels = list(dict.fromkeys(r.label for r in runs))
    for label in labels:
        recs = [records[r.dir(out)] for r in runs if r.label == label and r.dir(out) in records]
        for metric in SUMMARY_METRICS:
            values = [rec["final"][metric] for rec in recs if metric in rec["final"]]
            if values:
                rows.append({"setting": label, "metric": metric, **stats(values),
                             "values": " ".join(f"{v:.6g}" for v in values)})
    (out / "summary.csv").write_text(csv_text(rows, ["setting", "metric", "n", "mean", "std",
                                                      "low", "high", "values"]))
    (out / "summary.md").write_text(markdown(rows))
    return rows


def csv_text(rows: list[dict], fields: list[str]) -> str:
    """``rows`` as CSV text with a header of ``fields``, lines ending in \\n."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def markdown(rows: list[dict]) -> str:
    """One line per setting, one column per metric: ``mean ± std [low, high]``."""
    metrics = [m for m in SUMMARY_METRICS if any(r["metric"] == m for r in rows)]
    labels = list(dict.fromkeys(r["setting"] for r in rows))
    cell = {(r["setting"], r["metric"]): r for r in rows}
    lines = ["| setting | seeds | " + " | ".join(metrics) + " |",
             "|---|---:|" + "---:|" * len(metrics)]
    for label in labels:
        n = max(cell[(label, m)]["n"] for m in metrics if (label, m) in cell)
        cells = []
        for m in metrics:
            r = cell.get((label, m))
            if r is None:
                cells.append("")
            elif r["n"] > 1:
                cells.append(f"{r['mean']:.3f} ± {r['std']:.3f} [{r['low']:.3f}, {r['high']:.3f}]")
            else:
                cells.append(f"{r['mean']:.3f}")
        lines.append(f"| {label} | {n} | " + " | ".join(cells) + " |")
    lines += ["", "mean ± std across seeds [95% interval of the mean, Student t]; final values "
              "(the last logged value of each metric)."]
    return "\n".join(lines) + "\n"


def plot(runs: list[Run], out: Path, strength: str = "eval/vs_random_score") -> list[Path]:
    """``curves.png`` and ``final.png`` in ``out``; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    labels = list(dict.fromkeys(r.label for r in runs))
    histories = {r: read_history(r.dir(out)) for r in runs}
    metrics = [m for m in CURVE_METRICS
               if any(m in h for hist in histories.values() for h in hist)]
    written = []
    if metrics:
        fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4),
                                 squeeze=False)
        for ax, metric in zip(axes[0], metrics, strict=True):
            for i, label in enumerate(labels):
                curves = [{h["iteration"]: h[metric] for h in histories[r] if metric in h}
                          for r in runs if r.label == label]
                its = sorted(set().union(*curves))
                if not its:
                    continue
                ys = np.array([[c.get(t, np.nan) for t in its] for c in curves])
                mean = np.nanmean(ys, axis=0)
                colour = f"C{i}"
                ax.plot(its, mean, color=colour, label=f"{label} ({len(curves)} seeds)")
                ax.fill_between(its, np.nanmin(ys, axis=0), np.nanmax(ys, axis=0),
                                color=colour, alpha=0.2, linewidth=0)
            ax.set_title(metric)
            ax.set_xlabel("iteration")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=7)
        fig.suptitle("learning curves: mean over seeds, band = min..max", fontsize=9)
        fig.tight_layout()
        written.append(out / "curves.png")
        fig.savefig(written[-1], dpi=90)
        plt.close(fig)

    finals = {r: final_metrics(histories[r]) for r in runs}
    if not any(strength in f for f in finals.values()):
        strength = "train/loss"
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(labels) + 1.5), 3.4))
    for i, label in enumerate(labels):
        values = [finals[r][strength] for r in runs if r.label == label and strength in finals[r]]
        if not values:
            continue
        s = stats(values)
        ax.scatter(np.full(len(values), i) + np.linspace(-0.12, 0.12, len(values)), values,
                   color=f"C{i}", alpha=0.6, s=14)
        err = 0.0 if math.isnan(s["high"]) else s["high"] - s["mean"]
        ax.errorbar([i], [s["mean"]], yerr=[err], color="black", capsize=6, marker="_",
                    markersize=18)
    ax.set_xticks(range(len(labels)), labels, fontsize=7, rotation=15)
    ax.set_ylabel(f"final {strength}")
    if strength.endswith("_score"):  # a score is in [0, 1]; the t-interval may not be
        ax.set_ylim(-0.05, 1.05)
    ax.set_title("final value per setting: seeds (dots), mean and 95% interval", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    written.append(out / "final.png")
    fig.savefig(written[-1], dpi=90)
    plt.close(fig)
    return written
