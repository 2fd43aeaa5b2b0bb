"""experiments.studies.reuse: bad input is one line (exit 2) before any game is played;
the report is written beside its ledger."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from agz_jax.game.gomoku import Rules
from agz_jax.nets import models
from agz_jax.play import engine
from experiments.studies import reuse

ROW = {"model": "m", "games": 2, "sims": 32, "ms": None, "max_sims": 32, "seed": 1,
       "reuse_score": 0.5, "low": 0.1, "high": 0.9, "wins": 1, "draws": 0, "losses": 1,
       "reuse": {"carried_per_move": 1.0, "new_sims_per_move": 2.0, "ms_per_move": 3},
       "no_reuse": {"carried_per_move": 0.0, "new_sims_per_move": 3.0, "ms_per_move": 4},
       "jax_backend": "cpu"}


def one_error(capsys, words: str) -> None:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and words in err, err


@pytest.fixture
def no_games(monkeypatch):
    """Any engine built means work started: the test fails."""
    def built(*a, **k):
        raise AssertionError("an engine was built")

    monkeypatch.setattr(engine, "Engine", built)


def test_ledger_checked_before_playing(tmp_path, capsys, no_games):
    assert reuse.main(["--sims", "4", "--games", "2", "--ledger", str(tmp_path)]) == 2
    one_error(capsys, "not a file path")
    f = tmp_path / "f.txt"
    f.write_text("x")
    assert reuse.main(["--sims", "4", "--ledger", str(f / "l.jsonl")]) == 2
    one_error(capsys, "not a file path")
    assert reuse.main(["--sims", "4", "--ledger", str(tmp_path / "reuse.md")]) == 2
    one_error(capsys, "name of the report")


def test_bad_model_openings_and_max_sims_are_one_line(tmp_path, capsys, monkeypatch,
                                                       no_games):
    ledger = ["--ledger", str(tmp_path / "l.jsonl")]
    assert reuse.main(["--ms", "10", "--max-sims", "0", *ledger]) == 2
    one_error(capsys, "--max-sims must be a positive")
    assert reuse.main(["--sims", "4", "--model", str(tmp_path / "nosuch"), *ledger]) == 2
    one_error(capsys, "--model")
    monkeypatch.setattr(models, "load", lambda name: SimpleNamespace(rules=Rules(9)))
    assert reuse.main(["--sims", "4", "--openings", "nosuch", *ledger]) == 2
    one_error(capsys, "--openings")
    bad = tmp_path / "bad.txt"
    bad.write_text("zz\n")
    assert reuse.main(["--sims", "4", "--openings", str(bad), *ledger]) == 2
    one_error(capsys, "--openings")
    assert not (tmp_path / "l.jsonl").exists()


def test_report_beside_its_ledger_and_bad_ledgers(tmp_path, capsys):
    ledger = tmp_path / "runs" / "r.jsonl"
    assert reuse.main(["--report", "--ledger", str(ledger)]) == 2
    one_error(capsys, "not found")
    ledger.parent.mkdir()
    ledger.write_text(json.dumps(ROW) + "\n")
    assert reuse.main(["--report", "--ledger", str(ledger)]) == 0
    assert "| 32 visits | m |" in (ledger.parent / "reuse.md").read_text()
    assert reuse.report_path(reuse.LEDGER) == reuse.REPORT
    capsys.readouterr()
    notjson = tmp_path / "notjson.txt"
    notjson.write_text("hello\n")
    assert reuse.main(["--report", "--ledger", str(notjson)]) == 2
    one_error(capsys, "not a ledger")
    notjson.write_text('{"a": 1}\n')
    assert reuse.main(["--report", "--ledger", str(notjson)]) == 2
    one_error(capsys, "not a match")
