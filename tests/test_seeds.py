"""Seeds vmapped in one compile (``agz_jax.studies.seeds``,
``experiments.studies.sweep --vmap-seeds``).

What is true on XLA:CPU, and tested here: a vmapped group is deterministic, and
a seed gives the same bits in any group of the same size; its self-play equals
the solo run's (same games, same replay), and its nets after an iteration equal
the solo run's within float tolerance, not bit for bit (XLA lowers the vmapped
convolutions differently). The run directories read back as a solo run's do.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest
from test_sweep import TINY, alone, cached_env, metrics_of

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.nets import checkpoint, models
from agz_jax.studies import seeds
from agz_jax.training import run
from experiments.studies import sweep as sweep_cli


def test_check_refuses_what_it_cannot_vmap(tmp_path, capsys):
    comps = run.build(get_preset("smoke"))
    seeds.check(comps, [0, 1])
    with pytest.raises(ConfigError, match="distinct"):
        seeds.check(comps, [1, 1])

    @dataclasses.dataclass(frozen=True)
    class TwoDevices:
        num_devices: int = 2

    with pytest.raises(ConfigError, match="parallel.devices must be 1"):
        seeds.check(dataclasses.replace(comps, sharder=TwoDevices()), [0, 1])
    one = seeds.state_bytes(comps)
    assert one > comps.config.replay.capacity * 7 * 7 * 3  # at least the replay's boards
    seeds.check(comps, [0, 1], max_bytes=2 * one)
    with pytest.raises(ConfigError, match="replay.capacity 2048 is too large to vmap 3 seeds"):
        seeds.check(comps, [0, 1, 2], max_bytes=2 * one)

    # The sweep refuses before anything runs (no sweep directory).
    out = tmp_path / "s"
    rc = sweep_cli.main(["--preset", "smoke", "--out", str(out), "--seeds", "0-3",
                         "--vmap-seeds", "--vmap-max-gb", "0.001"])
    assert rc == 2 and "replay.capacity" in capsys.readouterr().err
    assert not out.exists()


def vmapped_sweep(out: Path, seeds_: str) -> None:
    """test_sweep's tiny config, 2 iterations, the given seeds vmapped."""
    argv = ["--preset", "smoke", "--out", str(out), "--seeds", seeds_, "--vmap-seeds",
            "--set", "iterations=2", *TINY]
    assert sweep_cli.main(argv) == 0


def hashes(out: Path) -> dict[int, str]:
    recs = [json.loads(p.read_text()) for p in out.glob("runs/*/seed_*/record.json")]
    return {r["seed"]: r["params_sha256"] for r in recs}


def best_at(run_dir: Path, step: int):
    """The best net of a run directory's checkpoint ``step``."""
    config = checkpoint.read_config(run_dir)
    comps = dataclasses.replace(run.build(config), sharder=None)
    like = jax.eval_shape(lambda: run.init_state(seeds.solo(comps, config.seed)))
    return checkpoint.restore(run_dir, like, step=step)[0].best


@pytest.mark.slow
@pytest.mark.long
def test_vmapped_sweep_records_resume_and_determinism(tmp_path, tmp_path_factory,
                                                      monkeypatch, capsys):
    from tiny_models import compile_lock

    # The vmapped programs go to the session's in-process cache (conftest.py).
    monkeypatch.setenv("AGZ_JAX_CACHE_DIR", jax.config.jax_compilation_cache_dir)
    out = tmp_path / "sweep"
    vmapped_sweep(out, "0-1")
    first = capsys.readouterr().out
    assert "seeds 0,1 (vmapped)" in first
    runs = {s: out / "runs" / "base" / f"seed_{s}" for s in (0, 1)}
    rec = json.loads((runs[1] / "record.json").read_text())
    assert rec["vmap_group"] == [0, 1] and rec["final"]["iterations"] == 2
    assert "train/loss" in rec["final"] and rec["config"]["seed"] == 1
    assert "| base | 2 |" in (out / "summary.md").read_text()
    assert (out / "summary.csv").exists() and (out / "curves.png").exists()
    h = hashes(out)
    assert len(set(h.values())) == 2
    model = models.load(runs[1])  # a run directory as the main job leaves it
    assert model.config.seed == 1
    final = best_at(runs[1], 2)
    for a, b in zip(jax.tree.leaves(model.variables), jax.tree.leaves(final), strict=True):
        np.testing.assert_array_equal(a, b)

    # The same iteration alone (test_sweep's config and session cache): the same
    # metric keys and games; nets equal within float tolerance.
    env, cache = cached_env(tmp_path_factory)
    with compile_lock(cache):
        _, solo = alone(tmp_path / "alone", 1, env)
    vm = metrics_of(runs[1])
    assert sorted(vm[0]) == sorted(solo[0])
    assert {k: v for k, v in vm[0].items() if k.startswith(("selfplay/", "replay/"))} == \
        {k: v for k, v in solo[0].items() if k.startswith(("selfplay/", "replay/"))}
    assert vm[0]["train/loss"] == pytest.approx(solo[0]["train/loss"], abs=1e-5)
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(
        jax.tree.leaves(best_at(runs[1], 1)),
        jax.tree.leaves(models.load(tmp_path / "alone").variables), strict=True))
    assert diff < 1e-5

    # Resume: finished seeds are skipped.
    mtimes = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/seed_*/*")}
    vmapped_sweep(out, "0-1")
    assert capsys.readouterr().out.count("done before, skipped") == 2
    assert mtimes == {p: p.stat().st_mtime_ns for p in out.glob("runs/*/seed_*/*")}

    # A group killed while checkpointing iteration 2 (seed 0 saved it, seed 1 not;
    # no records) restarts both from iteration 1, and ends as before.
    logged = {s: metrics_of(d) for s, d in runs.items()}
    for d in runs.values():
        (d / "record.json").unlink()
    shutil.rmtree(runs[1] / "checkpoints" / "2")
    vmapped_sweep(out, "0-1")
    assert "resumed" in capsys.readouterr().out
    assert hashes(out) == h
    assert {s: metrics_of(d) for s, d in runs.items()} == logged

    # Determinism: seed 1 in another group of two (seeds 1, 2) has the same bits.
    other = tmp_path / "other"
    vmapped_sweep(other, "1-2")
    assert hashes(other)[1] == h[1]


@pytest.mark.long
def test_each_seed_gates_its_own_best_net(monkeypatch):
    # One trained iteration of seeds 3 and 4 with gating on; the gating scores
    # are forced per seed (3 wins its match, 4 loses it), so the group must
    # replace seed 3's best net by its candidate and keep seed 4's.
    config = get_preset("smoke").replace(**{
        "iterations": 1, "game.size": 5, "net.filters": 4, "net.value_hidden": 4,
        "search.num_simulations": 2, "selfplay.num_games": 4, "train.batch_size": 8,
        "train.min_replay": 1, "train.steps_per_iteration": 1, "gating.enabled": True,
        "gating.num_games": 2, "gating.num_simulations": 2, "eval.every": 0})
    group = seeds.build(config, [3, 4])
    state = seeds.init_state(group)
    real_score = seeds.arena.score
    forced = iter([1.0, 0.0])
    asked = []

    def score(result):
        asked.append(real_score(result))  # the real match of this seed
        return asked[-1]._replace(score=next(forced))

    monkeypatch.setattr(seeds.arena, "score", score)
    new, metrics = seeds.run_iteration(group, state)
    assert len(asked) == 2 and all(a.games == config.gating.num_games for a in asked)
    assert [m["gating/score"] for m in metrics] == [1.0, 0.0]
    assert [m["gating/accepted"] for m in metrics] == [1.0, 0.0]
    trained, best, before = (jax.tree.leaves(t) for t in
                             (new.train.variables, new.best, state.best))
    changed = [any(not np.array_equal(a[i], b[i]) for a, b in zip(trained, before, strict=True))
               for i in range(2)]
    assert changed == [True, True]  # both candidates trained
    for a, b, c in zip(best, trained, before, strict=True):
        np.testing.assert_array_equal(a[0], b[0])  # seed 3: the candidate
        np.testing.assert_array_equal(a[1], c[1])  # seed 4: the old best
