"""The library modules of experiments/ say they are not commands (one line, exit 2)
and name the command to run instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("module, command", [
    ("ladder_report", "ladder"), ("ablation_matches", "ablation"),
    ("ablation_train", "ablation"), ("ablation_store", "ablation")])
def test_library_modules_are_not_commands(module, command):
    proc = subprocess.run([sys.executable, "-m", f"experiments.{module}", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
    assert f"python -m experiments.{command} --help" in proc.stderr
