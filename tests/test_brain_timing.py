"""experiments.play.brain_timing's command line: the report goes beside its ledger
(docs/brain_timing.md only for the default one), and bad flags are one line."""

from __future__ import annotations

import json

import pytest

from experiments.play import brain_timing

ROW = {"setting": "timeout_turn 200", "limit_ms": 200, "moves": 20, "mean_ms": 150.0,
       "max_ms": 190.0, "over": 0, "total_ms": 3000.0, "match_ms": None, "load": 1.0,
       "model": "m", "date": "2026-01-01 00:00"}


@pytest.fixture
def shipped_report():
    """docs/brain_timing.md's bytes, to check that it is left alone (and put
    back, should a test have rewritten it)."""
    before = brain_timing.REPORT.read_bytes() if brain_timing.REPORT.exists() else None
    yield before
    if before is not None and brain_timing.REPORT.read_bytes() != before:
        brain_timing.REPORT.write_bytes(before)


def test_the_report_goes_beside_its_ledger(tmp_path, capsys, shipped_report):
    ledger = tmp_path / "timing" / "t.jsonl"
    ledger.parent.mkdir()
    ledger.write_text(json.dumps(ROW) + "\n")
    assert brain_timing.main(["--report", "--ledger", str(ledger)]) == 0
    text = (tmp_path / "timing" / "brain_timing.md").read_text()
    assert "| timeout_turn 200 | m | 20 | 150 | 190 | 0 / 20 | 3000 | 1.0 |" in text
    assert text in capsys.readouterr().out
    assert brain_timing.report_path(brain_timing.LEDGER) == brain_timing.REPORT
    if shipped_report is not None:
        assert brain_timing.REPORT.read_bytes() == shipped_report


def test_bad_flags_are_one_line(tmp_path, capsys, shipped_report):
    ledger = tmp_path / "t.jsonl"
    taken = tmp_path / "taken.txt"
    taken.write_text("keep me\n")
    for flags, words in (
            (["--model", str(tmp_path / "nosuch"), "--moves", "1"], "--model: model"),
            (["--turns", "200,soon"], "--turns wants comma-separated milliseconds"),
            (["--moves", "0"], "--moves >= 1"),
            (["--report"], "not found; measure first"),
            (["--ledger", str(tmp_path)], "is not a file path"),
            (["--ledger", str(taken / "t.jsonl")], "is not a file path"),
            (["--ledger", str(tmp_path / "brain_timing.md")], "the name of the report")):
        flags = flags if "--ledger" in flags else [*flags, "--ledger", str(ledger)]
        assert brain_timing.main(flags) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and words in err and err.count("\n") == 1, err
    assert not ledger.exists() and not (tmp_path / "brain_timing.md").exists()
    assert taken.read_text() == "keep me\n"
    if shipped_report is not None:
        assert brain_timing.REPORT.read_bytes() == shipped_report
