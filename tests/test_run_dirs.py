"""What the training commands' ``--out`` may hold, and the mistakes refused before
anything compiles: a model or a curriculum given to the main job, a self-play run
given to the curriculum, a run shrunk on --resume, bad --save-games, a replay too
small to train from, and the way out of --init-from's errors. In-process calls
of ``main``/``parse``: each fails (or passes its checks) before compiling."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from agz_jax.config.presets import PRESETS, check_nets_fit, get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.curriculum import command as curriculum_cli
from agz_jax.nets import checkpoint
from experiments import selfplay as selfplay_cli

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ["--preset", "smoke", "--iterations", "1", "--quiet"]


def one_line_error(text: str) -> str:
    assert text.startswith("error: ") and text.count("\n") == 1, text
    assert "Traceback" not in text, text
    return text


def snapshot(directory: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def model_copy(tmp_path: Path) -> Path:
    out = tmp_path / "model"
    shutil.copytree(ROOT / "models" / "default", out)
    return out


def curriculum_dir(tmp_path: Path, finished: bool = True) -> Path:
    """A curriculum's directory: after its first stage, or killed in it."""
    out = tmp_path / "curriculum"
    checkpoint.write_config(out, get_preset("smoke"))
    (out / "metrics.jsonl").write_text(json.dumps({"stage": "basic", "step": 1}) + "\n")
    (out / "rounds").mkdir()
    if finished:
        (out / "curriculum.json").write_text(json.dumps({"done": ["basic"], "metrics": {}}))
        (out / "variables.msgpack").write_bytes(b"nets")
    return out


def selfplay_run(tmp_path: Path, iterations: int = 2, steps=(1, 2)) -> Path:
    """A self-play run directory of ``iterations`` with checkpoints ``steps`` (a
    stand-in state: the checks before restoring look only at the steps)."""
    out = tmp_path / "run"
    checkpoint.write_config(out, get_preset("smoke").replace(iterations=iterations))
    for step in steps:
        checkpoint.save(out, step, {"iteration": np.full((), step, np.int32)},
                        {"iteration": step})
    (out / "metrics.jsonl").write_text(
        "".join(json.dumps({"iteration": i}) + "\n" for i in range(max(steps, default=0) + 1)))
    return out


# ---------------------------------------------------------------- the main job's --out


@pytest.mark.parametrize("resume", [False, True])
def test_selfplay_refuses_a_model_directory_and_leaves_it_as_it_was(tmp_path, capsys, resume):
    out = model_copy(tmp_path)
    before = snapshot(out)
    argv = ["--out", str(out), "--resume"] if resume else [*SMOKE, "--out", str(out)]
    assert selfplay_cli.main(argv) == 2
    err = one_line_error(capsys.readouterr().err)
    assert f"--out {out} holds a model (variables.msgpack), not a self-play run: give a new " \
           "directory for the run" in err
    assert snapshot(out) == before


@pytest.mark.parametrize("finished", [True, False])
def test_selfplay_refuses_a_curriculum_directory(tmp_path, capsys, finished):
    out = curriculum_dir(tmp_path, finished)
    before = snapshot(out)
    assert selfplay_cli.main([*SMOKE, "--out", str(out)]) == 2
    err = one_line_error(capsys.readouterr().err)
    marker = "curriculum.json" if finished else "rounds"
    assert f"--out {out} holds a curriculum ({marker}), not a self-play run: give a new " \
           "directory" in err
    assert snapshot(out) == before
    assert selfplay_cli.main(["--out", str(out), "--resume"]) == 2
    assert "holds a curriculum" in one_line_error(capsys.readouterr().err)


@pytest.mark.parametrize("files, says", [
    ({"config.json": '{"not": "a config"}'}, "holds no self-play run ("),
    ({"config.json": "{"}, "holds no self-play run ("),
    ({"metrics.jsonl": '{"iteration": 0}\n'}, "holds a metrics.jsonl but no config.json"),
    ({"config.json": None, "metrics.jsonl": '{"round": 1}\n'},
     "metrics.jsonl is not the metrics of a self-play run"),
    ({"config.json": None, "metrics.jsonl": "garbage\n"},
     "metrics.jsonl is not the metrics of a self-play run"),
])
def test_selfplay_refuses_files_that_are_not_a_run_of_its_own(tmp_path, capsys, files, says):
    out = tmp_path / "other"
    out.mkdir()
    for name, text in files.items():
        (out / name).write_text(get_preset("smoke").to_json() if text is None else text)
    before = snapshot(out)
    assert selfplay_cli.main([*SMOKE, "--out", str(out)]) == 2
    err = one_line_error(capsys.readouterr().err)
    assert says in err and "give a new directory for the run" in err
    assert snapshot(out) == before


def test_a_run_killed_before_its_first_checkpoint_still_starts_again(tmp_path):
    # What a run leaves when killed before its first checkpoint committed: its
    # config.json, the untrained net's evaluation, an empty checkpoints/.
    out = selfplay_run(tmp_path, steps=())
    (out / "checkpoints").mkdir()
    (out / "init_from.txt").write_text("default\n")
    args, config = selfplay_cli.parse([*SMOKE, "--out", str(out)])
    assert not args.resume and config.iterations == 1
    args, _ = selfplay_cli.parse(["--out", str(out), "--resume"])  # what `make selfplay` adds
    assert args.resume
    selfplay_cli.parse([*SMOKE, "--out", str(tmp_path / "new")])


# ----------------------------------------------------------------- the curriculum's --out


@pytest.mark.parametrize("resume", [False, True])
def test_curriculum_refuses_a_selfplay_run_and_a_model(tmp_path, capsys, resume):
    run_dir = selfplay_run(tmp_path)
    model = model_copy(tmp_path)
    for out, says in ((run_dir, "holds a self-play run, not a curriculum: give a new directory"),
                      (model, "holds a model, not a curriculum: give a new directory")):
        before = snapshot(out)
        argv = ["--out", str(out), "--resume"] if resume else ["--preset", "smoke", "--out",
                                                                str(out)]
        assert curriculum_cli.main(argv) == 2
        assert f"--out {out} {says}" in one_line_error(capsys.readouterr().err)
        assert snapshot(out) == before
        assert not (out / "curriculum.json").exists()


def test_curriculum_resumes_its_own_directories(tmp_path):
    for finished in (True, False):
        out = curriculum_dir(tmp_path / str(finished), finished)
        args, _ = curriculum_cli.parse(["--out", str(out), "--resume"])
        assert args.resume
    # killed between writing its nets and its curriculum.json
    out = tmp_path / "between"
    checkpoint.write_config(out, get_preset("smoke"))
    (out / "stages" / "0-basic").mkdir(parents=True)
    (out / "variables.msgpack").write_bytes(b"nets")
    curriculum_cli.parse(["--out", str(out), "--resume"])


# ------------------------------------------------------------------------ other flags


def test_resume_refuses_to_shrink_a_finished_run(tmp_path, capsys):
    out = selfplay_run(tmp_path, iterations=2)
    before = snapshot(out)
    assert selfplay_cli.main(["--out", str(out), "--resume", "--iterations", "1"]) == 2
    err = one_line_error(capsys.readouterr().err)
    assert f"--iterations 1 is fewer than the 2 iterations {out} has finished; give " \
           "--iterations 2 or more" in err
    assert snapshot(out) == before
    assert checkpoint.read_config(out).iterations == 2


def test_save_games_must_not_be_negative(tmp_path, capsys):
    out = tmp_path / "r"
    assert selfplay_cli.main([*SMOKE, "--out", str(out), "--save-games", "-2"]) == 2
    assert "--save-games must be an integer >= 0" in one_line_error(capsys.readouterr().err)
    assert not out.exists()
    args, _ = selfplay_cli.parse([*SMOKE, "--out", str(out), "--save-games", "0"])
    assert args.save_games == 0


def test_min_replay_beyond_the_replay_capacity_is_refused(tmp_path, capsys):
    out = tmp_path / "r"
    assert selfplay_cli.main([*SMOKE, "--out", str(out), "--replay.capacity", "10"]) == 2
    err = one_line_error(capsys.readouterr().err)
    assert err == ("error: train.min_replay must be at most replay.capacity (10), or the run "
                   "never trains: lower --train.min-replay or raise --replay.capacity, got 32\n")
    assert not out.exists()
    smoke = get_preset("smoke")
    assert smoke.replace(**{"replay.capacity": 32}).replay.capacity == 32  # equal is fine
    with pytest.raises(ConfigError, match="train.min_replay must be at most replay.capacity"):
        smoke.replace(**{"train.min_replay": 4096})
    for name in PRESETS:  # every preset trains
        config = get_preset(name)
        assert config.train.min_replay <= config.replay.capacity, name


def test_init_from_a_directory_without_a_model_says_so(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    for main in (selfplay_cli.main, curriculum_cli.main):
        assert main(["--preset", "smoke", "--out", str(tmp_path / "r"), "--init-from",
                     str(empty)]) == 2
        err = one_line_error(capsys.readouterr().err)
        assert f"{empty} holds no model or run to start from; give a model directory" in err
        assert "resume" not in err
    assert not (tmp_path / "r").exists()


def test_init_from_nets_that_do_not_fit_gives_the_flags_that_fit(tmp_path, capsys):
    assert selfplay_cli.main([*SMOKE, "--out", str(tmp_path / "r"), "--init-from",
                              "default"]) == 2
    err = one_line_error(capsys.readouterr().err)
    default = json.loads((ROOT / "models" / "default" / "config.json").read_text())
    size = default["game"]["size"]
    assert f"--init-from default has game.size = {size}, this run needs 7: give " \
           f"--game.size {size}" in err and err.endswith(" or another model\n")
    smoke = get_preset("smoke")
    with pytest.raises(ConfigError, match=r"m has net.value_hidden = 3, this run needs 8: "
                       r"give --net.value-hidden 3 --net.no-double or another model"):
        check_nets_fit(smoke, smoke.replace(**{"net.double": False, "net.value_hidden": 3}), "m")
