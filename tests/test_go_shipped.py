"""The shipped Go nets (``models/go19``, ``models/go9``) and ``gtp-agz``
without ``--model``: the program starts on the 19x19 net and answers
``genmove b`` on an empty 19x19 board with a point, and after ``boardsize 9``
plays the 9x9 net; a missing default model is one line of error.

One subprocess compiles the 19x19 planes and the net (the compilation cache
makes later runs faster); the rest needs no compilation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from agz_jax.go import gtp_engine
from agz_jax.go import net as net_lib
from agz_jax.go.rules import point

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "models" / "go19"


def test_the_shipped_model_is_the_papers_net_and_says_how_it_was_trained():
    config, _, meta = net_lib.load(SHIPPED)
    assert (config.size, config.channels, config.layers, config.filters) == (19, 28, 12, 128)
    assert meta["ladder"] == "none"  # trained with the ladder plane zero (go.train19)
    assert 0.2 < meta["heldout"]["top1"] < 0.6
    # 2,267,090 float32 parameters: about 9 MB, the card's size
    assert sum(p.stat().st_size for p in SHIPPED.iterdir()) < 10_000_000
    assert (SHIPPED / "MODEL_CARD.md").exists()
    assert gtp_engine.default_model() == SHIPPED
    assert gtp_engine.resolve_model(None) == SHIPPED
    assert gtp_engine.resolve_model("go19") == SHIPPED  # a name of models/
    assert gtp_engine.resolve_model(str(SHIPPED)) == SHIPPED
    assert gtp_engine.ladder_plane_read(SHIPPED, meta) is False


def test_the_shipped_9x9_net():
    path = ROOT / "models" / "go9"
    config, _, meta = net_lib.load(path)
    assert (config.size, config.channels, config.layers, config.filters) == (9, 28, 3, 32)
    assert gtp_engine.ladder_plane_read(path, meta) is True  # trained with the ladder plane
    assert 0.3 < meta["heldout"]["top1"] < 0.7
    assert (path / "MODEL_CARD.md").exists()
    assert gtp_engine.shipped_net(9)[0] == config
    assert gtp_engine.shipped_net(13) is None


def test_the_ladder_plane_setting_of_a_run_folder(tmp_path):
    assert gtp_engine.ladder_plane_read(tmp_path, {}) is True  # go_movepred's nets read it
    (tmp_path / "settings.json").write_text(json.dumps({"train": {"ladder": "none"}}))
    assert gtp_engine.ladder_plane_read(tmp_path, {}) is False  # go_train19's run folder
    assert gtp_engine.ladder_plane_read(tmp_path, {"ladder": "auto"}) is True
    (tmp_path / "settings.json").write_text("[1]")
    assert gtp_engine.ladder_plane_read(tmp_path, {}) is True


def gtp_agz() -> list[str]:
    """The console script beside this Python (the module where it is not installed)."""
    script = Path(sys.executable).parent / "gtp-agz"
    return [str(script)] if script.exists() else [sys.executable, "-m",
                                                   "agz_jax.go.gtp_engine"]


def test_gtp_agz_without_model_plays_the_shipped_net(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "AGZ_JAX_MODELS"}
    script = ("name\nversion\nboardsize 19\nclear_board\nkomi 6.5\ngenmove b\nshowboard\n"
              "boardsize 9\nversion\ngenmove b\nquit\n")
    run = subprocess.run(gtp_agz(), input=script, capture_output=True, text=True,
                         timeout=300, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    answers = run.stdout.split("\n\n")
    assert answers[0] == "= agz_jax"
    assert answers[1].endswith("(net: 12 layers, 128 filters, 19x19)")
    assert answers[2:5] == ["=", "=", "="]
    move = answers[5]
    assert re.fullmatch(r"= [A-HJ-T](1[0-9]|[1-9])", move), move  # a point, not pass
    point(19, move[2:])  # on the board
    board = answers[6].split("\n")
    assert sum(row.count("X") for row in board[2:21]) == 1  # played, one black stone
    # boardsize 9 switches to the shipped 9x9 net (models/go9)
    assert answers[7] == "=" and answers[8].endswith("(net: 3 layers, 32 filters, 9x9)")
    assert re.fullmatch(r"= [A-HJ][1-9]", answers[9]), answers[9]
    assert answers[10:] == ["=", ""]


def test_a_missing_default_model_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGZ_JAX_MODELS", str(tmp_path))
    assert gtp_engine.main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("gtp-agz: no default model: ") and "pass --model DIR" in err
