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

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.studies import sweep

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


def run_sweep(out: Path, env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "experiments.studies.sweep", "--preset", "smoke",
                           "--out", str(out), *GRID], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def alone(out: Path, seed: int, env: dict) -> tuple[str, list[dict]]:
    """The main job alone, with the sweep's base config (1 iteration); its params
    hash and deterministic metrics."""
    fixed = dict(sweep.parse_set(a) for a in TINY[1::2])
    flags = sweep.to_flags({k: v[0] for k, v in fixed.items()})
    proc = subprocess.run([sys.executable, "-m", "experiments.selfplay", "--preset", "smoke",
                           "--out", str(out), "--quiet", "--iterations", "1", "--seed",
                           str(seed), *flags], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    digest = re.search(r"params sha256 ([0-9a-f]{64})", proc.stdout).group(1)
    return digest, metrics_of(out)


def metrics_of(run_dir: Path) -> list[dict]:
    from agz_jax.training.run import deterministic

    return [deterministic(json.loads(ln))
            for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]


def cached_env(tmp_path_factory) -> tuple[dict, Path]:
    """A persistent XLA cache shared with test_determinism (same config, same
    executables) across the session's xdist workers."""
    from tiny_models import xla_cache_dir

    cache = xla_cache_dir(tmp_path_factory)
    env = dict(os.environ)
    env.pop("AGZ_JAX_NO_CACHE", None)
    env["AGZ_JAX_CACHE_DIR"] = str(cache)
    return env, cache


@pytest.mark.slow
@pytest.mark.long
def test_sweep_end_to_end(tmp_path, tmp_path_factory):
    """One test (its runs are shared): 4 seeds x 2 settings; records, table, plots;
    a second invocation skips finished runs and resumes a killed one; a run inside
    the sweep is bit-identical to the same run alone."""
    from tiny_models import compile_lock

    env, cache = cached_env(tmp_path_factory)
    with compile_lock(cache):  # compiles once (or loads test_determinism's executables)
        alone_hash, alone_metrics = alone(tmp_path / "alone", 2, env)
    out = tmp_path / "sweep"
    first = run_sweep(out, env)
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

    # Determinism: inside the sweep == alone; the seeds of a setting all differ.
    hashes = {json.loads(p.read_text())["seed"]: json.loads(p.read_text())["params_sha256"]
              for p in out.glob("runs/iterations=1/seed_*/record.json")}
    assert len(set(hashes.values())) == 4
    assert hashes[2] == alone_hash
    assert metrics_of(out / "runs/iterations=1/seed_2") == alone_metrics

    # Resume: a run killed after its checkpoint but before its record is resumed
    # (nothing played again); the finished runs are not touched.
    before = {p: p.stat().st_mtime_ns for p in records}
    victim = out / "runs" / "iterations=2" / "seed_3"
    (victim / "record.json").unlink()
    lines_before = (victim / "metrics.jsonl").read_text()
    again = run_sweep(out, env)
    assert again.stdout.count("done before, skipped") == 7
    assert "seed 3: resumed" in again.stdout
    assert (victim / "metrics.jsonl").read_text() == lines_before
    for p, mtime in before.items():
        if p.parent != victim:
            assert p.stat().st_mtime_ns == mtime
    assert json.loads((victim / "record.json").read_text())["seed"] == 3


def test_sweep_refuses_bad_grid_before_running(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "experiments.studies.sweep", "--out",
                           str(tmp_path / "s"), "--set", "decay.gamma=0.9,2"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "decay.gamma" in proc.stderr
    assert not (tmp_path / "s").exists()


def sweep_main(argv, capsys):
    from experiments.studies import sweep as cmd

    rc = cmd.main(argv)
    return rc, capsys.readouterr()


def test_sweep_refuses_file_or_foreign_dir_as_out(tmp_path, capsys):
    f = tmp_path / "file.txt"
    f.write_text("mine")
    rc, cap = sweep_main(["--out", str(f), "--seeds", "0"], capsys)
    assert rc == 2 and cap.err.count("\n") == 1 and "is a file" in cap.err
    assert f.read_text() == "mine"
    user = tmp_path / "user"
    user.mkdir()
    (user / "summary.md").write_text("my table")
    rc, cap = sweep_main(["--out", str(user), "--seeds", "0"], capsys)
    assert rc == 2 and cap.err.count("\n") == 1 and "not a sweep" in cap.err
    assert sorted(p.name for p in user.iterdir()) == ["summary.md"]
    assert (user / "summary.md").read_text() == "my table"


def test_sweep_vmap_max_gb_must_be_positive(tmp_path, capsys):
    rc, cap = sweep_main(["--out", str(tmp_path / "s"), "--seeds", "0", "--vmap-seeds",
                          "--vmap-max-gb", "-1"], capsys)
    assert rc == 2 and "--vmap-max-gb must be positive" in cap.err
    assert not (tmp_path / "s").exists()


def test_sweep_interrupt_names_the_sweep_command(tmp_path, capsys, monkeypatch):
    from agz_jax.training import driver as training

    def stopped(config, run_dir, **kwargs):
        print("interrupted: continue with python -m experiments.selfplay --resume",
              file=sys.stderr)
        raise training.Interrupted(130, None)

    monkeypatch.setattr(training, "train", stopped)
    out = tmp_path / "s"
    rc, cap = sweep_main(["--out", str(out), "--seeds", "0", *TINY], capsys)
    assert rc == 130
    assert "failed" not in cap.err and "experiments.selfplay" not in cap.err
    assert "interrupted" in cap.err and "python -m experiments.studies.sweep --out" in cap.err
    assert (out / "sweep.json").is_file()
    # the same command resumes: the sweep's own directory is accepted
    rc, cap = sweep_main(["--out", str(out), "--seeds", "0", *TINY], capsys)
    assert rc == 130
