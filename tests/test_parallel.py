"""Data parallelism: 4 forced host devices against 1, and 2 processes (jax.distributed).

Each multi-device check runs in a subprocess, since the device count of a JAX
process is fixed when its backend starts.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import TEST_XLA_FLAGS

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.studies import sweep
from agz_jax.training import parallel

ROOT = Path(__file__).resolve().parents[1]

# A config small enough to compile and play in seconds.
TINY = {
    "game.size": 7, "net.filters": 8, "net.blocks": 1, "net.value_hidden": 8,
    "search.num_simulations": 4, "selfplay.num_games": 8, "train.batch_size": 16,
    "train.min_replay": 1, "train.steps_per_iteration": 1, "gating.enabled": False,
    "eval.every": 0,
}

# Runs in a process with 4 CPU devices: self-play, ingest and one train step with a
# mesh of 1 device and of 4, from the same state and keys; saves both results.
WORKER = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    from agz_jax.training import run
    from agz_jax.config.presets import get_preset

    overrides, out = json.loads(sys.argv[1]), sys.argv[2]
    assert jax.device_count() == 4, jax.devices()
    arrays, info, state = {}, {}, None
    for devices in (1, 4):
        cfg = get_preset("smoke").replace(**overrides, **{"parallel.devices": devices})
        comps = run.build(cfg)
        # One initial state (its init compiles once), replicated on each mesh.
        state = comps.sharder.replicate(state or run.init_state(comps))
        k_play, k_train = jax.random.split(jax.random.PRNGKey(7))
        traj, final, stats = comps.selfplay(state.best, k_play)
        buffer = comps.ingest(state.replay, traj, final)
        train = comps.train.lower(state.train, buffer, k_train).compile()
        train_state, metrics = train(state.train, buffer, k_train)
        hlo = train.as_text()
        # The same call again: bit-identical (determinism on a sharded mesh).
        again = (comps.selfplay(state.best, k_play)[0].policy,
                 jax.tree.leaves(train(state.train, buffer, k_train)[0].variables))
        rerun_identical = bool(np.array_equal(again[0], traj.policy)) and all(
            np.array_equal(x, y)
            for x, y in zip(again[1], jax.tree.leaves(train_state.variables)))
        info[devices] = {
            "traj_devices": len(traj.obs.sharding.device_set),
            "traj_shard_games": traj.obs.addressable_shards[0].data.shape[1],
            "params_devices": len(jax.tree.leaves(train_state.variables)[0].sharding.device_set),
            "train_all_reduce": "all-reduce" in hlo,
            "rerun_identical": rerun_identical,
        }
        leaves = {
            "action": traj.action, "policy": traj.policy, "winner": final.winner,
            "buffer_obs": buffer.obs, "buffer_z": buffer.z, "buffer_size": buffer.size,
            **{f"stats_{k}": v for k, v in stats.items()},
            **{f"metric_{k}": v for k, v in metrics.items()},
            **{f"param_{i}": v for i, v in enumerate(jax.tree.leaves(train_state.variables))},
        }
        arrays.update({f"{devices}/{k}": np.asarray(v) for k, v in leaves.items()})
    np.savez(out, **arrays)
    print(json.dumps(info))
""")


def forced_devices_env(n: int) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        f" --xla_force_host_platform_device_count={n}").strip()
    env["AGZ_JAX_NO_CACHE"] = "1"
    env.pop("JAX_NUM_PROCESSES", None)
    return env


@pytest.mark.long
def test_four_devices_equal_one_device(tmp_path):
    import json

    out = tmp_path / "results.npz"
    proc = subprocess.run([sys.executable, "-c", WORKER, json.dumps(TINY), str(out)], cwd=ROOT,
                          env=forced_devices_env(4), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    # The games really were split: 8 games, 2 per device; params replicated on 4.
    assert info["4"]["traj_devices"] == 4 and info["4"]["traj_shard_games"] == 2
    assert info["1"]["traj_devices"] == 1 and info["1"]["traj_shard_games"] == 8
    assert info["4"]["params_devices"] == 4
    # Gradients (and BatchNorm batch statistics) are summed over devices by a collective.
    assert info["4"]["train_all_reduce"] and not info["1"]["train_all_reduce"]
    assert info["1"]["rerun_identical"] and info["4"]["rerun_identical"]

    res = np.load(out)
    names = sorted(k.split("/", 1)[1] for k in res.files if k.startswith("1/"))
    assert any(n.startswith("param_") for n in names) and "metric_loss" in names
    for name in names:
        one, four = res[f"1/{name}"], res[f"4/{name}"]
        assert one.shape == four.shape, name
        if one.dtype.kind in "iub":
            # Same games, move for move, and the same replay contents.
            np.testing.assert_array_equal(one, four, err_msg=name)
        else:
            np.testing.assert_allclose(one, four, rtol=1e-4, atol=1e-5, err_msg=name)
    # The training step did change the parameters (the comparison is not vacuous).
    assert res["1/metric_loss"].shape == (2,)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(n: int, args: list[str], env: dict) -> list[subprocess.CompletedProcess]:
    """``n`` processes of the main job joined by jax.distributed on localhost. Their
    output goes to files, not pipes: a process blocked on a full pipe that nobody
    reads would hold the other at the next collective."""
    port = free_port()
    with tempfile.TemporaryDirectory() as logs:
        files = [(open(Path(logs) / f"{i}.out", "w+"), open(Path(logs) / f"{i}.err", "w+"))
                 for i in range(n)]
        procs = [
            subprocess.Popen([sys.executable, "-m", "experiments.selfplay", *args,
                              "--num-processes", str(n), "--process-id", str(i),
                              "--coordinator", f"127.0.0.1:{port}"],
                             cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
            for i, (out, err) in enumerate(files)
        ]
        def written(f) -> str:
            f.seek(0)
            return f.read()

        deadline = time.monotonic() + 600
        outs = []
        try:
            for p, (out, err) in zip(procs, files, strict=True):
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
                outs.append(subprocess.CompletedProcess(p.args, p.returncode, written(out),
                                                        written(err)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            tails = [f"process {i}:\n{written(out)[-2000:]}\n{written(err)[-2000:]}"
                     for i, (out, err) in enumerate(files)]
            raise AssertionError("the processes did not finish in 600 s\n"
                                 + "\n".join(tails)) from None
        finally:
            for out, err in files:
                out.close()
                err.close()
    return outs


def hashes(outs) -> list[str]:
    found = []
    for o in outs:
        m = re.search(r"params sha256 ([0-9a-f]{64}) \(process (\d)/2\)", o.stdout)
        assert m, o.stdout[-2000:] + o.stderr[-2000:]
        found.append(m.group(1))
    return found


LONG = pytest.mark.skipif(not os.environ.get("AGZ_JAX_LONG_TESTS"),
                          reason="AGZ_JAX_LONG_TESTS=1: ~50 s more, and the resume ~80 s")


@pytest.mark.slow
@pytest.mark.parametrize("flags, iterations", [
    pytest.param([], 1, marks=LONG), (["--checkpoint.asynchronous"], 2)],
    ids=["synchronous", "asynchronous"])
@pytest.mark.long
def test_two_processes_run_an_iteration_and_agree(tmp_path, flags, iterations):
    """Asynchronous: checkpoint 1 is written (orbax's collective commit) while both
    processes play iteration 2: the gpu preset's way. The synchronous (default)
    way, whose commit is the same collective one waited for, and a two-process
    resume also run under AGZ_JAX_LONG_TESTS=1, which ``make test-long`` sets (each
    costs two processes' compilations on the suite's two cores)."""
    run_dir = tmp_path / "run"
    env = forced_devices_env(1)
    # XLA's own settings, as a user runs it, not the suite's (conftest.TEST_XLA_FLAGS):
    # under those (2026-11-29, jax 0.10.2) the two processes' resume waited forever
    # on each other in its first self-play; with XLA's defaults it finishes.
    env["XLA_FLAGS"] = " ".join(f for f in env["XLA_FLAGS"].split()
                                if f not in TEST_XLA_FLAGS)
    env.pop("AGZ_JAX_NO_CACHE")  # for the resume below (AGZ_JAX_LONG_TESTS=1)
    env["AGZ_JAX_CACHE_DIR"] = str(tmp_path / "xla_cache")
    args = ["--preset", "smoke", "--quiet", "--out", str(run_dir), "--iterations",
            str(iterations), *flags, *sweep.to_flags(TINY)]
    outs = launch(2, args, env)
    for i, o in enumerate(outs):
        assert o.returncode == 0, f"process {i}\n{o.stdout[-3000:]}\n{o.stderr[-3000:]}"
    assert "2 device(s) on 2 processes" in outs[0].stdout
    assert outs[1].stdout.strip().splitlines()[-1].startswith("params sha256")  # quiet else
    first = hashes(outs)
    assert first[0] == first[1]
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    # written once, by process 0
    assert len(lines) == iterations and '"train/loss"' in lines[0]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        str(s) for s in range(max(0, iterations - 1), iterations + 1)]  # all committed

    if iterations > 1:
        return
    # The synchronous run (AGZ_JAX_LONG_TESTS=1): both processes restore the
    # checkpoint and continue in step (~80 s more CPU: only process 0 finds its
    # executables in the cache).
    outs = launch(2, ["--out", str(run_dir), "--resume", "--quiet", "--iterations", "2"], env)
    for i, o in enumerate(outs):
        assert o.returncode == 0, f"process {i}\n{o.stdout[-3000:]}\n{o.stderr[-3000:]}"
    assert "resumed" in outs[0].stdout
    second = hashes(outs)
    assert second[0] == second[1] != first[0]
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 2


# ---------------------------------------------------------------- bad input, no compile


def test_batches_must_split_over_the_devices():
    cfg = get_preset("smoke")
    with pytest.raises(ConfigError, match="selfplay.num_games must be a multiple of the 3"):
        cfg.replace(**{"parallel.devices": 3})
    with pytest.raises(ConfigError, match="train.batch_size must be a multiple of the 64"):
        cfg.replace(**{"parallel.devices": 64, "selfplay.num_games": 64})
    with pytest.raises(ConfigError, match="parallel.devices"):
        cfg.replace(**{"parallel.devices": -1})
    n = jax.device_count()
    with pytest.raises(ConfigError, match=f"at most the {n} devices"):
        parallel.make_mesh(cfg.replace(**{"parallel.devices": 8 * n}).parallel)
    assert parallel.make_mesh(cfg.parallel).size == n  # 0: every device


@pytest.mark.parametrize("flags, env, message", [
    ((None, "2", None), {}, "--coordinator / JAX_COORDINATOR_ADDRESS must be HOST:PORT"),
    (("h:1", "2", None), {}, "--process-id / JAX_PROCESS_ID must be set"),
    (("h:1", "2", "2"), {}, "must be in 0..1"),
    (("h:1", "two", "0"), {}, "--num-processes / JAX_NUM_PROCESSES must be an integer"),
    (("h:1", None, "0"), {}, "--num-processes / JAX_NUM_PROCESSES must be set"),
    ((None, None, None), {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}, "HOST:PORT"),
])
def test_bad_host_settings_are_named(flags, env, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parallel.hosts_from(*flags, environ=env)


def test_host_settings_from_flags_or_environment():
    assert parallel.hosts_from(environ={}) is None
    assert parallel.hosts_from(None, "1", None, environ={}) is None
    env = {"JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3", "JAX_COORDINATOR_ADDRESS": "a:9"}
    assert parallel.hosts_from(environ=env) == parallel.Hosts("a:9", 4, 3)
    assert parallel.hosts_from("b:1", "2", "0", environ=env) == parallel.Hosts("b:1", 2, 0)
    assert parallel.hosts_from(None, "auto", None, environ={}) == parallel.Hosts(None, None, None)


def test_main_job_refuses_bad_hosts_before_compiling(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "experiments.selfplay", "--preset", "smoke",
                           "--out", str(tmp_path / "r"), "--num-processes", "2"], cwd=ROOT,
                          env=forced_devices_env(1), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--coordinator" in proc.stderr
    assert not (tmp_path / "r").exists()
