"""experiments/gpu_window.sh with NET set, rehearsed on the CPU: the larger
net's window distils the teacher, plays and trains, exports the run into the
model folder, measures the capacity comparison, and brings all of it back in
OUT; a second window continues the exported nets instead of distilling."""

import json

import pytest
from gpu_windows import run_window


@pytest.mark.long
def test_the_larger_net_window_distils_trains_exports_and_continues(tmp_path):
    model = tmp_path / "model"
    settings = {"NET": "paper", "TEACHER": "models/campaign", "MODEL": str(model),
                "PRESET": "smoke", "EXTRA": "--game.size 15", "DISTILL_S": "20",
                "RESERVE": "30", "CAPACITY": "1", "CAPACITY_S": "40", "CAPACITY_NETS": "8x1",
                "CAPACITY_STEPS": "4", "CAPACITY_EVERY": "2", "CAPACITY_HELD_OUT": "16",
                "DISTILL_FLAGS": "--games 16 --held-out-games 8 --games-per-batch 16 "
                                 "--epochs 1 --batch-size 32"}
    logs = []
    for window in ("first", "second"):
        out = tmp_path / window
        run = run_window("experiments/gpu_window.sh", 150, out, settings, timeout=400)
        log = (out / "gpu.log").read_text()
        logs.append(log)
        assert run.returncode == 0, run.stdout + run.stderr + log
        # Every step of the script ran: no Python error, the export and its config.
        assert "Traceback" not in log and "export failed" not in log, log
        assert "self-play share: " in log and "capacity exit 0" in log, log
        for f in ("variables.msgpack", "config.json", "campaign.json", "metrics.jsonl",
                  "capacity.json"):
            assert (out / f).exists(), f
        assert json.loads((out / "capacity.json").read_text())["nets"][0]["net"] == "8x1"
        config = json.loads((model / "config.json").read_text())
        assert (config["net"]["blocks"], config["net"]["filters"]) == (2, 32)
    assert "distilling models/campaign into paper nets" in logs[0]
    assert "continuing the paper nets of" in logs[1] and "distilling" not in logs[1]
    assert (tmp_path / "first" / "distill.json").exists()
