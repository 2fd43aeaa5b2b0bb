"""``experiments.go.movepred``'s depth table: the paper's number beside ours is
the one of the paper's net of the same depth and width (its 3-layer net of 16
filters had 37.5%, its 128-filter one 48.0%)."""

from __future__ import annotations

from types import SimpleNamespace

from experiments.go import movepred as go_movepred


def test_paper_row_matches_depth_and_width():
    assert go_movepred.paper_row(3, 16) == "37.5"
    assert go_movepred.paper_row(3, 128) == "48.0"
    assert go_movepred.paper_row(12, 128) == "55.2"
    assert go_movepred.paper_row(3, 32) == "48.0 (128 filters)"
    assert go_movepred.paper_row(6, 32) == "51.2 (128 filters)"
    assert go_movepred.paper_row(5, 32) == ""


def record(layers, filters):
    held = {"top1": 0.5, "top5": 0.8, "top10": 0.9, "policy_ce": 1.5, "games": 7,
            "positions": 250}
    return {"net": {"layers": layers, "filters": filters}, "heldout": held, "params": 1000,
            "train": {"steps": 10, "batch_size": 4}, "train_positions": 2000,
            "final_train": {"train/top1": 0.6, "train_s": 12.0}}


def test_table_rows():
    data = SimpleNamespace(size=9, meta={"channels": ["x"] * 28})
    text = go_movepred.table([record(3, 16), record(3, 32)], data)
    rows = [line for line in text.splitlines() if line.startswith("| 3 |")]
    assert rows[0].endswith("| 37.5 |") and rows[1].endswith("| 48.0 (128 filters) |")
    assert "| 50.0 | 80.0 | 90.0 | 1.500 | 60.0 | 10 x 4 | 12 |" in rows[0]
