"""End to end: the main job as a user runs it (subprocesses), bad input, resume."""

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import Config, ConfigError
from agz_jax.nets import checkpoint
from agz_jax.training.run import deterministic

ROOT = Path(__file__).resolve().parents[1]
# A smoke run trimmed further: the point here is the loop's bookkeeping.
SMALL = ["--preset", "smoke", "--quiet", "--selfplay.num-games", "4",
         "--gating.num-games", "2", "--eval.every", "2", "--eval.num-games", "2"]


def main_job(args, env, check=True, timeout=600):
    proc = subprocess.run([sys.executable, "-m", "experiments.selfplay", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def read_metrics(run_dir):
    return [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "override, field",
    [
        (["--game.size", "3"], "game.size"),
        (["--search.num-simulations", "-1"], "search.num_simulations"),
        (["--decay.gamma", "1.5"], "decay.gamma"),
        (["--decay.gamma", "0"], "decay.gamma"),
        (["--game.rule", "caro"], "game.rule"),
        (["--gating.num-games", "3"], "gating.num_games"),
    ],
)
def test_bad_config_fails_before_compiling_naming_the_field(tmp_path, capsys, override, field):
    from experiments import selfplay

    t0 = time.perf_counter()
    assert selfplay.main(["--preset", "smoke", "--out", str(tmp_path / "r"), *override]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field} ") and err.count("\n") == 1
    assert not (tmp_path / "r").exists()  # nothing written
    assert time.perf_counter() - t0 < 10  # generous: it must not have compiled anything


def test_config_api_validation():
    cfg = get_preset("smoke")
    with pytest.raises(ConfigError, match="search.num_simulations"):
        cfg.replace(**{"search.num_simulations": 0})
    with pytest.raises(ConfigError, match="unknown config field"):
        cfg.replace(**{"search.num_sims": 3})
    assert Config.from_dict(json.loads(cfg.to_json())) == cfg


@pytest.mark.slow
@pytest.mark.long
def test_smoke_run_then_kill_and_resume_matches_uninterrupted(tmp_path, env):
    full = tmp_path / "full"
    first = main_job([*SMALL, "--iterations", "5", "--out", str(full)], env)
    assert "WARNING" not in first.stderr and "Traceback" not in first.stderr, first.stderr
    m_full = read_metrics(full)
    # Iteration 0 is the untrained net's evaluation against random.
    assert [m["iteration"] for m in m_full] == [0, 1, 2, 3, 4, 5]
    assert (full / "checkpoints" / "5").is_dir()
    assert list((full / "tb").glob("events.out.tfevents.*"))
    assert (full / "config.json").exists()
    assert "train/loss" in m_full[-1] and "eval/vs_random_score" in m_full[2]
    assert "eval/policy_vs_random_score" in m_full[0]

    # Kill a second run with SIGKILL once its first iteration is checkpointed.
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "experiments.selfplay", *SMALL,
                             "--iterations", "5", "--out", str(killed)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while not (killed / "checkpoints" / "1").is_dir():
        assert proc.poll() is None, "run ended before it could be killed"
        assert time.time() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(read_metrics(killed)) if (killed / "metrics.jsonl").exists() else 0
    assert done < 6, "the run finished before the kill; nothing was tested"

    # A fresh run into the same directory is refused; --resume finishes it.
    refused = main_job([*SMALL, "--iterations", "5", "--out", str(killed)], env, check=False)
    assert refused.returncode == 2 and "--resume" in refused.stderr
    resumed = main_job(["--out", str(killed), "--resume", "--quiet"], env)
    assert "resumed" in resumed.stdout
    assert "WARNING" not in resumed.stderr and "Traceback" not in resumed.stderr, resumed.stderr
    m_resumed = read_metrics(killed)
    assert [m["iteration"] for m in m_resumed] == [0, 1, 2, 3, 4, 5]
    for a, b in zip(m_full, m_resumed, strict=True):
        assert deterministic(a) == deterministic(b)

    # Resuming a complete run does nothing and says so.
    again = main_job(["--out", str(killed), "--resume", "--quiet"], env)
    assert "complete" in again.stdout
    # Extending it with --iterations continues from 5.
    main_job(["--out", str(killed), "--resume", "--quiet", "--iterations", "6"], env)
    assert [m["iteration"] for m in read_metrics(killed)] == [0, 1, 2, 3, 4, 5, 6]
    # The run keeps its new length: a plain --resume after a stop continues to it.
    assert checkpoint.read_config(killed).iterations == 6
    # (Any other change on --resume is refused, naming the field:
    # test_errors.test_resume_refuses_other_settings_and_accepts_its_own.)

    # A corrupt checkpoint gives a one-line error naming the intact one, and is left as
    # it was (tests/test_errors.py resumes from the intact one).
    corrupt = tmp_path / "corrupt"
    shutil.copytree(full, corrupt)
    step_dir = corrupt / "checkpoints" / "5" / "state"
    victims = sorted(p for p in step_dir.rglob("*") if p.is_file() and p.stat().st_size > 0)
    assert victims
    for p in victims:
        p.write_bytes(b"\0garbage")
    before = {p: p.read_bytes() for p in corrupt.rglob("*") if p.is_file()}
    proc = main_job(["--out", str(corrupt), "--resume", "--iterations", "6"], env, check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "checkpoints/5 is damaged" in proc.stderr and "--resume-from 4" in proc.stderr
    after = {p: p.read_bytes() for p in corrupt.rglob("*") if p.is_file()}
    assert before == after

    # A checkpoint of another board size (config edited by hand) is refused too.
    mismatch = tmp_path / "mismatch"
    shutil.copytree(full, mismatch)
    cfg = json.loads((mismatch / "config.json").read_text())
    cfg["game"]["size"] = 9
    (mismatch / "config.json").write_text(json.dumps(cfg))
    proc = main_job(["--out", str(mismatch), "--resume", "--iterations", "6"], env,
                    check=False)
    assert proc.returncode == 2 and "does not fit the config in" in proc.stderr


@pytest.mark.long
def test_iterations_do_not_recompile():
    """Each jitted phase compiles once: a second iteration (new data, new keys,
    gating and evaluation again) must hit the compilation cache."""
    from agz_jax.training import run

    cfg = get_preset("smoke").replace(**{
        "game.size": 5, "net.filters": 4, "net.value_hidden": 4, "selfplay.num_games": 2,
        "search.num_simulations": 2, "gating.num_games": 2, "gating.num_simulations": 2,
        "eval.every": 1, "eval.num_games": 2, "eval.num_simulations": 2,
        "train.batch_size": 4, "train.min_replay": 1, "train.steps_per_iteration": 2})
    comps = run.build(cfg)
    state = run.init_state(comps)
    for _ in range(2):
        state, metrics = run.run_iteration(comps, state)
        assert metrics["train/trained"] == 1.0 and "gating/score" in metrics
        assert "eval/vs_random_score" in metrics
    for name in ("selfplay", "ingest", "train", "gate", "evaluate"):
        assert getattr(comps, name)._cache_size() == 1, name


def test_presets_are_the_papers_where_they_say_so():
    paper = get_preset("paper")
    assert (paper.game.size, paper.game.rule) == (15, "freestyle")
    assert (paper.net.filters, paper.net.blocks, paper.net.double) == (32, 2, True)
    assert (paper.search.algorithm, paper.search.c_puct) == ("puct", 5.0)
    assert (paper.search.num_simulations, paper.gating.num_simulations) == (1600, 400)
    assert paper.decay.gamma == 0.95
    assert (paper.selfplay.move_policy, paper.selfplay.tau_base, paper.selfplay.tau_min) == (
        "semi_stochastic", 0.8, 0.04)
    t = paper.train
    assert (t.learning_rate, t.momentum, t.nesterov, t.l2, t.batch_size) == (
        2e-3, 0.9, True, 1e-4, 512)
