"""experiments.studies.capacity: fresh nets of several sizes fitted to a run's replay."""

from __future__ import annotations

import json
import math

import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.nets import checkpoint
from agz_jax.training import replay
from experiments.studies import capacity
from tests.test_campaign import tiny_run


@pytest.mark.parametrize("written", [7, 10, 23])
def test_the_newest_examples_are_held_out_in_the_order_written(written):
    # A ring of 10 filled by replay.add, in chunks, with z the example's number.
    buf = replay.init(1, 10, (2, 2, 1), 4)
    for lo in range(0, written, 4):
        n = min(4, written - lo)
        buf = replay.add(buf, replay.Examples(
            obs=jnp.zeros((n, 2, 2, 1)), policy=jnp.zeros((n, 4)),
            z=jnp.arange(lo, lo + n, dtype=jnp.float32), to_play=jnp.zeros(n, jnp.int32),
            valid=jnp.ones(n, bool)))
    kept = list(range(max(0, written - 10), written))  # what the ring still holds
    train, held = capacity.split_ring(np.asarray(buf.obs[0]), np.asarray(buf.policy[0]),
                                      np.asarray(buf.z[0]), int(buf.size[0]),
                                      int(buf.ptr[0]), 3)
    assert list(train[2]) == kept[:-3] and list(held[2]) == kept[-3:]
    for bad in (0, len(kept)):
        with pytest.raises(capacity.CapacityError, match="--held-out"):
            capacity.split_ring(np.asarray(buf.obs[0]), np.asarray(buf.policy[0]),
                                np.asarray(buf.z[0]), int(buf.size[0]), int(buf.ptr[0]), bad)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(run directory, its last state): two iterations of a tiny run whose games end
    within them, so its replay holds examples."""
    run_dir = tmp_path_factory.mktemp("capacity") / "run"
    return run_dir, tiny_run(run_dir, 2, **{"selfplay.steps": 32, "gating.every": 10})


@pytest.mark.long
def test_nets_are_fitted_and_measured_on_the_held_out_games(run, capsys):
    run_dir, state = run
    size = int(state.replay.size[1])
    assert capacity.main([str(run_dir), "--nets", "4x1,8x1", "--steps", "4", "--eval-every",
                          "3", "--held-out", "5", "--ring", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoint"] == 2 and out["ring"] == 1
    assert out["train_examples"] + out["held_out"] == size
    assert [r["net"] for r in out["nets"]] == ["4x1", "8x1"]
    assert out["nets"][0]["params"] < out["nets"][1]["params"]
    for row in out["nets"]:
        assert [p["step"] for p in row["curve"]] == [0, 3, 4]
        for p in row["curve"]:
            assert math.isfinite(p["value_loss"]) and p["policy_loss"] > 0
        # The net trained: its held-out losses moved from its start.
        assert row["curve"][-1] != {**row["curve"][0], "step": 4}
    assert capacity.main([str(run_dir), "--nets", "4x1", "--steps", "2", "--eval-every", "2",
                          "--held-out", "5"]) == 0
    assert "4x1" in capsys.readouterr().out


@pytest.fixture(scope="module")
def unplayed(tmp_path_factory):
    """A run directory whose one checkpoint holds a fresh state: its replay is
    empty. The arguments are checked against it."""
    run_dir = tmp_path_factory.mktemp("capacity") / "unplayed"
    checkpoint.save(run_dir, 0, tiny_run(run_dir, 0), {"iteration": 0})
    return run_dir


@pytest.mark.parametrize("args, message", [
    (["--nets", "32"], "is not FILTERSxBLOCKS"),
    (["--steps", "0"], "must be >= 1"),
    (["--held-out", "0"], "too few to hold any out"),
    (["--ring", "2"], "--ring must be below"),
])
def test_bad_input_is_one_line(unplayed, capsys, args, message):
    assert capacity.main([str(unplayed), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_directory_that_is_not_a_run_is_refused(tmp_path, capsys):
    assert capacity.main([str(tmp_path)]) == 2
    assert "is not a self-play run" in capsys.readouterr().err


@pytest.mark.long
def test_the_runs_best_nets_are_measured_on_the_same_examples(run, capsys):
    import jax

    from agz_jax.nets import checkpoint
    from agz_jax.training import run as run_lib

    run_dir, state = run
    assert capacity.main([str(run_dir), "--nets", "4x1", "--steps", "1", "--eval-every", "1",
                          "--held-out", "5", "--ring", "1", "--best", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["nets"]
    assert [r["trained"] for r in rows] == ["the run's best", "fresh"]
    # The reference, computed another way: the white net of the stacked best nets,
    # through the nets' own routing, on the ring's newest 5 examples.
    comps = run_lib.build(checkpoint.read_config(run_dir))
    buf = jax.tree.map(np.asarray, state.replay)
    _, (obs, policy, z) = capacity.split_ring(buf.obs[1], buf.policy[1], buf.z[1],
                                              int(buf.size[1]), int(buf.ptr[1]), 5)
    logits, value = comps.nets.evaluate(state.best, jnp.asarray(obs, jnp.float32),
                                        jnp.ones(len(z), jnp.int32))
    logp = np.asarray(jax.nn.log_softmax(logits))
    point = rows[0]["curve"][0]
    assert point["value_loss"] == pytest.approx(np.mean((z - np.asarray(value)) ** 2), rel=1e-4)
    assert point["policy_loss"] == pytest.approx(-np.mean(np.sum(policy * logp, -1)), rel=1e-4)
    assert rows[0]["params"] == comps.nets.num_params(state.best)
