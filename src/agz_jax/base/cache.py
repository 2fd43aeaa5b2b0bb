"""The persistent XLA compilation cache every command line shares.

A new process loads the executables an earlier one compiled instead of
compiling them again (the engine's first move, a resumed run's first
iteration). ``AGZ_JAX_NO_CACHE=1`` turns it off; ``AGZ_JAX_CACHE_DIR`` moves it
from ``~/.cache/agz_jax/xla``.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax


def enable_compilation_cache(default_dir: str | Path | None = None) -> None:
    """Persist compiled executables between runs so that a new process does not
    compile again (``AGZ_JAX_NO_CACHE=1`` disables it; ``AGZ_JAX_CACHE_DIR`` moves it)."""
    if os.environ.get("AGZ_JAX_NO_CACHE"):
        return
    where = os.environ.get("AGZ_JAX_CACHE_DIR") or default_dir
    where = where or Path.home() / ".cache" / "agz_jax" / "xla"
    jax.config.update("jax_compilation_cache_dir", str(where))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
