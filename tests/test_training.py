"""agz_jax.training.driver.train, the main job called as a function: its files, a resume,
its refusals, hooks that add metrics, and Ctrl-C."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.nets import checkpoint
from agz_jax.training import cli
from agz_jax.training import driver as training

# A smoke run trimmed further (tests/test_main.py's SMALL): the point is the bookkeeping.
TINY = {"selfplay.num_games": 4, "gating.num_games": 2, "eval.every": 2,
        "eval.num_games": 2, "iterations": 2}


def tiny():
    return get_preset("smoke").replace(**TINY)


def lines_of(run_dir):
    return [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]


class Recorder(training.Hook):
    """Every call it receives; adds ``hook/iteration`` to each line."""

    def __init__(self):
        self.calls = []

    def on_start(self, run_dir, state):
        self.calls.append(("start", int(state.iteration)))

    def before_iteration(self, iteration):
        self.calls.append(("before", iteration))

    def after_iteration(self, iteration, metrics):
        self.calls.append(("after", iteration))
        assert "selfplay/games" in metrics  # the iteration's own metrics, before the line
        return {"hook/iteration": float(iteration)}

    def on_end(self, summary):
        self.calls.append(("end", summary.iterations))


@pytest.mark.long
def test_train_writes_the_run_resumes_it_and_logs_the_hooks_metrics(tmp_path):
    run_dir = tmp_path / "run"
    out = io.StringIO()
    console = Console(file=out, highlight=False, soft_wrap=True)
    hook = Recorder()
    summary = training.train(tiny(), run_dir, hooks=[hook, lambda it, m: {"hook/plain": 1.0}],
                             console=console, preset="smoke")

    # The files of a run, as the command writes them.
    assert checkpoint.read_config(run_dir) == tiny()
    assert checkpoint.all_steps(run_dir) == [1, 2]  # the last two kept
    assert (run_dir / "tb").is_dir() and not (run_dir / "init_from.txt").exists()
    lines = lines_of(run_dir)
    assert [m["iteration"] for m in lines] == [0, 1, 2]  # 0: the untrained net's evaluation
    assert [m.get("hook/iteration") for m in lines] == [None, 1.0, 2.0]
    assert [m.get("hook/plain") for m in lines] == [None, 1.0, 1.0]
    assert all("time/iteration_s" in m for m in lines[1:])
    assert hook.calls == [("start", 0), ("before", 1), ("after", 1), ("before", 2),
                          ("after", 2), ("end", 2)]

    # The summary: what it printed and returned.
    text = out.getvalue()
    assert text.startswith(f"run {run_dir}: preset smoke, 7x7")
    assert "it    0/2 | untrained net vs random" in text and "it    2/2 | games/s" in text
    assert summary.text in text and summary.text.startswith(f"done: 2 iterations in {run_dir}")
    assert summary.iterations == 2 and summary.history == lines
    assert re.fullmatch(r"[0-9a-f]{64}", summary.params_hash)

    # A new run in its directory is refused; so is a resume that changes the config.
    with pytest.raises(ConfigError, match="already holds a run"):
        training.train(tiny(), run_dir, console=console)
    with pytest.raises(ConfigError, match="search.num_simulations differs"):
        training.train(tiny().replace(**{"search.num_simulations": 3}), run_dir, resume=True,
                       console=console)
    with pytest.raises(ConfigError, match="fewer than the 2 iterations"):
        training.train(None, run_dir, resume=True, iterations=1, console=console)

    # Extended by one iteration: the earlier lines kept, the new one hooked.
    hook = Recorder()
    quiet = Console(file=io.StringIO(), soft_wrap=True)
    more = training.train(None, run_dir, resume=True, iterations=3, hooks=[hook],
                          console=quiet, quiet=True)
    assert quiet.file.getvalue().startswith(f"resumed {run_dir} at iteration 2")
    assert hook.calls == [("start", 2), ("before", 3), ("after", 3), ("end", 3)]
    lines = lines_of(run_dir)
    assert [m["iteration"] for m in lines] == [0, 1, 2, 3] and lines[3]["hook/iteration"] == 3.0
    assert checkpoint.read_config(run_dir).iterations == 3
    assert checkpoint.all_steps(run_dir) == [2, 3]
    # Complete: nothing to do, the same nets.
    again = training.train(None, run_dir, resume=True, console=quiet)
    assert again.iterations == 3 and again.params_hash == more.params_hash
    assert "nothing to do" in again.text


@pytest.mark.long
def test_train_stopped_keeps_its_checkpoint_and_resumes(tmp_path):
    run_dir = tmp_path / "run"
    config = tiny().replace(**{"eval.every": 0})
    quiet = Console(file=io.StringIO(), soft_wrap=True)

    def ctrl_c(iteration, metrics):
        if iteration == 2:
            raise KeyboardInterrupt

    with pytest.raises(training.Interrupted) as stopped:
        training.train(config, run_dir, hooks=[ctrl_c], console=quiet)
    assert stopped.value.status == cli.INTERRUPTED and stopped.value.step == 1
    assert [m["iteration"] for m in lines_of(run_dir)] == [1]
    summary = training.train(None, run_dir, resume=True, console=quiet)
    assert [m["iteration"] for m in lines_of(run_dir)] == [1, 2]
    assert summary.iterations == 2


def test_hooks_are_checked(tmp_path):
    with pytest.raises(TypeError, match="a hook is a callable"):
        training.train(tiny(), tmp_path / "r", hooks=[3])
    with pytest.raises(ValueError, match="already in the iteration's line"):
        training._add_metrics({"a": 1.0}, {"a": 2.0})
