"""The arena CLI: specs, validation, summary, JSON and saved games."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agz_jax.config.presets import get_preset
from agz_jax.config.schema import ConfigError
from agz_jax.game import records
from agz_jax.nets import checkpoint
from agz_jax.play import players
from agz_jax.training import run
from experiments.play import arena as cli

ROOT = Path(__file__).resolve().parents[1]


def tiny_run(d: Path) -> Path:
    cfg = get_preset("smoke").replace(**{"game.size": 5, "net.filters": 4, "net.value_hidden": 4})
    comps = run.build(cfg)
    state = run.init_state(comps)
    checkpoint.write_config(d, cfg)
    checkpoint.save(d, 0, state, {"iteration": 0})
    return d


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return tiny_run(tmp_path_factory.mktemp("run"))


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("AGZ_JAX_NO_CACHE", "1")


def run_json(capsys, *argv):
    assert cli.main([*argv, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    check_consistent(stats)
    return stats


def check_consistent(s):
    assert s["wins"] + s["draws"] + s["losses"] == s["games"]
    assert s["wins_as_black"] + s["wins_as_white"] == s["wins"]
    assert s["score"] == pytest.approx((s["wins"] + s["draws"] / 2) / s["games"])
    assert s["low"] <= s["score"] <= s["high"]
    assert (s["elo"] > 0) == (s["score"] > 0.5) and (s["elo"] < 0) == (s["score"] < 0.5)


@pytest.mark.parametrize("spec", ["policy:{d}", pytest.param("mcts:{d}:4", marks=pytest.mark.long)])
def test_checkpoint_player_vs_random(ckpt, capsys, tmp_path, spec):
    spec = spec.format(d=ckpt)
    out = tmp_path / "games"
    s = run_json(capsys, "--a", spec, "--b", "random", "--games", "4", "--seed", "3",
                 "--out", str(out))
    assert (s["a"], s["b"], s["seed"], s["games"], s["size"]) == (spec, "random", 3, 4, 5)
    paths = sorted(out.glob("*.psq"))
    assert len(paths) == 4
    openings = set()
    for i, p in enumerate(paths):
        rec = records.read_psq(p)
        assert rec.size == 5 and len(rec.moves) >= 9
        state = records.to_states(rec)  # raises on an illegal game
        assert bool(state.done)
        openings.add(tuple(rec.moves[:2]))
        black = spec if i < 2 else "random"
        assert f"black: {black}" in p.read_text()
    assert len(openings) > 1  # random openings: distinct games


def test_readable_summary(capsys):
    assert cli.main(["--a", "random", "--b", "random", "--games", "2", "--size", "5"]) == 0
    out = capsys.readouterr().out
    for part in ("2 games on 5x5", "A = random", "B = random", "wins as black",
                 "score", "95% CI", "Elo"):
        assert part in out


def test_subprocess_random_vs_random():
    env = {**os.environ, "AGZ_JAX_NO_CACHE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.play.arena", "--a", "random", "--b", "random",
         "--games", "4", "--size", "7", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    check_consistent(s)
    assert (s["games"], s["size"], s["a"], s["b"], s["seed"]) == (4, 7, "random", "random", 0)


def test_bad_inputs(ckpt, tmp_path, capsys):
    # Copies of the run with another board or rule in config.json: the mismatch
    # is found from the configs, before any checkpoint is read.
    cfg = checkpoint.read_config(ckpt)
    other, standard = tmp_path / "other", tmp_path / "std"
    for d, c in ((other, cfg.replace(**{"game.size": 6})),
                 (standard, cfg.replace(**{"game.rule": "standard"}))):
        shutil.copytree(ckpt, d)
        checkpoint.write_config(d, c)
    empty = tmp_path / "empty"
    empty.mkdir()
    rnd = ["--b", "random", "--games", "2"]
    cases = [
        (["--a", "mentor:4", *rnd], "mentor level must be in 0..3"),
        (["--a", "mentor:x", *rnd], "mentor needs a level"),
        (["--a", "mentor:1", *rnd, "--rule", "standard"], "freestyle and renju, not standard"),
        (["--a", "alphabeta", *rnd], "unknown player kind"),
        (["--a", "random:3", *rnd], "takes no argument"),
        (["--a", "policy:", *rnd], "needs a model"),
        (["--a", f"mcts:{ckpt}:x", *rnd], "SIMS must be an integer"),
        (["--a", "mcts:4", *rnd], "needs a model and a number of simulations"),
        (["--a", f"mcts:{ckpt}:0", *rnd], "SIMS must be at least 1"),
        (["--a", f"policy:{tmp_path / 'nope'}", *rnd], "not found"),
        (["--a", f"policy:{empty}", *rnd], "config.json not found"),
        (["--a", "random", "--b", "random", "--games", "3"], "must be even"),
        (["--a", "random", "--b", "random", "--games", "0"], "must be even"),
        (["--a", f"policy:{ckpt}", "--b", f"policy:{other}", "--games", "2"],
         "board sizes differ"),
        (["--a", f"policy:{ckpt}", "--b", f"mcts:{standard}:2", "--games", "2"],
         "rules differ"),
        (["--a", f"policy:{ckpt}", *rnd, "--size", "9"], "--size 9 differs"),
        (["--a", "random", *rnd, "--size", "3"], "--size must be in"),
        (["--a", "random", *rnd, "--chunk", "-1"], "--chunk must be >= 0"),
    ]
    for argv, problem in cases:
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and problem in err, (argv, err)
    (empty / "config.json").write_text((ckpt / "config.json").read_text())
    assert cli.main(["--a", f"policy:{empty}", *rnd]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert cli.main(["--a", "random", "--games", "2"]) == 2  # argparse: --b missing
    assert "--b" in capsys.readouterr().err


def test_mentor_players(capsys):
    """mentor:LEVEL plays: level 0 beats random on a small board, and its games
    are won by five (short), in a batch with colours alternated."""
    assert cli.main(["--a", "mentor:0", "--b", "random", "--games", "6", "--size", "9",
                     "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    check_consistent(s)
    assert s["a"] == "mentor:0" and s["wins"] >= 5
    assert s["wins_as_black"] >= 2 and s["wins_as_white"] >= 2


def test_progress_line_counts_the_games_over():
    from agz_jax.match.arena import MatchResult

    a_black = np.arange(6) < 3
    winner = np.array([0, 1, -1, 1, 0, -1])  # A wins 0 and 3, loses 1 and 4
    finished = np.array([True, True, False, True, True, True])  # 5 is drawn
    line = players.progress_text(40, MatchResult(winner, a_black, None, None), finished, 12.3)
    assert line == "ply 40: 1 of 6 games playing; A 2 wins / 1 draws / 2 losses so far; 12 s"
    none_over = players.progress_text(8, MatchResult(winner, a_black, None, None),
                                  np.zeros(6, bool), 3.0)
    assert none_over == "ply 8: 6 of 6 games playing; A 0 wins / 0 draws / 0 losses so far; 3 s"


def test_chunked_and_single_scan_matches_agree(ckpt, capsys):
    """The default (finished games leave the batch every --chunk plies) and
    --chunk 0 (one scan) play the same games for a player that looks only at
    its own position: the raw policy's argmax against itself."""
    spec = f"policy:{ckpt}"
    argv = ["--a", spec, "--b", spec, "--games", "8", "--seed", "2"]
    chunked = run_json(capsys, *argv, "--chunk", "3")
    scan = run_json(capsys, *argv, "--chunk", "0")
    drop = ("seconds",)
    assert {k: v for k, v in chunked.items() if k not in drop} == {
        k: v for k, v in scan.items() if k not in drop}


def test_opening_set_and_plain_search(ckpt, capsys, tmp_path):
    sets = tmp_path / "open.txt"
    sets.write_text("2,2 2,3\n0,0 4,4\n")
    out = tmp_path / "games"
    s = run_json(capsys, "--a", f"mcts:{ckpt}:4:plain", "--b", "random", "--games", "4",
                 "--openings", str(sets), "--opening-plies", "0", "--out", str(out))
    assert s["openings"] == str(sets)
    starts = []
    for p in sorted(out.glob("*.psq")):
        rec = records.read_psq(p)
        assert bool(records.to_states(rec).done)  # the whole game, opening included
        starts.append(rec.moves[:2])
    assert starts[0] == starts[2] and starts[1] == starts[3]  # each opening, both colours
    assert {tuple(m) for m in starts} <= {(12, 13), (0, 24)}  # row * 5 + col

    spec = players.parse_spec(f"mcts:{ckpt}:8:plain", "--a")
    assert spec.plain and spec.sims == 8 and spec.run_dir == ckpt
    assert not players.parse_spec(f"mcts:{ckpt}:8", "--a").plain
    bad = tmp_path / "bad.txt"
    bad.write_text("2,2 9,9\n")
    assert cli.main(["--a", "random", "--b", "random", "--games", "2", "--size", "5",
                     "--openings", str(bad)]) == 2
    assert "--openings" in capsys.readouterr().err


@pytest.mark.parametrize("suffix, plain, algorithm", [
    ("", False, None), (":puct", False, "puct"), (":gumbel", False, "gumbel"),
    (":plain:puct", True, "puct"), (":gumbel:plain", True, "gumbel")])
def test_search_algorithm_option(ckpt, monkeypatch, suffix, plain, algorithm):
    """``mcts:MODEL:SIMS:puct`` / ``:gumbel`` search the model's nets with that
    algorithm, its other search settings (and ``:plain``'s) as they were."""
    from agz_jax.game.gomoku import Rules
    from agz_jax.search import searcher as search

    spec = players.parse_spec(f"mcts:{ckpt}:8{suffix}", "--a")
    assert (spec.plain, spec.algorithm, spec.sims, spec.run_dir) == (plain, algorithm, 8, ckpt)
    made = []
    real = search.Searcher.of
    monkeypatch.setattr(search.Searcher, "of", lambda *a, **kw: made.append(kw) or real(*a, **kw))
    spec = players.load_spec(spec, "--a")
    players.make_player(spec, Rules(spec.config.game.size, spec.config.game.rule))
    own = spec.config.search
    got = made[0]["search"]
    assert got.algorithm == (algorithm or own.algorithm)
    assert got.forced_moves == (own.forced_moves and not plain)
    assert (got.num_simulations, got.c_puct) == (own.num_simulations, own.c_puct)


@pytest.mark.parametrize("text", ["mcts:m:8:puct:gumbel", "mcts:m:8:plain:plain",
                                  "mcts:m:8:puct:puct"])
def test_search_algorithm_option_refused_twice(text):
    with pytest.raises(ConfigError, match="given twice"):
        players.parse_spec(text, "--a")


def test_out_is_checked_before_playing(tmp_path, capsys, monkeypatch):
    """--out that cannot take the games (a file, a path under a file, a
    directory with an earlier match's games) is refused before anything is
    played, and the earlier games are left as they were."""
    monkeypatch.setattr(players, "play", lambda *a, **k: pytest.fail("played"))
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "game_0000.psq").write_text("Piskvorky 5x5, 11:11, 0\n")
    rnd = ["--a", "random", "--b", "random", "--games", "2", "--size", "5", "--out"]
    for out, problem in ((a_file, "is a file, not a directory"),
                         (a_file / "sub", f"is under {a_file}, which is a file"),
                         (earlier, "already holds 1 games of an earlier match")):
        assert cli.main([*rnd, str(out)]) == 2, out
        err = capsys.readouterr().err
        assert err.startswith("error: --out ") and err.count("\n") == 1, err
        assert problem in err, err
    assert "give a new directory" in err
    assert a_file.read_text() == "x"
    assert (earlier / "game_0000.psq").read_text() == "Piskvorky 5x5, 11:11, 0\n"


@pytest.mark.parametrize("text, problem", [
    ("mcts:m:8:bogus", "unknown option 'bogus' after SIMS; the options are plain, puct, gumbel"),
    ("mcts:m:8:plain:bogus", "unknown option 'bogus'"),
    ("mcts:m:8:bogus:puct", "unknown option 'bogus'"),
    ("mcts:m:x", "SIMS must be an integer, got 'x'")])
def test_an_unknown_mcts_option_is_named(text, problem):
    with pytest.raises(ConfigError, match="^--a .*" + problem):
        players.parse_spec(text, "--a")


def test_an_unreadable_net_names_its_player(ckpt, tmp_path, capsys):
    """A model whose variables are truncated fails when loaded (after its
    config was read): the error says which player it is."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text((ckpt / "config.json").read_text())
    (model / "variables.msgpack").write_bytes(b"\x82")
    assert cli.main(["--a", "random", "--b", f"policy:{model}", "--games", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --b 'policy:{model}': ") and "not readable" in err, err
