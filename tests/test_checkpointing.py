"""The main job's checkpoints: their time is accounted for in every metrics line,
and the asynchronous saver (``checkpoint.asynchronous``) loses no finished
iteration and resumes equal to an unbroken run, whenever the run is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.nets import checkpoint
from agz_jax.training import cli, report, run
from experiments import selfplay as selfplay_cli
from tests.test_main import ROOT, SMALL, main_job, read_metrics

# ------------------------------------------------------------------------- accounting


def test_wall_seconds_and_selfplay_share_count_the_checkpoints():
    lines = [
        {"iteration": 0, "time/eval_s": 5.0},  # the initial evaluation: phases only
        {"iteration": 1, "time/selfplay_s": 6.0, "time/train_s": 1.0,
         run.ITERATION_S: 8.0, run.PREVIOUS_CHECKPOINT_S: 2.0},
        {"iteration": 2, "time/selfplay_s": 7.0, "time/train_s": 1.0, run.ITERATION_S: 10.0},
    ]
    assert [run.wall_seconds(m) for m in lines] == [5.0, 10.0, 10.0]
    assert run.selfplay_share(lines) == pytest.approx(13.0 / 20.0)
    assert run.selfplay_share(lines[:1]) is None  # no iteration timed as a whole
    text = report.summary(lines, 30.0, ROOT / "r", last_checkpoint_s=4.0)
    assert "self-play took 65% of the wall time of 2 iterations (20 s, checkpoints " \
           "included); checkpoints 3.0 s each on average (2 saves)" in text


def test_only_the_gpu_preset_writes_asynchronously():
    from agz_jax.config.presets import PRESETS

    assert {name for name, c in PRESETS.items() if c.checkpoint.asynchronous} == {"gpu"}


# ------------------------------------------------------------------------- the saver


@pytest.mark.parametrize("asynchronous", [False, True])
def test_saver_keeps_what_it_was_given_while_the_next_step_donates_it(tmp_path, asynchronous):
    """The arrays handed to ``save`` are what gets written, even when the next
    computation donates their buffers while the write is still going on."""
    state = {"iteration": jnp.int32(1), "replay": jnp.arange(1 << 16, dtype=jnp.float32)}
    expected = jax.device_get(state)
    overwrite = jax.jit(lambda x: x * 0 - 1, donate_argnums=0)
    with checkpoint.Saver(tmp_path, asynchronous=asynchronous) as saver:
        saver.save(1, state, {"iteration": 1})
        junk = jax.block_until_ready(overwrite(state["replay"]))
        assert float(junk[0]) == -1.0
        saver.save(2, {**state, "iteration": jnp.int32(2), "replay": junk}, {"iteration": 2})
    like = jax.tree.map(jnp.zeros_like, expected)
    restored, meta, step = checkpoint.restore(tmp_path, like, step=1)
    np.testing.assert_array_equal(restored["replay"], expected["replay"])
    assert meta == {"iteration": 1} and checkpoint.all_steps(tmp_path) == [1, 2]


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("keep_every, kept", [(0, [5, 6]), (3, [0, 3, 5, 6]),
                                              (2, [0, 2, 4, 5, 6])])
def test_saver_keeps_the_last_two_and_every_multiple_of_keep_every(tmp_path, asynchronous,
                                                                    keep_every, kept):
    with checkpoint.Saver(tmp_path, asynchronous=asynchronous, keep_every=keep_every) as saver:
        for step in range(7):
            saver.save(step, {"iteration": jnp.int32(step)}, {"iteration": step})
    assert checkpoint.all_steps(tmp_path) == kept
    # A kept early step restores as written.
    restored, meta, _ = checkpoint.restore(tmp_path, {"iteration": jnp.int32(0)}, step=kept[0])
    assert int(restored["iteration"]) == kept[0] and meta == {"iteration": kept[0]}


def test_leaving_the_saver_by_an_exception_waits_for_the_pending_write(tmp_path):
    state = {"x": jnp.arange(1 << 18, dtype=jnp.float32)}
    with pytest.raises(KeyboardInterrupt):
        with checkpoint.Saver(tmp_path, asynchronous=True) as saver:
            saver.save(3, state, {"iteration": 3})
            raise KeyboardInterrupt
    assert checkpoint.all_steps(tmp_path) == [3]  # committed before the exception left
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name != "3"]


def test_a_save_that_waits_for_the_previous_write_warns_nothing(tmp_path, monkeypatch,
                                                                caplog):
    """The main job logs the wait itself; orbax's warning about it is dropped."""
    import orbax.checkpoint._src.checkpointers.async_checkpointer as ac

    commit = ac._on_commit_callback

    def slow(*args, **kwargs):
        time.sleep(1.5)
        return commit(*args, **kwargs)

    monkeypatch.setattr(ac, "_on_commit_callback", slow)
    state = {"x": jnp.arange(16, dtype=jnp.float32)}
    with caplog.at_level("INFO"), checkpoint.Saver(tmp_path, asynchronous=True) as saver:
        saver.save(1, state, {"iteration": 1})
        assert saver.save(2, state, {"iteration": 2}) > 1.0  # it waited for step 1's commit
    assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text
    assert checkpoint.all_steps(tmp_path) == [1, 2]


def test_a_failed_background_write_stops_the_next_save(tmp_path, monkeypatch):
    """A write that fails in orbax's thread (a full disk, say) is not lost without
    a word: the next save raises it, and the step is not listed."""
    import orbax.checkpoint._src.checkpointers.async_checkpointer as ac

    def fail(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(ac, "_on_commit_callback", fail)
    state = {"x": jnp.arange(16, dtype=jnp.float32)}
    with pytest.raises(OSError, match="no space left"):
        with checkpoint.Saver(tmp_path, asynchronous=True) as saver:
            saver.save(1, state, {"iteration": 1})
            saver.save(2, state, {"iteration": 2})
    assert checkpoint.all_steps(tmp_path) == []


# ------------------------------------------------------------------------- the main job

# Runs experiments.selfplay.main with orbax's commit of checkpoint HOLD held back:
# it touches RUN/holding and sleeps SECONDS before committing, as a slow disk would.
# ``atomicity.on_commit_callback`` is orbax 0.12.8's step that renames the step's
# temporary directory, in the main thread for a synchronous save and in the
# background thread for an asynchronous one (the tests need that version's
# internals to time their signals).
HELD_COMMIT = """
import signal, sys, time
from pathlib import Path
from orbax.checkpoint._src.path import atomicity
from experiments import selfplay

hold, seconds, out = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])
commit = atomicity.on_commit_callback

async def held(tmp_dir, *args, **kwargs):
    if tmp_dir.get_final().name == hold:
        (out / "holding").touch()
        time.sleep(seconds)
    return await commit(tmp_dir, *args, **kwargs)

atomicity.on_commit_callback = held
# Ctrl-C raises KeyboardInterrupt, as in a terminal (a child of a background job
# would otherwise inherit SIGINT ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.exit(selfplay.main(["--out", str(out), *sys.argv[4:]]))
"""

ASYNC = ["--checkpoint.asynchronous"]


def interrupted(run_dir, env, seconds: float, when, what: str, sig) -> subprocess.Popen:
    """An asynchronous run of 4 iterations whose checkpoint 2 commits ``seconds``
    late, sent ``sig`` as soon as ``when()`` (``what``) holds."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD_COMMIT, "2", str(seconds), str(run_dir), *SMALL, *ASYNC,
         "--iterations", "4"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600
    while not when():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()}"
        assert time.time() < deadline, f"no {what} in 600 s"
        time.sleep(0.02)
    proc.send_signal(sig)
    return proc


def lines_through(run_dir, it: int) -> bool:
    path = run_dir / "metrics.jsonl"
    return path.exists() and any(json.loads(ln)["iteration"] >= it
                                 for ln in path.read_text().splitlines())


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory, env):
    """A synchronous run of 4 iterations: what every broken run must equal."""
    run_dir = tmp_path_factory.mktemp("unbroken") / "run"
    proc = main_job([*SMALL, "--iterations", "4", "--out", str(run_dir),
                     "--checkpoint.keep-every", "3"], env)
    # The last two checkpoints, and the multiples of checkpoint.keep_every.
    assert checkpoint.all_steps(run_dir) == [0, 3, 4]
    lines = read_metrics(run_dir)
    # Every iteration is timed as a whole, and this process wrote every checkpoint
    # before the line that accounts for it.
    for m in lines[1:]:
        assert m[run.ITERATION_S] >= m["time/selfplay_s"] + m["time/train_s"]
        assert m[run.PREVIOUS_CHECKPOINT_S] > 0
    assert "self-play took" in proc.stdout and "checkpoints included" in proc.stdout
    return lines, proc.stdout.split("params sha256 ")[1].split()[0]


def assert_equal_runs(lines, digest, run_dir, out: str):
    assert [m["iteration"] for m in read_metrics(run_dir)] == [m["iteration"] for m in lines]
    for a, b in zip(lines, read_metrics(run_dir), strict=True):
        assert run.deterministic(a) == run.deterministic(b)
    assert f"params sha256 {digest}" in out


@pytest.mark.slow
@pytest.mark.long
def test_killed_during_an_asynchronous_write_resumes_equal_to_unbroken(tmp_path, env,
                                                                      unbroken):
    lines, digest = unbroken
    run_dir = tmp_path / "run"
    # Checkpoint 2's commit is held while iteration 3 runs; the kill comes once
    # iteration 3's line is written and the commit is being held (the background
    # write may reach its commit only after a short iteration 3 has ended): lines
    # 2 and 3 are logged, checkpoint 2 is not.
    interrupted(run_dir, env, 600,
                lambda: lines_through(run_dir, 3) and (run_dir / "holding").exists(),
                "iteration 3's line and checkpoint 2's held commit", signal.SIGKILL).wait()
    assert (run_dir / "holding").exists()
    assert checkpoint.latest_step(run_dir) == 1  # 2 was never committed: not finished
    assert [m["iteration"] for m in read_metrics(run_dir)][-2:] == [2, 3]

    resumed = main_job(["--out", str(run_dir), "--resume", *ASYNC], env)
    assert "resumed" in resumed.stdout and "at iteration 1" in resumed.stdout
    assert "Traceback" not in resumed.stderr and "WARNING" not in resumed.stderr, resumed.stderr
    assert_equal_runs(lines, digest, run_dir, resumed.stdout)
    assert checkpoint.all_steps(run_dir) == [3, 4]
    # The unfinished write's temporary directory was removed on resume.
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["3", "4"]
    # The resumed process saved no checkpoint before its first iteration.
    assert run.PREVIOUS_CHECKPOINT_S not in read_metrics(run_dir)[2]
    assert run.PREVIOUS_CHECKPOINT_S in read_metrics(run_dir)[3]


@pytest.mark.slow
@pytest.mark.long
def test_ctrl_c_waits_for_the_pending_write_and_resumes_equal_to_unbroken(tmp_path, env,
                                                                         unbroken):
    lines, digest = unbroken
    run_dir = tmp_path / "run"
    # Checkpoint 2's commit takes 5 s more; Ctrl-C comes while it is pending.
    proc = interrupted(run_dir, env, 5, (run_dir / "holding").exists, "checkpoint 2's write",
                       signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    steps = checkpoint.all_steps(run_dir)
    # One line, no traceback: the checkpoint kept and the command that continues.
    assert proc.returncode == cli.INTERRUPTED, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (
        f"interrupted: checkpoint {steps[-1]} is kept in {run_dir}; continue with "
        f"python -m experiments.selfplay --out {run_dir} --resume")
    assert 2 in steps  # the pending write committed before the process left
    assert not [p for p in (run_dir / "checkpoints").iterdir() if not p.name.isdigit()]
    logged = [m["iteration"] for m in read_metrics(run_dir)]
    assert logged[-1] >= steps[-1]  # every committed iteration is logged

    # A resume may change the setting (results do not depend on it).
    resumed = main_job(["--out", str(run_dir), "--resume", "--checkpoint.no-asynchronous"],
                       env)
    assert_equal_runs(lines, digest, run_dir, resumed.stdout)


@pytest.mark.slow
@pytest.mark.long
def test_sigterm_during_a_synchronous_write_lets_it_commit_then_stops(tmp_path, env,
                                                                      unbroken):
    """``kill`` (or ``timeout``) while a checkpoint is written: the write commits,
    the run stops with one line and 143, and resumes equal to an unbroken run.
    (Before, SIGTERM killed the process mid-write: the logged iteration was played
    again on resume.)"""
    lines, digest = unbroken
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD_COMMIT, "2", "5", str(run_dir), *SMALL,
         "--iterations", "4"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600
    while not (run_dir / "holding").exists():
        assert proc.poll() is None, f"the run ended before checkpoint 2: {proc.communicate()}"
        assert time.time() < deadline, "no checkpoint 2 in 600 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == cli.TERMINATED == 128 + signal.SIGTERM, err
    assert "Traceback" not in err, err
    # The write under way committed, and the loop stopped before iteration 3.
    assert checkpoint.all_steps(run_dir) == [1, 2]
    assert not [p for p in (run_dir / "checkpoints").iterdir() if not p.name.isdigit()]
    assert [m["iteration"] for m in read_metrics(run_dir)] == [0, 1, 2]
    assert err.strip().splitlines()[-1] == (
        f"interrupted: checkpoint 2 is kept in {run_dir}; continue with "
        f"python -m experiments.selfplay --out {run_dir} --resume")

    resumed = main_job(["--out", str(run_dir), "--resume"], env)
    assert "at iteration 2" in resumed.stdout
    assert_equal_runs(lines, digest, run_dir, resumed.stdout)


# ``python -m experiments.selfplay ARGS`` with Ctrl-C raising KeyboardInterrupt, as in
# a terminal (a child of a background job would otherwise inherit SIGINT ignored).
AS_IN_A_TERMINAL = """
import runpy, signal
signal.signal(signal.SIGINT, signal.default_int_handler)
runpy.run_module("experiments.selfplay", run_name="__main__", alter_sys=True)
"""


@pytest.mark.long
def test_ctrl_c_from_the_command_line_says_what_is_kept_in_one_line(tmp_path, env):
    """``python -m experiments.selfplay`` as a user runs it, Ctrl-C as soon as its
    first checkpoint is written."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-c", AS_IN_A_TERMINAL, *SMALL, "--iterations", "50",
         "--out", str(run_dir)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600
    while checkpoint.latest_step(run_dir) is None:
        assert proc.poll() is None, f"the run ended before a checkpoint: {proc.communicate()}"
        assert time.time() < deadline, "no first checkpoint in 600 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == cli.INTERRUPTED, err
    step = checkpoint.latest_step(run_dir)
    # (That the command named resumes: test_ctrl_c_waits_for_the_pending_write_....)
    assert err == (f"interrupted: checkpoint {step} is kept in {run_dir}; continue with "
                   f"python -m experiments.selfplay --out {run_dir} --resume\n")


def test_ctrl_c_before_the_first_checkpoint_says_so(tmp_path, monkeypatch, capsys):
    def stopped_at_once(args, config, interrupts=None):
        args.out.mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(selfplay_cli, "run_job", stopped_at_once)
    run_dir = tmp_path / "run"
    assert selfplay_cli.main([*SMALL, "--out", str(run_dir)]) == cli.INTERRUPTED
    assert capsys.readouterr().err == (
        f"interrupted before the first checkpoint of {run_dir}: nothing to resume; run "
        "the same command again to start over\n")


# ------------------------------------------------------------------------- the measure


def test_checkpoint_cost_reports_the_states_bytes_and_seconds(tmp_path, capsys):
    from experiments.studies import checkpoint_cost

    argv = ["--preset", "smoke", "--selfplay.continuous", "--selfplay.num-games", "4",
            "--replay.capacity", "256", "--fill", "--json", "--out", str(tmp_path)]
    assert checkpoint_cost.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    # smoke: 7x7 board, 3 planes, double nets; 4 slots x 49 recorded positions.
    assert report["largest_arrays_bytes"] == {
        "replay.obs": 2 * 256 * 49 * 3, "replay.policy": 2 * 256 * 49 * 4,
        "slots.obs": 4 * 49 * 49 * 3, "slots.policy": 4 * 49 * 49 * 4}
    assert report["raw_bytes"] > sum(report["largest_arrays_bytes"].values())
    # Filled with positions, the checkpoint is not the handful of bytes zeros take.
    assert report["disk_bytes"] > report["largest_arrays_bytes"]["replay.obs"] / 4
    assert 0 < report["async_blocking_s"] <= report["async_committed_s"]
    assert report["sync_save_s"] > 0
    assert list(tmp_path.iterdir()) == []  # its checkpoints are removed


def test_checkpoint_cost_fills_positions_like_selfplays():
    from experiments.studies.checkpoint_cost import positions

    obs, policy, z = positions(np.random.default_rng(0), 500, 15, 3)
    stones = obs[..., 0].astype(int) + obs[..., 1]
    assert stones.max() == 1 and 0 < stones.sum((1, 2)).mean() < 0.25 * 225
    assert np.all(obs[..., 2] <= obs[..., 1])  # the last move is an opponent's stone
    np.testing.assert_allclose(policy.sum(1), 1.0, rtol=1e-5)
    assert np.all(policy[stones.reshape(500, -1) == 1] == 0)
    assert np.all(np.abs(z) <= 1) and set(np.sign(z)) == {-1.0, 1.0}


def test_a_swallowed_ctrl_c_is_raised_again_at_the_next_check():
    """A KeyboardInterrupt lost on the way (jax's gc callback swallows one raised
    inside it: the run went on to its end) is raised again by ``check()``."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with cli.Interrupts() as interrupts:
            interrupts.check()  # nothing pending
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)  # the handler runs between bytecodes
            except KeyboardInterrupt:
                pass  # swallowed, as an "Exception ignored" in a gc callback is
            with pytest.raises(KeyboardInterrupt):
                interrupts.check()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job's: left alone
        with cli.Interrupts():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_interrupt_swallowed_in_a_finalizer_is_kept_and_not_printed(capsys):
    """SIGTERM handled inside a finalizer (the bench's bf16 section on the H100,
    in jax's gc callback) is swallowed by Python and printed as "Exception
    ignored ... Traceback". It is recorded, so ``check()`` raises it again, and
    nothing is printed; any other unraisable exception still is."""

    class SignalsWhenCollected:
        def __init__(self, exc=None):
            self.exc = exc

        def __del__(self):
            if self.exc is not None:
                raise self.exc
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)  # the handler runs here, inside the finalizer

    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    hook = sys.unraisablehook  # pytest's (it makes warnings): Python's prints instead
    sys.unraisablehook = sys.__unraisablehook__
    try:
        with cli.Interrupts() as interrupts:
            SignalsWhenCollected()  # collected at once: the handler raises in __del__
            assert interrupts.pending
            assert "Exception ignored" not in capsys.readouterr().err
            SignalsWhenCollected(ValueError("not an interrupt"))
            assert "not an interrupt" in capsys.readouterr().err
            with pytest.raises(KeyboardInterrupt):
                interrupts.check()
        assert sys.unraisablehook is sys.__unraisablehook__
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = hook


def test_sigterm_stops_as_ctrl_c_does_and_a_deferred_section_is_not_cut():
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with cli.Interrupts() as interrupts:
            assert interrupts.status == cli.INTERRUPTED  # nothing yet: Ctrl-C's status
            # Deferred: the first signal is only recorded; the section runs to its end.
            finished = False
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.5)  # the handler runs between bytecodes
                finished = True
            assert finished and interrupts.pending
            with pytest.raises(KeyboardInterrupt):
                interrupts.check()
            assert interrupts.status == cli.TERMINATED
            # A second signal inside a deferred section raises at once.
            with pytest.raises(KeyboardInterrupt), interrupts.deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)
            assert interrupts.status == cli.INTERRUPTED
        # Outside, by default, SIGTERM raises too.
        interrupts = cli.Interrupts()
        with pytest.raises(KeyboardInterrupt), interrupts:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)
        assert interrupts.status == cli.TERMINATED
        # The defaults are back; a handler that is not the default is left alone.
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with cli.Interrupts():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
