"""Bad command-line input to the Go experiments: one ``error:`` line and exit 2
before any work (nothing made in --out, no user file replaced)."""

from __future__ import annotations

import json

import pytest

from agz_jax.go import play
from experiments.go import bench as go_bench
from experiments.go import dataset as go_dataset
from experiments.go import match as go_match
from experiments.go import movepred as go_movepred
from experiments.go import records as go_records
from experiments.go import referee as go_referee


@pytest.fixture
def files(tmp_path):
    (tmp_path / "afile").write_text("mine")
    (tmp_path / "noexec").write_text("x")
    (tmp_path / "model").mkdir()
    return tmp_path


def fails(main, argv, capsys, *words):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error:" in err and "Traceback" not in err
    for w in words:
        assert w in err, err
    return err


def test_records_bad_input(files, capsys):
    base = ["--size", "9", "--games", "2"]
    fails(go_records.main, [*base, "--out", str(files / "afile")], capsys, "a file")
    fails(go_records.main, [*base, "--out", str(files / "afile" / "x")], capsys, "a file")
    fails(go_records.main, [*base, "--out", str(files / "r"), "--engine-path", "nosuch"],
          capsys, "--engine-path", "no such program")
    fails(go_records.main, [*base, "--out", str(files / "r"), "--engine-path",
                            str(files / "noexec")], capsys, "not executable")
    fails(go_records.main, [*base, "--out", str(files / "r"), "--opening", "200"], capsys,
          "--opening")
    fails(go_records.main, [*base, "--out", str(files / "r"), "--seed", "-1"], capsys, "--seed")
    assert not (files / "r").exists()


def test_records_counts_only_its_own_records(tmp_path):
    (tmp_path / "game-00000.sgf").write_text("(;)")
    (tmp_path / "game-99999.sgf").write_text("(;)")
    (tmp_path / "game-foreign.sgf").write_text("(;)")
    assert go_records._written(tmp_path, 2) == 1


def test_match_bad_input(files, capsys):
    base = ["--games", "2", "--out", str(files / "m")]
    fails(go_match.main, ["--model", str(files / "afile"), *base], capsys, "model directory")
    fails(go_match.main, ["--model", str(files / "nosuch"), *base], capsys, "model directory")
    model = ["--model", str(files / "model")]
    fails(go_match.main, [*model, "--games", "2", "--out", str(files / "afile")], capsys,
          "a file")
    fails(go_match.main, [*model, *base, "--engine-path", "nosuch"], capsys, "--engine-path")
    fails(go_match.main, [*model, *base, "--engine-path", str(files / "noexec")], capsys,
          "not executable")
    fails(go_match.main, [*model, *base, "--seed", "-1"], capsys, "--seed")
    assert not (files / "m").exists()


def test_match_makes_no_games_dir_for_a_bad_model(files, capsys):
    # a directory that is no model: the error comes before OUT/games is made
    assert go_match.main(["--model", str(files / "model"), "--games", "2",
                          "--out", str(files / "m")]) == 2
    assert "net.json" in capsys.readouterr().err
    assert not (files / "m" / "games").exists()


@pytest.mark.parametrize("flags, words", [
    (["--sizes", "0"], "--sizes"), (["--sizes", "50"], "--sizes"),
    (["--sizes", "a,b"], "--sizes"), (["--chunk", "0"], "--chunk"),
    (["--jobs", "0"], "--jobs"), (["--komi", "nan"], "--komi"),
    (["--gnugo", "nosuch"], "--gnugo"), (["--pass-prob", "2"], "--pass-prob"),
    (["--pass-prob", "-1"], "--pass-prob"), (["--pass-prob", "nan"], "--pass-prob"),
    (["--seed", "-1"], "--seed"), (["--sizes", "9,13", "--games", "2,2,2"], "--games"),
])
def test_referee_bad_input(flags, words, capsys):
    fails(go_referee.main, flags, capsys, words)


def test_referee_out(files, capsys):
    fails(go_referee.main, ["--gnugo", str(files / "noexec")], capsys, "not executable")
    fails(go_referee.main, ["--out", str(files)], capsys, "is a directory")
    fails(go_referee.main, ["--out", str(files / "afile")], capsys, "--force")
    fails(go_referee.main, ["--out", str(files / "afile" / "x.json")], capsys, "a file")
    assert (files / "afile").read_text() == "mine"
    args = go_referee.parse_args(["--out", str(files / "afile"), "--force"])
    assert args.force


@pytest.mark.parametrize("flags, words", [
    (["--games", "-2"], "--games"), (["--games", "0"], "--games"),
    (["--plies", "-3"], "--plies"), (["--plies", "0"], "--plies"),
    (["--repeats", "0"], "--repeats"), (["--sizes", "0"], "--sizes"),
    (["--sizes", "x"], "--sizes"), (["--sizes", "9,13", "--games", "2,2,2"], "--games"),
])
def test_bench_bad_input(flags, words, capsys):
    fails(go_bench.main, flags, capsys, words)


def test_bench_pgx_missing(capsys, monkeypatch):
    import importlib.util
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    fails(go_bench.main, ["--pgx"], capsys, "pip install pgx")


def test_bench_json_stdout_is_json(capsys):
    assert go_bench.main(["--sizes", "5", "--games", "2", "--plies", "2", "--repeats", "1",
                          "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["rows"] and "positions/s" in out.err


def test_dataset_bad_input(files, capsys):
    fails(go_dataset.main, ["--records", str(files), "--out", str(files / "afile")], capsys,
          "a file")
    fails(go_dataset.main, ["--records", str(files), "--out", str(files / "d"),
                            "--games-per-shard", "0"], capsys, "--games-per-shard")
    assert not (files / "d").exists()


def test_movepred_bad_input(files, capsys):
    base = ["--preset", "smoke", "--data", str(files)]
    fails(go_movepred.main, [*base, "--out", str(files / "afile")], capsys, "a file")
    fails(go_movepred.main, [*base, "--out", str(files / "o"), "--filters", "0"], capsys,
          "--filters")
    fails(go_movepred.main, [*base, "--out", str(files / "o"), "--depths", ""], capsys,
          "--depths")
    assert not (files / "o").exists()


def test_movepred_checkpoint_needs_resume_and_same_settings(tmp_path):
    args = go_movepred.parse_args(["--preset", "smoke", "--data", str(tmp_path),
                                   "--out", str(tmp_path)])
    config, tc = args.nets[0], args.train
    d = tmp_path / "depth-3"
    d.mkdir()
    (d / "checkpoint.msgpack").write_bytes(b"")
    assert "--resume" in go_movepred.net_dir_problem(d, config, tc, resume=False)
    assert go_movepred.net_dir_problem(d, config, tc, resume=True) is None
    (d / "settings.json").write_text(json.dumps({"net": config.to_dict(),
                                                 "train": tc.to_dict()}))
    assert go_movepred.net_dir_problem(d, config, tc, resume=True) is None
    other = go_movepred.parse_args(["--preset", "smoke", "--data", str(tmp_path),
                                    "--out", str(tmp_path), "--filters", "8"]).nets[0]
    problem = go_movepred.net_dir_problem(d, other, tc, resume=True)
    assert "filters" in problem and "16" in problem and "8" in problem


def test_engine_path_problem(tmp_path):
    assert play.engine_path_problem(None) is None
    assert play.engine_path_problem("sh") is None
    assert "directory" in play.engine_path_problem(str(tmp_path))


def test_ctrl_c_is_one_line(files, capsys, monkeypatch):
    def interrupt(args):
        raise KeyboardInterrupt
    for mod in (go_records, go_match, go_referee):
        monkeypatch.setattr(mod, "run", interrupt)
    assert go_records.main(["--games", "2", "--out", str(files / "r")]) == 130
    assert "kept" in capsys.readouterr().err
    assert go_match.main(["--model", str(files / "model"), "--games", "2",
                          "--out", str(files / "m")]) == 130
    assert "kept" in capsys.readouterr().err
    assert go_referee.main(["--sizes", "9", "--games", "1"]) == 130
    assert "interrupted" in capsys.readouterr().err
