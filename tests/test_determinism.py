"""Determinism: a run is a pure function of (config, seed) on one backend.

Two runs of the main job with the same seed end with bit-identical nets (the
sha256 of every parameter and BatchNorm statistic) and the same metrics; another
seed gives other nets. (A run inside a sweep equals the run alone:
tests/test_sweep.py; N devices equal 1 within float tolerance:
tests/test_parallel.py.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agz_jax.run import deterministic

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--preset", "smoke", "--quiet", "--iterations", "1", "--game.size", "5",
        "--net.filters", "4", "--net.value-hidden", "4", "--search.num-simulations", "2",
        "--selfplay.num-games", "4", "--train.batch-size", "8", "--train.min-replay", "1",
        "--train.steps-per-iteration", "2", "--gating.num-games", "2",
        "--gating.num-simulations", "2", "--eval.every", "0"]


def run(out: Path, seed: int, env: dict) -> tuple[str, list[dict]]:
    proc = subprocess.run([sys.executable, "-m", "experiments.selfplay", *TINY, "--seed",
                           str(seed), "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    digest = re.search(r"params sha256 ([0-9a-f]{64})", proc.stdout).group(1)
    metrics = [deterministic(json.loads(ln))
               for ln in (out / "metrics.jsonl").read_text().splitlines()]
    return digest, metrics


@pytest.mark.slow
def test_same_seed_same_params_hash_other_seed_other_hash(tmp_path):
    env = dict(os.environ)
    env.pop("AGZ_JAX_NO_CACHE", None)
    # Compiled once: the later runs load the executables from this cache, which
    # must not change a single bit of the results.
    env["AGZ_JAX_CACHE_DIR"] = str(tmp_path / "xla_cache")
    a, ma = run(tmp_path / "a", 0, env)
    b, mb = run(tmp_path / "b", 0, env)
    c, mc = run(tmp_path / "c", 1, env)
    assert a == b
    assert ma == mb and "train/loss" in ma[-1] and "gating/score" in ma[-1]
    assert c != a
    assert mc != ma
