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

# XLA:CPU at optimisation level 0 (set before jax starts its backend): it
# compiles the suite's many small programs faster, and they run for moments
# (the whole suite took about a fifth less CPU time). Subprocesses inherit it,
# so every number a test compares is computed at the same level.
# AGZ_JAX_TEST_XLA_DEFAULT=1 keeps XLA's default (tests/test_unchanged.py keeps
# hashes for both).
if (not os.environ.get("AGZ_JAX_TEST_XLA_DEFAULT")
        and "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", "")):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_backend_optimization_level=0").strip()

import jax  # noqa: E402
import pytest  # noqa: E402

if not os.environ.get("AGZ_JAX_NO_CACHE"):
    _cache = os.environ.get("AGZ_JAX_TEST_CACHE",
                            str(Path(__file__).resolve().parents[1] / ".cache" / "jax-tests"))
    jax.config.update("jax_compilation_cache_dir", _cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


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
