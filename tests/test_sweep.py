"""Sweeps: grid parsing, statistics, and a 4-seed x 2-setting sweep end to end
(table, plots, records, resume without redoing finished runs)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agz_jax import sweep
from agz_jax.config import ConfigError, get_preset

ROOT = Path(__file__).resolve().parents[1]

# Smaller than smoke. The grid axis (iterations) is host-side only, so every run
# uses the same compiled programs (compiled once, then from the cache).
TINY = ["--set", "game.size=5", "--set", "net.filters=4", "--set", "net.value_hidden=4",
        "--set", "search.num_simulations=2", "--set", "selfplay.num_games=4",
        "--set", "train.batch_size=8", "--set", "train.min_replay=1",
        "--set", "train.steps_per_iteration=1", "--set", "gating.enabled=false",
        "--set", "eval.every=0"]
GRID = ["--seeds", "0-3", "--set", "iterations=1,2", *TINY]


def test_parse_seeds_and_sets():
    assert sweep.parse_seeds("0-3") == [0, 1, 2, 3]
    assert sweep.parse_seeds("5,0-1,5") == [0, 1, 5]
    for bad in ("", "a", "3-1", "-1", "1,,x"):
        with pytest.raises(ConfigError, match="--seeds"):
            sweep.parse_seeds(bad)
    assert sweep.parse_set("search.num_simulations=32,64") == ("search.num_simulations", [32, 64])
    assert sweep.parse_set("decay.gamma=1.0, 0.95") == ("decay.gamma", [1.0, 0.95])
    assert sweep.parse_set("gating.enabled=false") == ("gating.enabled", [False])
    assert sweep.parse_set("search.algorithm=gumbel") == ("search.algorithm", ["gumbel"])
    for bad in ("search.num_simulations", "x=", "seed=1,2"):
        with pytest.raises(ConfigError, match="--set"):
            sweep.parse_set(bad)


def test_grid_validates_every_run_before_anything_runs():
    base = get_preset("smoke")
    fixed, runs = sweep.grid(base, [0, 1], [("decay.gamma", [1.0, 0.95]),
                                           ("search.num_simulations", [4, 8]),
                                           ("eval.every", [2])])
    assert fixed.eval.every == 2 and len(runs) == 8
    assert {r.label for r in runs} == {f"gamma={g} num_simulations={n}"
                                       for g in (1.0, 0.95) for n in (4, 8)}
    r = runs[-1]
    assert (r.config.decay.gamma, r.config.search.num_simulations, r.seed) == (0.95, 8, 1)
    assert r.config.eval.every == 2
    assert sweep.to_flags({"decay.gamma": 1.0, "gating.enabled": False, "net.value_hidden": 4}) \
        == ["--decay.gamma", "1.0", "--gating.no-enabled", "--net.value-hidden", "4"]
    with pytest.raises(ConfigError, match="decay.gamma"):
        sweep.grid(base, [0], [("decay.gamma", [1.0, 1.5])])
    with pytest.raises(ConfigError, match="unknown config field"):
        sweep.grid(base, [0], [("search.sims", [1, 2])])


def test_stats_t_interval():
    s = sweep.stats([1.0, 2.0, 3.0, 4.0])
    assert s["mean"] == 2.5 and abs(s["std"] - 1.2909944) < 1e-6
    assert abs(s["high"] - s["mean"] - 3.182 * s["std"] / 2) < 1e-9
    one = sweep.stats([0.5])
    assert one["std"] == 0.0 and one["n"] == 1


def run_sweep(out: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "experiments.sweep", "--preset", "smoke",
                           "--out", str(out), *GRID, *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    env = dict(os.environ)
    env.pop("AGZ_JAX_NO_CACHE", None)
    env["AGZ_JAX_CACHE_DIR"] = str(tmp / "xla_cache")
    out = tmp / "sweep"
    first = run_sweep(out, env)
    return out, env, first


@pytest.mark.slow
def test_sweep_writes_records_table_and_plots(swept):
    out, _, first = swept
    assert "8 runs (2 settings x 4 seeds)" in first.stdout
    records = sorted(out.glob("runs/*/seed_*/record.json"))
    assert len(records) == 8
    rec = json.loads(records[0].read_text())
    assert rec["versions"]["jax"] and rec["versions"]["agz_jax"]
    assert rec["config"]["seed"] == rec["seed"] and "train/loss" in rec["final"]
    assert re.fullmatch(r"[0-9a-f]{64}", rec["params_sha256"])

    rows = list(csv.DictReader((out / "summary.csv").open()))
    losses = [r for r in rows if r["metric"] == "train/loss"]
    assert {r["setting"] for r in losses} == {"iterations=1", "iterations=2"}
    for r in losses:
        assert r["n"] == "4" and float(r["low"]) <= float(r["mean"]) <= float(r["high"])
    md = (out / "summary.md").read_text()
    assert "| iterations=1 | 4 |" in md and "±" in md
    for png in ("curves.png", "final.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_sweep_resumes_without_redoing_finished_runs(swept):
    out, env, _ = swept
    before = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/seed_*/record.json")}
    # A run killed after its checkpoint but before its record: resumed, not redone.
    victim = out / "runs" / "iterations=2" / "seed_3"
    (victim / "record.json").unlink()
    lines_before = (victim / "metrics.jsonl").read_text()
    again = run_sweep(out, env)
    assert again.stdout.count("done before, skipped") == 7
    assert "seed 3: resumed" in again.stdout
    assert (victim / "metrics.jsonl").read_text() == lines_before  # nothing played again
    for p, mtime in before.items():
        if p.parent != victim:
            assert p.stat().st_mtime_ns == mtime
    assert json.loads((victim / "record.json").read_text())["seed"] == 3


@pytest.mark.slow
def test_a_run_inside_a_sweep_equals_the_run_alone(swept, tmp_path):
    """Determinism: the same config and seed give bit-identical nets whether run
    alone (the main job) or inside a sweep; the seeds of a setting all differ."""
    out, env, _ = swept
    recs = [json.loads(p.read_text()) for p in out.glob("runs/iterations=1/seed_*/record.json")]
    hashes = {r["seed"]: r["params_sha256"] for r in recs}
    assert len(set(hashes.values())) == 4  # different seeds -> different nets
    fixed = dict(sweep.parse_set(a) for a in TINY[1::2])
    flags = sweep.to_flags({k: v[0] for k, v in fixed.items()})
    proc = subprocess.run([sys.executable, "-m", "experiments.selfplay", "--preset", "smoke",
                           "--out", str(tmp_path / "alone"), "--quiet", "--iterations", "1",
                           "--seed", "2", *flags], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    alone = re.search(r"params sha256 ([0-9a-f]{64})", proc.stdout).group(1)
    assert alone == hashes[2]
    sweep_metrics = (out / "runs/iterations=1/seed_2/metrics.jsonl").read_text()
    from agz_jax.run import deterministic

    def det(text):
        return [deterministic(json.loads(ln)) for ln in text.splitlines()]

    assert det((tmp_path / "alone" / "metrics.jsonl").read_text()) == det(sweep_metrics)


def test_sweep_refuses_bad_grid_before_running(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "experiments.sweep", "--out",
                           str(tmp_path / "s"), "--set", "decay.gamma=0.9,2"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "decay.gamma" in proc.stderr
    assert not (tmp_path / "s").exists()
