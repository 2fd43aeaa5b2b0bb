"""Determinism: a run is a pure function of (config, seed) on one backend.

Two runs of the main job with the same seed end with bit-identical nets (the
sha256 of every parameter and BatchNorm statistic) and the same metrics, also
when the second loads its executables from the compilation cache; another seed
gives other nets. (A run inside a sweep equals the run alone: test_sweep.py; N
devices equal 1 within float tolerance, and N devices twice are bit-identical:
test_parallel.py.)
"""

from __future__ import annotations

import pytest
from test_sweep import alone, cached_env


@pytest.mark.slow
@pytest.mark.long
def test_same_seed_same_params_hash_other_seed_other_hash(tmp_path, tmp_path_factory):
    from tiny_models import compile_lock

    # The config of test_sweep's runs: whichever test comes first compiles, the
    # other loads the executables from the session's cache.
    env, cache = cached_env(tmp_path_factory)
    with compile_lock(cache):
        a, ma = alone(tmp_path / "a", 0, env)
    b, mb = alone(tmp_path / "b", 0, env)
    c, mc = alone(tmp_path / "c", 1, env)
    assert a == b
    assert ma == mb and "train/loss" in ma[-1]
    assert c != a
    assert mc != ma
