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
