"""Running a GPU window script (experiments/gpu_window.sh,
experiments/go/gpu_window.sh) on the CPU, as the long tests rehearse them: this
Python's folder first on PATH (the scripts call ``python3``), the settings in
the environment, the device tool's OUT folder made here."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_window(script: str, window: int, out: Path, settings: dict[str, str],
               timeout: int) -> subprocess.CompletedProcess:
    """``bash SCRIPT WINDOW`` from the repository root with ``settings`` and
    ``OUT=out`` (made) in the environment."""
    out.mkdir()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           **settings, "OUT": str(out)}
    return subprocess.run(["bash", script, str(window)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
