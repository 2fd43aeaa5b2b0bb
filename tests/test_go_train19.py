"""Move prediction trained on a 19x19 games store (``agz_jax.go.train19`` and
``experiments.go.train19``): a store of random legal games written with
``go.games``' writer, a few steps, a checkpoint, a resume, an eval in range."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from agz_jax.go import games, replay, train19
from experiments.go import train19 as go_train19


def write_store(path, n_games: int = 6, plies: int = 60, seed: int = 0) -> None:
    """A finished games store of random legal 19x19 games: the first two in
    "valid", the rest in "train"."""
    moves, offsets = replay.random_store(19, n_games, plies, seed)
    w = games.ShardWriter()
    for g in range(n_games):
        m = moves[offsets[g]:offsets[g + 1]].astype("<i2").tobytes()
        w.add(m, winner=g % 2, split=1 if g < 2 else 0, key=games.game_key(m), komi=6.5,
              black_rank=8, white_rank=8, game_id=f"g{g}", date="", result="B+R")
    path.mkdir(parents=True)
    w.save(path / "shard-a.npz", {})
    (path / games.SUMMARY).write_text(json.dumps({"version": games.VERSION,
                                                  "shards": ["shard-a.npz"]}))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("go19") / "store"
    write_store(path)
    return path


@pytest.mark.long
def test_train_checkpoint_resume(store, tmp_path):
    s, length, n = train19.load_store(store, "train")
    held, held_len, n_held = train19.load_store(store, "valid")
    assert (n, n_held) == (4, 2) and length <= 60
    ev = train19.eval_set(held, held_len, 16, seed=0, chunk=8)
    assert ev.planes.shape == (16, 19, 19, 28) and len(ev) == 16
    assert np.all(ev.planes[..., 26] == 0)  # the ladder plane is not computed
    config = train19.net_config(layers=2, filters=8)
    cfg = train19.Config(steps=2, batch_size=8, per_game=4, eval_every=1, eval_positions=16)
    out = tmp_path / "run"
    out.mkdir()
    _, hist = train19.train(config, cfg, s, length, ev, out)
    assert [r["step"] for r in hist] == [1, 2]
    assert (out / "checkpoint.msgpack").exists()
    r = hist[-1]
    assert 0 <= r["heldout/top1_lo"] <= r["heldout/top1"] <= r["heldout/top1_hi"] <= 1
    assert r["heldout/top1"] <= r["heldout/top5"] <= r["heldout/top10"] <= 1
    assert np.isfinite(r["train/loss"]) and r["positions"] == 16
    # resumed to 3 steps: the first two are not redone, the third is the same
    # as an uninterrupted 3-step run's
    more = train19.Config(**{**cfg.to_dict(), "steps": 3})
    p_resumed, hist2 = train19.train(config, more, s, length, ev, out, resume=True)
    assert [r["step"] for r in hist2] == [1, 2, 3]
    p_straight, _ = train19.train(config, more, s, length, ev)
    flat = lambda p: np.concatenate([np.ravel(x) for x in jax.tree.leaves(p)])
    np.testing.assert_allclose(flat(p_resumed), flat(p_straight), rtol=1e-5, atol=1e-6)


def test_wilson():
    lo, hi = train19.wilson(50, 100)
    assert lo < 0.5 < hi and abs((hi - lo) - 0.19) < 0.01
    assert train19.wilson(0, 10)[0] == 0.0


def test_command(store, tmp_path, capsys):
    out = tmp_path / "cmd"
    argv = ["--games", str(store), "--out", str(out), "--layers", "2", "--filters", "8",
            "--steps", "2", "--batch-size", "8", "--per-game", "4", "--eval-every", "1",
            "--eval-positions", "16"]
    assert go_train19.main(argv) == 0
    rec = json.loads((out / "record.json").read_text())
    assert rec["final"]["step"] == 2 and 0 <= rec["final"]["heldout/top1"] <= 1
    assert "ladder plane: zero" in capsys.readouterr().out
    assert go_train19.main(argv) == 2  # a checkpoint there, no --resume
    assert go_train19.main([*argv, "--steps", "3", "--resume"]) == 0
    assert json.loads((out / "record.json").read_text())["final"]["step"] == 3
    bad = [*argv, "--resume", "--seed", "1"]
    assert go_train19.main(bad) == 2
    assert "seed" in capsys.readouterr().err


def test_a_subset_keeps_every_held_out_game_and_a_share_of_training(tmp_path, capsys):
    """``go.games.subset``: the validation games, in order (so a held-out sample
    drawn with a seed is the same), and the first ceil(f * n) training games."""
    from experiments.go import subset as go_subset

    src = tmp_path / "src"
    write_store(src, n_games=12)
    out = tmp_path / "small"
    assert go_subset.main(["--games", str(src), "--out", str(out),
                           "--train-fraction", "0.3"]) == 0
    assert "2 valid" in capsys.readouterr().out
    whole, part = games.load_games(src), games.load_games(out)
    assert part.game_id.tolist() == ["g0", "g1", "g2", "g3", "g4"]  # 2 valid, ceil(0.3 * 10)
    for g in range(len(part)):
        np.testing.assert_array_equal(part.game(g), whole.game(g))
    meta = games.summary(out)
    assert meta["splits"]["train"]["games"] == 3 and meta["subset"]["train_fraction"] == 0.3
    held = [train19.load_store(p, "valid") for p in (src, out)]
    a, b = (train19.eval_set(h, n, 8, seed=3, chunk=8) for h, n, _ in held)
    np.testing.assert_array_equal(a.planes, b.planes)
    np.testing.assert_array_equal(a.target, b.target)
    assert go_subset.main(["--games", str(src), "--out", str(out),
                           "--train-fraction", "0.3"]) == 2  # not over a store
    assert "not empty" in capsys.readouterr().err
    assert go_subset.main(["--games", str(src), "--out", str(tmp_path / "x"),
                           "--train-fraction", "0"]) == 2


def test_a_time_box_stops_with_a_checkpoint_that_resumes(store, tmp_path):
    """``--seconds``: the run stops once it has trained that long, evaluated and
    checkpointed at that step; ``--resume`` continues from there."""
    out = tmp_path / "box"
    argv = ["--games", str(store), "--out", str(out), "--layers", "2", "--filters", "8",
            "--steps", "100000", "--batch-size", "8", "--per-game", "4", "--eval-every",
            "100000", "--eval-positions", "16"]
    assert go_train19.main([*argv, "--seconds", "0.5"]) == 0
    first = json.loads((out / "history.json").read_text())
    assert len(first) == 1 and 8 <= first[0]["step"] < 100000 and first[0]["step"] % 8 == 0
    assert go_train19.main([*argv, "--seconds", "0.5", "--resume"]) == 0
    second = json.loads((out / "history.json").read_text())
    assert second[0] == first[0] and second[1]["step"] > first[0]["step"]


@pytest.mark.long
def test_the_gpu_window_script_trains_brings_back_and_continues(tmp_path):
    """experiments/go/gpu_window.sh rehearsed on the CPU with a tiny net and
    store: a first window trains from fresh nets and leaves the model and the
    checkpoint in OUT; put back as the carried run, a second window continues it."""
    import shutil

    from gpu_windows import run_window

    data = tmp_path / "games"
    write_store(data, n_games=8)
    carried = tmp_path / "carried"
    settings = {"DATA": str(data), "CARRIED": str(carried), "LAYERS": "2", "FILTERS": "8",
                "BATCH": "8", "PER_GAME": "4", "EVAL_EVERY": "20", "RESERVE": "25"}
    steps = []
    for window in ("first", "second"):
        out = tmp_path / window
        run = run_window("experiments/go/gpu_window.sh", 40, out, settings, timeout=300)
        assert run.returncode == 0 and "train19 exit 0" in run.stdout, run.stdout + run.stderr
        for f in ("history.json", "settings.json", "record.json", "net.json",
                  "params.msgpack", "checkpoint.msgpack", "train.log", "gpu.log"):
            assert (out / f).exists(), f
        steps.append(json.loads((out / "history.json").read_text())[-1]["step"])
        carried.mkdir(exist_ok=True)
        for f in ("history.json", "settings.json", "checkpoint.msgpack"):
            shutil.copy(out / f, carried / f)
    assert 0 < steps[0] < steps[1]


def test_the_table_of_runs(store, tmp_path, capsys):
    """``experiments.go.table19``: a row per run at a common step, beside the
    paper's column for its depth; a step a run has no evaluation at is refused."""
    from experiments.go import table19

    runs = []
    for layers in (2, 3):
        out = tmp_path / f"l{layers}"
        assert go_train19.main(["--games", str(store), "--out", str(out), "--layers",
                                str(layers), "--filters", "8", "--steps", "2", "--batch-size",
                                "8", "--per-game", "4", "--eval-every", "1",
                                "--eval-positions", "16"]) == 0
        runs.append(str(out))
    capsys.readouterr()
    assert table19.main([*runs, "--at", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[2].startswith("| 2 | 8 |") and "| 1 x 8 |" in lines[2]
    assert lines[3].startswith("| 3 | 8 |") and "37.5 (16 filters); 48.0 (128 filters)" in lines[3]
    assert table19.main([*runs, "--at", "3"]) == 2
    assert "no evaluation at step 3" in capsys.readouterr().err


@pytest.mark.long
def test_the_figures_of_nets_on_the_same_positions(store, tmp_path, capsys):
    """``experiments.go.figures19``: two nets ranked on the same held-out
    positions; top-n rises with n; Figure 2's bins count every position; a
    9x9 net is refused in one line."""
    from experiments.go import figures19

    run = tmp_path / "run"
    assert go_train19.main(["--games", str(store), "--out", str(run), "--layers", "2",
                            "--filters", "8", "--steps", "1", "--batch-size", "8",
                            "--per-game", "4", "--eval-every", "1",
                            "--eval-positions", "16"]) == 0
    out = tmp_path / "fig"
    argv = ["--games", str(store), "--model", str(run), "--model", str(run), "--split",
            "valid", "--positions", "24", "--bin", "20", "--min-count", "1", "--out", str(out)]
    assert figures19.main(argv) == 0
    got = json.loads((out / "figures.json").read_text())
    assert got["positions"] == 24 and len(got["nets"]) == 1  # one label, the same net twice
    rec = got["nets"][str(run)]
    assert rec["topn"] == sorted(rec["topn"]) and rec["topn"][0] == rec["top1"]
    assert sum(rec["by_move"]["count"]) == 24
    assert (out / "topn.png").stat().st_size > 0 and (out / "by_move.png").stat().st_size > 0
    small = tmp_path / "nine"
    from agz_jax.go import net as net_lib

    config = net_lib.NetConfig(size=9, channels=28, layers=1, filters=2)
    net_lib.save(small, config, net_lib.init(config, 0))
    capsys.readouterr()
    assert figures19.main([*argv[:2], "--model", str(small), "--out", str(out)]) == 2
    assert "a 9x9 net" in capsys.readouterr().err
