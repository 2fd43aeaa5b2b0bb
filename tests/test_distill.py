"""experiments.training.distill: a student of other sizes trained to a teacher's outputs on
its games, written as a model the main job starts from; its one-line errors.
A random 7x7 teacher (tests/tiny_models.py), a 1-block, 16-filter student."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from agz_jax.config.presets import get_preset
from agz_jax.nets import checkpoint, models
from agz_jax.nets.networks import make_networks
from agz_jax.training import distill, teacher_games
from experiments import selfplay as selfplay_cli
from experiments.training import distill as distill_cli
from tests.tiny_models import random_model

SIZES = ["--net.blocks", "1", "--net.filters", "16", "--net.value-hidden", "16"]
EPOCHS = 5


def one_line_error(text: str) -> str:
    assert text.startswith("error: ") and text.count("\n") == 1, text
    assert "Traceback" not in text, text
    return text


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    return random_model(tmp_path_factory.mktemp("distill") / "teacher", size=7)


@pytest.fixture(scope="module")
def student(teacher, tmp_path_factory):
    out = tmp_path_factory.mktemp("distill") / "student"
    assert distill_cli.main(["--teacher", str(teacher), *SIZES, "--out", str(out),
                             "--games", "32", "--held-out-games", "8", "--games-per-batch", "16",
                             "--epochs", str(EPOCHS), "--batch-size", "32",
                             "--learning-rate", "3e-3"]) == 0
    return out


def test_distillation_lowers_the_loss_and_writes_a_loadable_model(teacher, student):
    lines = [json.loads(ln) for ln in (student / "metrics.jsonl").read_text().splitlines()]
    assert [ln["epoch"] for ln in lines] == list(range(EPOCHS + 1))
    first, last = lines[0], lines[-1]
    # Closer to the teacher on the held-out games, and a falling training loss.
    assert last["held_out/policy_kl"] < first["held_out/policy_kl"]
    assert last["held_out/value_mse"] < 0.5 * first["held_out/value_mse"]
    assert lines[-1]["train/loss"] < lines[1]["train/loss"]
    for ln in lines:
        assert 0 <= ln["held_out/top1"] <= 1 and ln["held_out/policy_kl"] > -1e-4
        # Double Networks: each colour's positions measured apart, and together.
        n_black, n_white = ln["held_out/black/positions"], ln["held_out/white/positions"]
        assert n_black > 0 and n_white > 0 and ln["held_out/positions"] == n_black + n_white
    # A model directory: the teacher's config with the student's sizes.
    model, taught = models.load(student), models.load(teacher)
    assert model.config == taught.config.replace(
        **{"net.blocks": 1, "net.filters": 16, "net.value_hidden": 16})
    assert model.nets.num_params(model.variables) == distill.parameters(model.config) == 10_858
    record = json.loads((student / "distill.json").read_text())
    assert record["teacher"]["sha256"] == distill.sha256(teacher)
    assert record["summary"]["epochs"] == EPOCHS and not record["summary"]["stopped_by_seconds"]
    assert record["summary"]["steps"] == last["step"] > 0
    assert record["games"]["train"]["games"] == 32 and record["games"]["held_out"]["games"] == 8


@pytest.mark.long
def test_the_student_starts_a_selfplay_run(student, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert selfplay_cli.main(["--preset", "smoke", *SIZES, "--init-from", str(student),
                              "--out", str(run_dir), "--iterations", "1", "--quiet",
                              "--gating.no-enabled"]) == 0
    assert "1 blocks x 16 filters (10,858 parameters a net)" in capsys.readouterr().out
    assert [json.loads(ln)["iteration"] for ln in
            (run_dir / "metrics.jsonl").read_text().splitlines()] == [1]
    # Its first checkpoint holds the student's nets.
    model = models.load(student)
    abstract = jax.eval_shape(model.nets.init, jax.random.PRNGKey(0))
    fields, _ = checkpoint.restore_fields(run_dir, {"best": abstract}, step=0)
    for a, b in zip(jax.tree.leaves(fields["best"]), jax.tree.leaves(model.variables),
                    strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.long
def test_search_games_give_the_search_policy_for_target(teacher):
    model = models.load(teacher)
    play = jax.jit(teacher_games.make_search_games(model.config, model.rules, model.nets, 2, 4))
    games = teacher_games.play_games(play, model.variables, jax.random.PRNGKey(1), 2, 2,
                                     search=True)
    data = distill.split_rings(games, "search", 2)
    assert data.size.tolist() == [int(np.sum(games.to_play == c)) for c in (0, 1)]
    for n in range(2):
        policy = data.policy[n][:data.size[n]]
        np.testing.assert_allclose(policy.sum(-1), 1.0, atol=1e-5)
        stones = data.obs[n][:data.size[n], ..., :2].sum(-1).reshape(len(policy), -1)
        assert np.all(policy[stones > 0] == 0)  # no weight on an occupied point
    assert distill.split_rings(games, "net", 2).policy is None


@pytest.mark.parametrize("argv, says", [
    (["--out", "{tmp}/s", *SIZES], "--teacher MODEL is needed"),
    (["--teacher", "{teacher}", *SIZES], "--out RUN_DIR is needed"),
    (["--teacher", "{teacher}", "--out", "{teacher}", *SIZES],
     "--out {teacher} is not empty (it holds config.json): give a new directory"),
    (["--teacher", "{teacher}", "--out", "{tmp}/s"], "give the student's size: --net-preset "
                                                      "NAME (paper, 6x64, 10x128)"),
    (["--teacher", "{tmp}/none", "--out", "{tmp}/s", "--net-preset", "6x64"],
     "--teacher: model '{tmp}/none' not found"),
    (["--teacher", "{teacher}", "--out", "{tmp}/s", "--net-preset", "5x5"],
     "unknown net preset '5x5'"),
    (["--teacher", "{teacher}", "--out", "{tmp}/s", "--net-preset", "6x64", "--net.blocks", "3"],
     "--net.blocks and --net-preset 6x64 both set net.blocks"),
    (["--teacher", "{teacher}", "--out", "{tmp}/s", *SIZES, "--policy-target", "search"],
     "--policy-target search needs --simulations N > 0"),
    (["--teacher", "{teacher}", "--out", "{tmp}/s", *SIZES, "--games", "0"],
     "--games must be a positive integer, got 0"),
    (["--teacher", "{teacher}", "--out", "{tmp}/s", *SIZES, "--openings", "balanced15"],
     "openings.path:"),
    (["--teacher", "{teacher}", "--out", "{tmp}/s", *SIZES, "--epochs", "two"],
     "argument --epochs: invalid int value: 'two'"),
])
def test_distill_mistakes_are_one_line(teacher, tmp_path, capsys, argv, says):
    fill = lambda text: text.replace("{tmp}", str(tmp_path)).replace("{teacher}", str(teacher))
    assert distill_cli.main([fill(a) for a in argv]) == 2
    assert fill(says) in one_line_error(capsys.readouterr().err)
    assert not (tmp_path / "s").exists()


def test_a_teacher_with_colour_heads_is_refused(tmp_path, capsys):
    config = get_preset("smoke").replace(**{"net.double": False, "net.colour_heads": True})
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    shapes = jax.eval_shape(nets.init, jax.random.PRNGKey(0))
    models.save(tmp_path / "t", config, jax.tree.map(lambda s: np.zeros(s.shape, s.dtype),
                                                     shapes))
    assert distill_cli.main(["--teacher", str(tmp_path / "t"), "--out", str(tmp_path / "s"),
                             *SIZES]) == 2
    assert "net.colour_heads" in one_line_error(capsys.readouterr().err)
