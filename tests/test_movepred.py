"""Supervised move prediction: records to positions, rank labels, augmentation,
training, and the experiment's CLI (tiny boards and nets; no mentor games, whose
search costs seconds to compile)."""

from __future__ import annotations

import csv
import json

import jax
import numpy as np
import pytest

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.game import records, symmetry
from agz_jax.game.gomoku import Rules
from agz_jax.match import arena
from agz_jax.nets.networks import make_networks
from agz_jax.studies import movepred, movepred_data
from agz_jax.training import replay, supervised
from experiments.studies import movepred as cli

SIZE = 7
CONFIG = get_preset("smoke").replace(**{
    "game.size": SIZE, "net.filters": 4, "net.blocks": 0, "net.value_hidden": 4,
    "net.double": False,
    "train.batch_size": 16, "train.learning_rate": 0.05, "decay.gamma": 0.9})
RULES = Rules(SIZE)


def random_games(num_games: int, seed: int, rank: int = 0, first: int = 0) -> movepred_data.Games:
    match = jax.jit(lambda k: arena.play_match(RULES, arena.random_player(RULES),
                                               arena.random_player(RULES), k, num_games))
    return movepred_data.match_games(SIZE, match(jax.random.PRNGKey(seed)), rank, first)


@pytest.fixture(scope="module")
def psq_dir(tmp_path_factory):
    """Two hand-made records: black wins on row 0 in 9 plies; an unfinished game."""
    d = tmp_path_factory.mktemp("psq")
    win = [0, 7, 1, 8, 2, 9, 3, 10, 4]  # black 0..4 (row 0), white 7..10 (row 1)
    records.write_psq(d / "a_win.psq", win, SIZE)
    records.write_psq(d / "b_open.psq", [24, 25, 17], SIZE)
    return d, win


def test_psq_records_become_labelled_positions(psq_dir):
    d, win = psq_dir
    games = movepred_data.psq_games(d)
    np.testing.assert_array_equal(games.length, [9, 3])
    np.testing.assert_array_equal(games.winner, [0, -1])
    data = movepred_data.positions(CONFIG, games)
    first = data.game == 0
    np.testing.assert_array_equal(data.action[first], win)
    np.testing.assert_array_equal(data.ply[first], np.arange(9))
    np.testing.assert_array_equal(data.to_play[first], np.arange(9) % 2)
    # z: the decayed result for the side to move, +1 at the winning move
    t = np.arange(9)
    want = np.where(t % 2 == 0, 1.0, -1.0) * 0.9 ** (8 - t)
    np.testing.assert_allclose(data.z[first], want, rtol=1e-6)
    np.testing.assert_array_equal(data.z[~first], 0.0)
    np.testing.assert_array_equal(data.action[~first], [24, 25, 17])
    # the observation before ply 4: own stones 0, 1; opponent's 7, 8; last move 8
    obs = data.obs[first][4].reshape(-1, data.obs.shape[-1])
    assert set(np.flatnonzero(obs[:, 0])) == {0, 1}
    assert set(np.flatnonzero(obs[:, 1])) == {7, 8}
    assert set(np.flatnonzero(obs[:, 2])) == {8}
    assert data.legal[first][4].sum() == SIZE * SIZE - 4 and not data.legal[first][4][0]
    with pytest.raises(records.RecordError, match="no .psq"):
        movepred_data.psq_games(d / "nothing")


def test_rank_labels_reach_the_dataset():
    config = CONFIG.replace(**{"features.ranks": 2})
    games = movepred_data.concatenate([random_games(4, seed=1, rank=1, first=2),
                                  random_games(2, seed=2, rank=0, first=2)])
    np.testing.assert_array_equal(games.rank, [1, 1, 1, 1, 0, 0])
    data = movepred_data.positions(config, games)
    assert data.ply.min() == 2  # the opening plies are not learnt
    np.testing.assert_array_equal(data.rank, np.where(data.game < 4, 1, 0))
    assert set(data.game) == set(range(6))
    planes = data.obs[..., -2:].reshape(len(data.rank), -1, 2)
    np.testing.assert_array_equal(planes[:, 0, :], np.eye(2)[data.rank])  # one-hot
    assert np.all(planes == planes[:, :1, :])  # on every point
    # the net asked at each rank: the diagonal is the plain evaluation
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    shapes = jax.eval_shape(nets.init, jax.random.PRNGKey(0))
    rng = np.random.default_rng(0)
    variables = jax.tree_util.tree_map_with_path(  # BatchNorm variances > 0
        lambda p, x: (rng.uniform(0.5, 1.5, x.shape) if p[-1].key == "var"
                      else rng.normal(0, 1, x.shape)).astype(x.dtype), shapes)
    table = movepred.accuracy_by_rank(config, variables, data, batch_size=64)
    assert len(table) == 2 and all(len(row) == 2 for row in table)
    for true in range(2):
        plain = movepred.evaluate(config, variables, data.select(data.rank == true),
                                  batch_size=64)
        assert table[true][true] == pytest.approx(plain["top1"])
    assert table[0][0] != table[0][1] or table[1][1] != table[1][0]
    with pytest.raises(ConfigError, match="features.ranks"):
        movepred.check(config, movepred.MovePredConfig(levels=(0, 1, 2), num_games=18))
    with pytest.raises(ValueError, match="different plies"):
        movepred_data.concatenate([games, random_games(2, seed=3)])


def test_split_by_game_keeps_games_whole():
    data = movepred_data.positions(CONFIG, random_games(10, seed=2))
    train, held = supervised.split_by_game(data.game, 0.3, jax.random.PRNGKey(0))
    assert not set(data.game[train]) & set(data.game[held])
    assert len(set(data.game[held])) == 3 and train.any()


def test_augmentation_moves_the_target_with_the_board():
    # Double Networks: one ring per colour; the colour plane (3) says whose move it is
    config = CONFIG.replace(**{"net.double": True, "features.colour": True})
    data = movepred_data.positions(config, random_games(4, seed=3))
    buffer = movepred.training_buffer(config, data)
    sample = jax.jit(replay.sample, static_argnums=2)
    batch = jax.device_get(sample(buffer, jax.random.PRNGKey(0), 64))
    perms = symmetry.permutations(SIZE)
    inverse = [symmetry.inverse(g) for g in range(8)]
    rings = buffer.obs.shape[0]
    store_obs = np.asarray(buffer.obs).reshape(rings, -1, SIZE * SIZE, buffer.obs.shape[-1])
    store_act = np.argmax(np.asarray(buffer.policy), -1)
    found = set()
    for n in range(rings):
        size = int(buffer.size[n])
        stored, acts = store_obs[n][:size], store_act[n][:size]
        assert size == np.sum(data.to_play == n) and np.all(stored[..., 3] == 1 - n)
        for obs, pi in zip(batch.obs[n], batch.policy[n], strict=True):
            flat, target = obs.reshape(SIZE * SIZE, -1), int(np.argmax(pi))
            assert pi[target] == 1.0 and flat[target, :2].sum() == 0  # on an empty point
            # sampled = transform(stored, g): stored = sampled[perm[inverse g]], and the
            # stored move is the sampled target mapped back
            hits = {g for g in range(8)
                    for i in np.flatnonzero(np.all(stored == flat[perms[inverse[g]]], (1, 2)))
                    if perms[g][target] == acts[i]}
            assert hits, "a sampled (obs, target) pair is no symmetry of a stored one"
            found |= hits
    assert found - {0}, "no sample was transformed"


def test_training_lowers_the_loss_and_reports(psq_dir):
    mp = movepred.MovePredConfig(steps=30, log_every=15, arena_games=0)
    data = movepred_data.positions(CONFIG, random_games(8, seed=4))
    train, _ = supervised.split_by_game(data.game, 0.25, jax.random.PRNGKey(0))
    state, history = movepred.train(CONFIG, mp, data, train, jax.random.PRNGKey(1))
    assert [h["step"] for h in history] == [15, 30] and int(state.step) == 30
    assert history[-1]["train/loss"] < history[0]["train/first_loss"] - 0.1
    assert 0 <= history[-1]["heldout/top1"] <= history[-1]["heldout/top5"] <= 1


@pytest.mark.long
def test_experiment_writes_the_table_and_plots(tmp_path, psq_dir):
    d, _ = psq_dir
    rec_dir = tmp_path / "games"
    records.save_match(rec_dir, jax.jit(lambda k: arena.play_match(
        RULES, arena.random_player(RULES), arena.random_player(RULES), k, 8))(
            jax.random.PRNGKey(5)), SIZE)
    out = tmp_path / "out"
    argv = ["--preset", "smoke", "--out", str(out), "--set", f"movepred.records={rec_dir}",
            "--set", f"game.size={SIZE}", "--set", "net.filters=4", "--set", "net.blocks=0",
            "--set", "net.value_hidden=4", "--set", "net.double=false",
            "--set", "train.batch_size=16",
            "--set", "train.learning_rate=0.05", "--set", "decay.gamma=0.9",
            "--set", "movepred.steps=4", "--set", "movepred.arena_games=2",
            "--set", "movepred.held_out=0.25", "--grid", "seed=0,1"]
    assert cli.main(argv) == 0
    with open(out / "table.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["setting"] for r in rows] == ["seed=0", "seed=1"]
    for r in rows:
        assert 0 <= float(r["top1"]) <= float(r["top5"]) <= float(r["top10"]) <= 1
        assert int(r["games"]) == 2 and 0 <= float(r["score"]) <= 1
        assert int(r["heldout_games"]) == 2 and int(r["params"]) > 0
    assert (out / "table.md").read_text().count("| seed=") == 2
    for png in ("topn.png", "by_move.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rec = json.loads((out / "settings" / "seed=0" / "record.json").read_text())
    assert rec["train_games"] == 6 and len(rec["heldout"]["topn"]) == 10
    assert (out / "settings" / "seed=0" / "variables.msgpack").exists()
    # run again: both settings are done, nothing is trained
    mtime = (out / "settings" / "seed=1" / "record.json").stat().st_mtime
    assert cli.main(argv) == 0
    assert (out / "settings" / "seed=1" / "record.json").stat().st_mtime == mtime


@pytest.mark.parametrize("argv, message", [
    (["--grid", "net.blocks"], "--grid must be FIELD="),
    (["--grid", "net.nope=1,2"], "unknown config field"),
    (["--grid", "net.blocks=-1,1"], "net.blocks"),
    (["--grid", "movepred.num_games=64,128"], "games are shared"),
    (["--set", "movepred.opponent=mentor:9"], "movepred.opponent"),
    (["--set", "movepred.bogus=1"], "movepred.bogus"),
    (["--set", "features.ranks=2"], "features.ranks"),
    (["--set", "movepred.levels=2,1"], "movepred.levels"),
    (["--set", "movepred.steps=0"], "movepred.steps"),
    (["--preset", "huge"], "unknown preset"),
])
def test_bad_specs_fail_before_anything_runs(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert cli.main(["--out", str(out), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_bad_records_fail_before_anything_runs(tmp_path, capsys, psq_dir, monkeypatch):
    """movepred.records that cannot be read: one line naming the field, before
    anything is written, compiled or replayed."""
    monkeypatch.setattr(records, "to_states", lambda *a, **k: pytest.fail("replayed"))
    d, _ = psq_dir  # 7x7 records
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.psq").write_text("not a record\n")
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    out = tmp_path / "out"
    for where, problem in ((tmp_path / "nosuch", "no .psq files (no such directory)"),
                           (a_file, "no .psq files (not a directory)"),
                           (tmp_path, "no .psq files"),
                           (bad, "x.psq:1: expected a 'Piskvorky"),
                           (d, "a 7x7 board, the config's game.size is 9x9")):
        assert cli.main(["--out", str(out), "--set", f"movepred.records={where}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: movepred.records: {where}") and err.count("\n") == 1, err
        assert problem in err and "--set movepred.records=DIR" in err, err
        assert not out.exists()


def test_out_must_be_new_empty_or_its_own(tmp_path, capsys):
    f = tmp_path / "file.txt"
    f.write_text("mine")
    assert cli.main(["--out", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "is a file" in err
    user = tmp_path / "user"
    user.mkdir()
    (user / "table.md").write_text("my table")
    assert cli.main(["--out", str(user)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a movepred experiment" in err
    assert sorted(p.name for p in user.iterdir()) == ["table.md"]


def test_interrupt_is_one_line_and_130(tmp_path, capsys, monkeypatch):
    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(movepred, "load_or_make_games", stop)
    out = tmp_path / "mp"
    assert cli.main(["--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.startswith("interrupted: ") and err.count("\n") == 1
    assert "python -m experiments.studies.movepred --out" in err
    assert (out / "movepred.json").is_file()  # its own: the same command is accepted again
    assert cli.main(["--out", str(out)]) == 130
