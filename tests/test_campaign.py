"""The campaign's export: a run's best nets into a model directory, and its ledger."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil

import numpy as np
import pytest

from agz_jax.config.presets import get_preset
from agz_jax.nets import checkpoint, models
from agz_jax.training import run
from experiments.training import campaign


def tiny_run(run_dir, iterations, **overrides):
    config = get_preset("smoke").replace(**{
        "game.size": 5, "net.filters": 4, "net.value_hidden": 4, "selfplay.num_games": 2,
        "selfplay.continuous": True, "selfplay.steps": 8, "search.num_simulations": 2,
        "gating.num_games": 2, "gating.num_simulations": 2, "eval.every": 0,
        "train.batch_size": 4, "train.min_replay": 1, "train.steps_per_iteration": 1,
        **overrides})
    comps = run.build(config)
    state = run.init_state(comps)
    checkpoint.write_config(run_dir, config)
    (run_dir / "init_from.txt").write_text("models/somewhere\n")
    log = run.MetricsLog(run_dir, keep_through=0)
    for it in range(1, iterations + 1):
        state, metrics = run.run_iteration(comps, state)
        log.write(it, metrics)
        checkpoint.save(run_dir, it, state, {"iteration": it})
    log.close()
    return state


@pytest.mark.long
def test_export_twice_replaces_the_runs_line_and_totals_add_up(tmp_path, capsys):
    run_dir, model_dir = tmp_path / "runs" / "c1", tmp_path / "campaign"
    tiny_run(run_dir, 1)
    assert campaign.main(["export", str(run_dir), "--to", str(model_dir), "--device",
                          "cpu"]) == 0
    state = tiny_run(run_dir, 2)  # the run went on (here: written again, 2 iterations)
    metrics = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    # Stopped while writing checkpoint 3: its line is logged, its checkpoint is not,
    # and the resume plays it again, so the ledger does not count it yet.
    with (run_dir / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({**metrics[-1], "iteration": 3, "selfplay/games": 1000}) + "\n")
    # Iteration 2 was stopped for half an hour (kill -STOP): logged apart, not counted.
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), run.STOPPED_S: 1800.0})
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert campaign.main(["export", str(run_dir), "--to", str(model_dir),
                          "--device", "gpu"]) == 0
    ledger = json.loads((model_dir / campaign.LEDGER).read_text())
    (line,) = ledger["runs"]
    assert line["iterations"] == 2 and line["checkpoint"] == 2
    assert line["games"] == sum(int(m["selfplay/games"]) for m in metrics)
    assert line["positions"] == 2 * 2 * 8  # slots x steps x iterations
    assert line["init_from"] == "models/somewhere" and line["device"] == "gpu"
    assert line["stopped_hours"] == 0.5
    assert line["hours"] == pytest.approx(sum(run.wall_seconds(m) for m in metrics) / 3600)
    capsys.readouterr()
    assert campaign.main(["status", "--model", str(model_dir)]) == 0
    assert "(and 0.50 h stopped, not counted)" in capsys.readouterr().out
    assert ledger["totals"]["gpu_minutes"] > 0 and ledger["totals"]["cpu_hours"] == 0
    model = models.load(model_dir)
    for a, b in zip(*(jax_leaves(v) for v in (model.variables, state.best)), strict=True):
        np.testing.assert_array_equal(a, b)
    nets = ledger["nets"]
    best = campaign.best_iteration(metrics, gated=True)  # the tiny run gates
    if best is None:  # nothing accepted: the nets are the run's initial ones
        assert nets["games"] == line["games"]
    else:
        assert nets["iteration"] == best
        assert nets["games"] == sum(int(m["selfplay/games"]) for m in metrics[:best])
    # A second run whose best nets are the same (here: a copy of the first) adds its
    # games to the totals, but the nets, and the games they were made with, stay.
    shutil.copytree(run_dir, run_dir.parent / "c2")
    assert campaign.main(["export", str(run_dir.parent / "c2"), "--to", str(model_dir),
                          "--device", "cpu"]) == 0
    again = json.loads((model_dir / campaign.LEDGER).read_text())
    assert again["totals"]["games"] == 2 * line["games"]
    assert again["nets"] == nets
    capsys.readouterr()

    # Refused before anything is written, in one line: a run of another board or
    # net (a 7x7 smoke run over a 15x15 campaign), and another run of a name the
    # ledger has (another init_from).
    before = {f.name: f.read_bytes() for f in model_dir.iterdir()}
    config = checkpoint.read_config(run_dir)
    for name, overrides, words in (
            ("board", {"game.size": 7}, "game.size = 7"),
            ("net", {"net.filters": 8}, "net.filters = 8"),
            ("features", {"features.history": config.features.history + 1},
             "features.history")):
        other = tmp_path / "runs" / name
        shutil.copytree(run_dir, other)
        checkpoint.write_config(other, config.replace(**overrides))
        assert campaign.main(["export", str(other), "--to", str(model_dir), "--device",
                              "cpu"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and words in err and err.count("\n") == 1, err
        assert "another --to" in err
    namesake = tmp_path / "elsewhere" / "c1"
    shutil.copytree(run_dir, namesake)
    (namesake / "init_from.txt").write_text("models/other\n")
    assert campaign.main(["export", str(namesake), "--to", str(model_dir), "--device",
                          "cpu"]) == 2
    err = capsys.readouterr().err
    assert "already has a run named 'c1'" in err and "rename" in err and err.count("\n") == 1
    assert {f.name: f.read_bytes() for f in model_dir.iterdir()} == before


def jax_leaves(tree):
    import jax

    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_export_and_status_errors(tmp_path, capsys):
    def one_line(*args):
        assert campaign.main(["export", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        return err

    assert "no config.json" in one_line(str(tmp_path / "nothing"), "--device", "cpu")
    # A run stopped before its first iteration was saved: no metrics.jsonl yet,
    # or its first line logged but no checkpoint.
    run_dir = tmp_path / "run"
    checkpoint.write_config(run_dir, get_preset("smoke"))
    assert "no finished iteration yet" in one_line(str(run_dir), "--device", "cpu")
    (run_dir / "metrics.jsonl").write_text(json.dumps({"iteration": 1}) + "\n")
    assert "no finished iteration yet" in one_line(str(run_dir), "--device", "cpu")
    # Where the run ran is not guessed.
    with pytest.raises(SystemExit) as e:
        campaign.main(["export", str(run_dir)])
    assert e.value.code == 2 and "--device" in capsys.readouterr().err
    assert campaign.main(["status", "--model", str(tmp_path)]) == 2
    assert "no run exported yet" in capsys.readouterr().err


def test_the_nets_are_dated_by_the_iteration_that_made_them():
    line = lambda it, games, **kw: {"iteration": it, "selfplay/games": games,
                                    "time/iteration_s": 60.0 * games, **kw}
    gated = [line(1, 10), line(2, 20, **{"gating/accepted": 1.0}), line(3, 30),
             line(4, 40, **{"gating/accepted": 0.0})]
    assert campaign.best_iteration(gated, gated=True) == 2  # the last accepted, not the last
    assert campaign.best_iteration(gated, gated=False) == 4  # no gating: the last
    assert campaign.best_iteration([line(1, 10, **{"gating/accepted": 0.0})], True) is None
    assert campaign.best_iteration([], gated=False) is None

    earlier = [{"games": 1000, "hours": 2.0}]
    total = {"games": 1100, "cpu_hours": 3.0, "gpu_minutes": 0.0}
    # Earlier runs' 1,000 games and 2 hours, then this run's iterations 1-2:
    # 30 games, 1,800 s.
    assert campaign.made_with(gated, True, earlier, total) == {
        "games": 1030, "hours": 2.5, "iteration": 2}
    assert campaign.made_with(gated, False, earlier, total)["games"] == 1100  # 1,000 + all 100
    rejected = [line(1, 10, **{"gating/accepted": 0.0})]
    assert campaign.made_with(rejected, True, earlier, total) == {"games": 1100, "hours": 3.0}


@pytest.mark.long
def test_polish_trains_the_candidate_on_its_checkpoints_replay(tmp_path, capsys):
    import jax

    from agz_jax.training.train import sgd

    run_dir, out = tmp_path / "run", tmp_path / "polished"
    # Games that end within the iteration, so the replay holds examples and the
    # candidate trains; no gating yet, so the best stays the first nets.
    tiny_run(run_dir, 2, **{"selfplay.steps": 32, "gating.every": 10})
    assert campaign.main(["polish", str(run_dir), "--out", str(out), "--steps", "3",
                          "--seed", "7", "--step", "1", "--learning-rate", "0.02"]) == 0
    assert "polished" in capsys.readouterr().out
    # The reference: checkpoint 1's candidate, 3 steps keyed by 7, at lr 0.02.
    config = checkpoint.read_config(run_dir)
    comps = run.build(config)
    state, _, at = checkpoint.restore(run_dir, run.init_state(comps), step=1)
    assert int(state.train.step) > 0 and int(state.replay.size.min()) > 0
    assert any(not np.array_equal(a, b) for a, b in
               zip(jax_leaves(state.best), jax_leaves(state.train.variables), strict=True))
    cfg = dataclasses.replace(config.train, learning_rate=0.02)
    want, _ = sgd(comps.nets, cfg, state.train, state.replay, jax.random.PRNGKey(7), 3)
    got = models.load(out)
    for a, b in zip(jax_leaves(got.variables), jax_leaves(want.variables), strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in
               zip(jax_leaves(got.variables), jax_leaves(state.train.variables), strict=True))
    record = json.loads((out / "polish.json").read_text())
    assert (record["checkpoint"], record["steps"], record["seed"]) == (1, 3, 7)
    assert record["learning_rate"] == 0.02 and record["candidate_step"] == int(state.train.step)
    assert record["sha256"] == hashlib.sha256(
        (out / models.VARIABLES_FILE).read_bytes()).hexdigest()
    # The run is not changed, and a second polish into the same place is refused.
    assert checkpoint.latest_step(run_dir) == 2
    assert campaign.main(["polish", str(run_dir), "--out", str(out), "--steps", "1"]) == 2
    assert "is not empty" in capsys.readouterr().err
    # A checkpoint the run does not have: one line that names it.
    assert campaign.main(["polish", str(run_dir), "--out", str(tmp_path / "o"), "--steps",
                          "1", "--step", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "5" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_polish_errors(tmp_path, capsys):
    def one_line(run_dir, out, *args):
        assert campaign.main(["polish", str(run_dir), "--out", str(out), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        return err

    assert "no config.json" in one_line(tmp_path / "nothing", tmp_path / "o", "--steps", "1")
    for bad in (["--steps", "0"], ["--steps", "1", "--learning-rate", "0"]):
        assert "must be" in one_line(tmp_path, tmp_path / "o", *bad)
    assert not (tmp_path / "o").exists()
    # An --out that is a file (or lies under one): refused, the file kept.
    run_dir, taken = tmp_path / "run", tmp_path / "taken.txt"
    checkpoint.write_config(run_dir, get_preset("smoke"))
    taken.write_text("keep me\n")
    for out in (taken, taken / "polished"):
        assert "is not a directory" in one_line(run_dir, out, "--steps", "1")
    assert taken.read_text() == "keep me\n"
