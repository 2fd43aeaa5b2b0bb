"""Go move prediction end to end on 9x9 with a tiny budget: GnuGo records
(``experiments.go.records``), the data set (``go.dataset``: a malformed record
stops it before anything is written, a record that breaks the rules is skipped
and counted, duplicates too), training and held-out accuracy
(``experiments.go.movepred --preset smoke``), then GTP games of the trained net
against GnuGo (``experiments.go.match``), refereed by GnuGo.

One test, one process: the records' replay, the feature planes and the
engine's moves share their compiled programs (``sgf.replay``,
``features.batched``). Skipped where gnugo is not installed."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

from agz_jax.go import dataset, gtp, sgf
from agz_jax.go.features import batched
from experiments.go import match as go_match
from experiments.go import movepred as go_movepred
from experiments.go import records as go_records

pytestmark = pytest.mark.skipif(gtp.find_gnugo() is None, reason="gnugo is not installed")


@pytest.mark.long
def test_records_to_training_to_a_game_against_gnugo(tmp_path):
    records = tmp_path / "records"
    assert go_records.main(["--engine", "gnugo", "--size", "9", "--games", "4", "--level", "0",
                            "--max-moves", "40", "--opening", "2", "--out", str(records)]) == 0
    games = sorted(records.glob("game-*.sgf"))
    assert len(games) == 4
    meta = json.loads((records / "records.json").read_text())
    assert meta["engine"]["name"] == "GNU Go" and meta["engine"]["version"] == "3.8"
    assert meta["settings"]["level"] == 0 and meta["violations"] == []
    first = sgf.read(games[0])
    assert first.black == "GNU Go level 0" and first.komi == 7.0 and first.rules == "Chinese"
    assert first.result[:2] in ("B+", "W+", "0") and 0 < len(first.moves) <= 40
    assert len(first.black_setup) == len(first.white_setup) == 1  # the random opening
    # started again with another level: refused, nothing changes
    assert go_records.main(["--size", "9", "--games", "4", "--level", "3", "--max-moves", "40",
                            "--opening", "2", "--out", str(records)]) == 2

    # a malformed record stops the build before anything is written
    data = tmp_path / "data"
    (records / "x-malformed.sgf").write_bytes(b"(;FF[4]SZ[9]KM[seven];B[ee])")
    with pytest.raises(sgf.SgfError, match="x-malformed.sgf: KM:"):
        dataset.build(records, data, say=lambda s: None)
    assert not list(data.glob("shard-*")) and not (data / "dataset.json").exists()
    (records / "x-malformed.sgf").unlink()
    # a record that breaks the rules is reported and skipped; a duplicate is skipped
    broken = dataclasses.replace(first, moves=first.moves[:3] + (first.moves[1],))
    sgf.write(broken, records / "x-broken.sgf")
    sgf.write(first, records / "x-copy.sgf")
    said = []
    # (batch=1: the planes one position at a time, the engine's compiled shape)
    meta = dataset.build(records, data, games_per_shard=2, say=said.append, batch=1)
    assert meta["violations"] == 1 and meta["duplicates"] >= 1
    assert any("x-broken.sgf: move 4" in s and "occupied" in s for s in said)
    assert {s["kind"] for s in meta["skipped"]} == {"rules", "duplicate"}
    loaded = dataset.load(data)
    unique = meta["games"]
    assert 2 <= unique <= 4 and meta["records"] == 6
    assert len(loaded.action) == meta["positions"] > 0
    assert loaded.planes.shape[1:] == (9, 9, 28) and loaded.planes.max() == 1
    # the stored planes are those of the position before the move
    _, before = sgf.states(first, sgf.replay_rules(9))
    k = 5
    direct = np.asarray(batched(sgf.replay_rules(9), 0)(jax.tree.map(
        lambda x: x[k:k + 1], before))[0], np.uint8)
    i = np.flatnonzero((loaded.game == 0) & (loaded.ply == k))[0]
    np.testing.assert_array_equal(loaded.planes[i], direct)
    assert loaded.action[i] == first.moves[k][1] and loaded.to_play[i] == first.moves[k][0]
    assert loaded.legal[i, loaded.action[i]]

    # training with the smoke preset: split by game, held-out top-n, Figure 1
    out = tmp_path / "mp"
    assert go_movepred.main(["--preset", "smoke", "--data", str(data), "--out", str(out),
                             "--held-out", "0.3"]) == 0
    rec = json.loads((out / "depth-3" / "record.json").read_text())
    held = rec["heldout"]
    assert 0 <= held["top1"] <= held["top5"] <= held["top10"] <= 1
    assert held["topn"] == sorted(held["topn"]) and len(held["topn"]) == 10
    assert 1 <= held["games"] < unique and held["positions"] + rec["train_positions"] == \
        len(loaded.action)
    history = json.loads((out / "depth-3" / "history.json").read_text())
    assert [h["step"] for h in history] == [10, 20]
    assert (out / "topn.png").stat().st_size > 0 and "| 3 | 16 |" in (out / "table.md").read_text()

    # the raw net against GnuGo over GTP, colours alternated, refereed by GnuGo
    match = tmp_path / "match"
    assert go_match.main(["--model", str(out / "depth-3"), "--opponent", "gnugo", "--level", "0",
                          "--size", "9", "--games", "2", "--max-moves", "60", "--in-process",
                          "--out", str(match)]) == 0
    result = json.loads((match / "match.json").read_text())
    assert [g["net"] for g in result["games"]] == ["B", "W"]
    assert all(g["result"][:2] in ("B+", "W+") or g["result"] == "0" for g in result["games"])
    assert result["opponent"]["level"] == 0 and "--chinese-rules" in result["opponent"]["argv"]
    t = result["totals"]
    assert t["games"] == 2 and t["wins"] + t["losses"] + t["draws"] == 2
    for path in sorted((match / "games").glob("*.sgf")):
        sgf.check_rules(sgf.read(path))  # every move of both engines legal by our rules
