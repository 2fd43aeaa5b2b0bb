"""Test-session setup: one persistent XLA compilation cache for every test and worker.

Many tests build the same small nets and jitted phases (in new closures, so
jit's in-memory cache misses); with a persistent cache keyed by the compiled
program, a program compiled once in a session, by either xdist worker, is
loaded instead of compiled again. It lives in ``.cache/jax-tests`` (git-ignored;
``AGZ_JAX_TEST_CACHE`` moves it, ``AGZ_JAX_NO_CACHE=1`` turns it off). A fresh
clone starts with it empty, so CI compiles everything at least once.
"""

from __future__ import annotations

import os
from pathlib import Path

# XLA:CPU at optimisation level 0 and without its newer fusion emitters (set
# before jax starts its backend): it compiles the suite's many small programs
# faster, and they run for moments. Level 0 took about a fifth off the whole
# suite's CPU time; the older emitters then took about 40% off the time spent
# compiling (the two slowest tests, 2026-11-29: 15.4 s of compiling down to
# 8.7 s). Subprocesses inherit both, so every number a test compares is
# computed the same way. The few programs whose running dominates a test (renju's
# deep readings, Go's ladder planes) take level 1 (tiny_models.heavy_jit).
# AGZ_JAX_TEST_XLA_DEFAULT=1 keeps XLA's defaults
# (tests/test_unchanged.py keeps hashes for both).
TEST_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
if not os.environ.get("AGZ_JAX_TEST_XLA_DEFAULT"):
    _flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = " ".join(
        [_flags] + [f for f in TEST_XLA_FLAGS if f.split("=")[0] not in _flags]).strip()

import jax  # noqa: E402
import pytest  # noqa: E402

if not os.environ.get("AGZ_JAX_NO_CACHE"):
    _cache = os.environ.get("AGZ_JAX_TEST_CACHE",
                            str(Path(__file__).resolve().parents[1] / ".cache" / "jax-tests"))
    jax.config.update("jax_compilation_cache_dir", _cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


@pytest.fixture(autouse=True)
def _plain_double_networks(request, monkeypatch):
    """In-process tests evaluate Double Networks plainly: both nets on every
    position (``Networks.evaluate(route=False)``) where a call leaves ``route``
    unset. Routing's five-branch switch holds the net eight times over, and a
    search program compiled with it took about half as long again (two search
    tests, 2026-11-29); its outputs equal plain's up to float rounding, which
    tests/test_routing.py checks. The routed path still runs in that module, in
    every module that sets ``ROUTED = True`` (tests/test_unchanged.py keeps the
    shipped path's recorded games), in tests marked ``routed`` (which build
    their programs themselves: a jitted function keeps its first trace), and
    in every subprocess the suite starts
    (the engine, the web board, the main job), which runs as users run it."""
    if getattr(request.module, "ROUTED", False) or request.node.get_closest_marker("routed"):
        yield
        return
    from agz_jax.nets import networks

    evaluate = networks.Networks.evaluate

    def plain(self, variables, obs, to_play, dtype=jax.numpy.float32, route=None):
        return evaluate(self, variables, obs, to_play, dtype, False if route is None else route)

    monkeypatch.setattr(networks.Networks, "evaluate", plain)
    yield


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The environment of a module's subprocesses (the main job as a user runs it)."""
    e = dict(os.environ)
    # The subprocesses share the suite's compilation cache: a program the main job
    # compiled for one module (or an earlier session) is loaded by the next. With
    # the cache off in-process, they get one of their own, fresh for each module.
    e["AGZ_JAX_CACHE_DIR"] = (jax.config.jax_compilation_cache_dir
                              or str(tmp_path_factory.mktemp("xla_cache")))
    e.pop("AGZ_JAX_NO_CACHE", None)
    return e  # with the XLA flags above, as every process of the suite
