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
        # 240 s: the script plays only with at least 60 s left after the distillation
        # (~30-50 s on two loaded cores) and RESERVE and CAPACITY_S; the smoke preset's
        # three iterations end the self-play before the window does.
        run = run_window("experiments/gpu_window.sh", 240, out, settings, timeout=500)
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


@pytest.mark.long
def test_a_renju_window_continues_the_renju_model_under_its_rule(tmp_path):
    """MODEL=models/renju: the window plays and trains under the model's own
    rule (read from its config), exports into that model and brings it back."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree("models/renju", model)
    settings = {"MODEL": str(model), "PRESET": "smoke", "RESERVE": "30",
                "EXTRA": "--game.size 15 --net-preset paper"}
    out = tmp_path / "out"
    run = run_window("experiments/gpu_window.sh", 150, out, settings, timeout=400)
    log = (out / "gpu.log").read_text()
    assert run.returncode == 0, run.stdout + run.stderr + log
    assert "Traceback" not in log and "export failed" not in log, log
    assert f"training {model} (renju)" in log and "15x15 renju" in log, log
    for f in ("variables.msgpack", "campaign.json", "metrics.jsonl", "gpu_config.json"):
        assert (out / f).exists(), f
    assert json.loads((out / "gpu_config.json").read_text())["game"]["rule"] == "renju"
    assert json.loads((out / "campaign.json").read_text())["runs"][0]["device"] == "gpu"


@pytest.mark.long
def test_a_window_without_a_model_says_so(tmp_path):
    out = tmp_path / "out"
    run = run_window("experiments/gpu_window.sh", 150, out,
                     {"MODEL": str(tmp_path / "nowhere"), "RESERVE": "30"}, timeout=120)
    log = (out / "gpu.log").read_text()
    assert run.returncode == 1
    assert f"error: {tmp_path / 'nowhere'} holds no model config" in log, log
