"""The curriculum: mentor games as examples, stages of one shape, composition with
checkpoints, resuming mid-curriculum, and the command lines' errors."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.curriculum import imitation, stages
from agz_jax.game.gomoku import Rules
from agz_jax.nets import models
from agz_jax.training import supervised
from experiments import selfplay as selfplay_cli
from experiments.training import curriculum as cli


def tiny(**overrides):
    base = {"game.size": 9, "basic.num_positions": 128, "basic.held_out": 32,
            "basic.steps": 2, "imitate.num_games": 4, "imitate.rounds": 2,
            "imitate.steps_per_round": 2, "imitate.eval_games": 2,
            "imitate.eval_simulations": 2, "imitate.capacity": 1024,
            "train.batch_size": 16, "iterations": 1, "selfplay.num_games": 4,
            "train.steps_per_iteration": 2, "train.min_replay": 8}
    return get_preset("smoke").replace(**{**base, **overrides})


def leaves_equal(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y))
               for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def test_mentor_games_become_the_mentors_examples():
    rules = Rules(9)
    g = jax.jit(lambda k: imitation.play_mentor_games(rules, 0, k, 4, 2, 1.0))(
        jax.random.PRNGKey(0))
    check_mentor_examples(g)


def test_chunked_mentor_games_become_the_mentors_examples():
    """The imitate stage's games with imitate.chunk (finished games leave the
    batch between chunks of plies): the same labelling, game by game."""
    config = tiny(**{"imitate.num_games": 4, "imitate.opening_plies": 2, "imitate.level": 0,
                     "decay.gamma": 1.0, "imitate.chunk": 3})
    games, _ = stages._imitate_fns(config)
    g = games(jax.random.PRNGKey(0))
    check_mentor_examples(g)
    assert len(set(np.asarray(g.result.length).tolist())) > 1  # games of several lengths


def check_mentor_examples(g):
    moves, length = np.asarray(g.result.moves), np.asarray(g.result.length)
    num_plies, num_games = moves.shape
    valid = np.asarray(g.examples.valid).reshape(num_plies, num_games)
    action = np.asarray(g.action).reshape(num_plies, num_games)
    policy = np.asarray(g.examples.policy).reshape(num_plies, num_games, -1)
    obs = np.asarray(g.examples.obs).reshape(num_plies, num_games, 9, 9, 3)
    z = np.asarray(g.examples.z).reshape(num_plies, num_games)
    winner = np.asarray(g.result.winner)
    for game in range(num_games):
        board = np.zeros(81, int)
        for t in range(length[game]):
            m = moves[t, game]
            me = 1 if t % 2 == 0 else -1
            # the observation is the position before the move, from the mover's side
            np.testing.assert_array_equal(obs[t, game, ..., 0].ravel(), board == me)
            np.testing.assert_array_equal(obs[t, game, ..., 1].ravel(), board == -me)
            assert valid[t, game] == (t >= 2)  # the 2 random opening plies are not examples
            if valid[t, game]:
                assert action[t, game] == m and policy[t, game].argmax() == m
                assert policy[t, game].sum() == 1
                if winner[game] >= 0:  # gamma 1: +1 for the winner's moves, -1 else
                    assert z[t, game] == (1.0 if t % 2 == winner[game] else -1.0)
            board[m] = me
        assert not valid[length[game]:, game].any()
    assert np.array_equal(np.asarray(g.game).reshape(num_plies, num_games)[0], np.arange(4))


def test_held_out_games_are_whole_games():
    rules = Rules(9)
    g = jax.jit(lambda k: imitation.play_mentor_games(rules, 0, k, 8, 2, 1.0))(
        jax.random.PRNGKey(1))
    train, held = supervised.split_by_game(g.game, 0.25, jax.random.PRNGKey(2))
    game = np.asarray(g.game)
    train_games = set(game[np.asarray(train)])
    held_games = set(game[np.asarray(held)])
    assert held_games and train_games and not held_games & train_games
    assert train_games | held_games == set(range(8))


@pytest.mark.long
def test_two_stage_curriculum_runs_and_resumes(tmp_path, monkeypatch):
    config = tiny(**{"curriculum.stages": ("basic", "imitate")})
    whole = tmp_path / "whole"
    progress = stages.run_curriculum(config, whole, say=lambda s: None)
    assert progress["done"] == ["basic", "imitate"]
    m = progress["metrics"]
    assert 0 <= m["basic"]["heldout/top1"] <= 1
    for k in ("heldout/top1", "heldout/top5", "heldout/top10", "heldout/value_loss",
              "imitate/vs_mentor_score"):
        assert k in m["imitate"], k
    assert m["imitate"]["heldout/top1"] <= m["imitate"]["heldout/top5"] \
        <= m["imitate"]["heldout/top10"]
    final = models.load(whole)
    assert leaves_equal(final.variables, models.load(whole / "stages" / "1-imitate").variables)
    assert not leaves_equal(final.variables,
                            models.load(whole / "stages" / "0-basic").variables)
    records = [json.loads(ln) for ln in (whole / "metrics.jsonl").read_text().splitlines()]
    assert [r["stage"] for r in records] == ["basic", "imitate", "imitate"]

    # Killed during the second stage: the first is kept, the second redone.
    broken = tmp_path / "broken"
    real = stages.imitate_stage

    def dies(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(stages, "imitate_stage", dies)
    with pytest.raises(KeyboardInterrupt):
        stages.run_curriculum(config, broken, say=lambda s: None)
    assert json.loads((broken / "curriculum.json").read_text())["done"] == ["basic"]
    monkeypatch.setattr(stages, "imitate_stage", real)
    said = []
    stages.run_curriculum(config, broken, say=said.append)
    assert not any("stage 1/2" in s for s in said)  # basic was not run again
    assert leaves_equal(models.load(broken).variables, final.variables)


@pytest.mark.long
def test_imitate_stage_resumes_after_its_last_round(tmp_path):
    """Killed after round 1 of 2: the rerun restores the train state and the replay
    buffer of round 1 and ends with the nets of an unbroken run; every round's
    nets are a model directory."""
    config = tiny(**{"curriculum.stages": ("imitate",), "imitate.eval_games": 0})
    whole = tmp_path / "whole"
    stages.run_curriculum(config, whole, say=lambda s: None)
    rounds = whole / "rounds" / "0-imitate"
    final = models.load(whole).variables
    assert leaves_equal(models.load(rounds / "round-2").variables, final)
    assert not leaves_equal(models.load(rounds / "round-1").variables, final)

    broken = tmp_path / "broken"

    def killed_after_round_1(line: str) -> None:
        if line.startswith("imitate | round 1"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stages.run_curriculum(config, broken, say=killed_after_round_1)
    assert not (broken / "curriculum.json").exists()
    said = []
    stages.run_curriculum(config, broken, say=said.append)
    assert any("resumed" in s and "after round 1" in s for s in said)
    assert not any(s.startswith("imitate | round 1") for s in said)  # not played again
    assert leaves_equal(models.load(broken).variables, final)
    records = [json.loads(ln) for ln in (broken / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in records] == [1, 2]


@pytest.mark.long
def test_selfplay_stage_starts_from_the_given_nets(tmp_path):
    config = tiny(**{"curriculum.stages": ("selfplay",), "gating.enabled": False,
                     "eval.every": 0})
    start = stages.run.init_state(stages.components(config.replace(seed=9))).best
    progress = stages.run_curriculum(config, tmp_path, init_variables=start,
                                     say=lambda s: None)
    assert progress["done"] == ["selfplay"]
    assert "selfplay/mean_length" in progress["metrics"]["selfplay"]
    run_dir = tmp_path / "selfplay"
    first = stages.checkpoint.restore(
        run_dir, jax.eval_shape(lambda: stages.run.init_state(
            dataclasses.replace(stages.components(config), sharder=None))), step=0)[0]
    assert leaves_equal(first.best, start)
    # without gating the trained nets are the stage's output
    assert not leaves_equal(models.load(tmp_path).variables, start)
    assert leaves_equal(models.load(run_dir).variables, models.load(tmp_path).variables)


def test_curriculum_cli_errors(tmp_path, capsys):
    cases = [
        (["--preset", "smoke", "--out", str(tmp_path / "a"), "--stages", "basic,dance"],
         "unknown stage 'dance'"),
        (["--preset", "smoke", "--out", str(tmp_path / "a"), "--stages", "basic,basic"],
         "must not repeat"),
        (["--out", str(tmp_path / "none"), "--resume"], "config.json not found"),
    ]
    for argv, problem in cases:
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and problem in err, (argv, err)
    # a bad value in a dotted override: one line naming the field
    assert cli.main(["--preset", "smoke", "--out", str(tmp_path / "a"),
                     "--imitate.level", "7"]) == 2
    assert capsys.readouterr().err == "error: imitate.level must be an integer in 0..3, got 7\n"
    assert not (tmp_path / "a").exists()


def test_init_from_another_board_is_refused(tmp_path, capsys):
    config = tiny()
    nets_dir = models.save(tmp_path / "m7", config.replace(**{"game.size": 7}),
                           stages.run.init_state(stages.run.build(
                               config.replace(**{"game.size": 7}))).best)
    argv = ["--preset", "smoke", "--game.size", "9", "--out", str(tmp_path / "r"),
            "--init-from", str(nets_dir)]
    assert selfplay_cli.main(argv) == 2
    assert "game.size = 7, this run needs 9" in capsys.readouterr().err
    assert cli.main(argv) == 2
    assert "game.size = 7, this run needs 9" in capsys.readouterr().err


@pytest.mark.long
def test_selfplay_init_from_starts_with_those_nets(tmp_path):
    config = tiny()
    variables = stages.run.init_state(stages.run.build(config.replace(seed=5))).best
    src = models.save(tmp_path / "m", config, variables)
    out = tmp_path / "run"
    argv = ["--preset", "smoke", "--game.size", "9", "--out", str(out), "--init-from",
            str(src), "--iterations", "1", "--quiet", "--eval.every", "0",
            "--gating.no-enabled"]
    assert selfplay_cli.main(argv) == 0
    from agz_jax.nets import checkpoint
    from agz_jax.training import run

    comps = dataclasses.replace(run.build(checkpoint.read_config(out)), sharder=None)
    like = jax.eval_shape(lambda: run.init_state(comps))
    start, _, _ = checkpoint.restore(out, like, step=0)
    assert leaves_equal(start.best, variables)
    assert leaves_equal(start.train.variables, variables)


def test_stage_names_are_checked_in_config():
    with pytest.raises(ConfigError, match="unknown stage 'rl'"):
        get_preset("smoke").replace(**{"curriculum.stages": ["basic", "rl"]})
    assert get_preset("smoke").replace(
        **{"curriculum.stages": "imitate,basic"}).curriculum.stages == ("imitate", "basic")
