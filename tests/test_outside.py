"""The outside yardstick: the Piskvork manager (``agz_jax.play.piskvork``) against the
stand-in engine ``tests/fake_piskvork.py`` (a full game, each failure as the
failing engine's loss, Rapfi's dropped commands), and ``experiments.play.outside``
(the ledger, resume, the table, the CLI's one-line errors, the ladder's
``--outside``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agz_jax.nets import models
from agz_jax.play import piskvork, piskvork_games
from agz_jax.play.piskvork import Piskvork, Settings
from agz_jax.play.piskvork_games import play_game
from agz_jax.studies import ledger as ladder_ledger
from agz_jax.studies import outside, outside_report
from experiments.play import ladder as ladder_cli
from experiments.play import outside as outside_cli

FAKE = str(Path(__file__).resolve().parent / "fake_piskvork.py")
OPENING = [112, 113, 127]  # 7,7 black, 8,7 white, 7,8 black: white to move
FAST = Settings(timeout_turn_ms=300, grace_s=1.0, quiet_s=0.002, close_timeout_s=1.0)


def fake(mode: str = "normal", *extra: str) -> list[str]:
    return [sys.executable, FAKE, mode, *extra]


@pytest.fixture(scope="module")
def referee():
    return piskvork_games.Referee(15, "freestyle")


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("AGZ_JAX_NO_CACHE", "1")
    monkeypatch.delenv(outside.ENV, raising=False)


def test_a_full_game_ends_on_a_five(referee):
    """Two greedy fakes from an opening: the game ends on a five by the
    project's rules, every move on an empty point, the opening first."""
    from agz_jax.game.gomoku import Rules

    with Piskvork(fake(), "a", FAST) as a, Piskvork(fake(), "b", FAST) as b:
        game = play_game(a, b, OPENING, referee)
        again = play_game(b, a, OPENING, referee)  # RESTART, colours swapped
    assert game.reason == "five" and game.failed is None and game.winner in (0, 1)
    assert game.moves[:3] == OPENING and len(set(game.moves)) == len(game.moves)
    assert game.winner == (len(game.moves) - 1) % 2  # the side that moved last
    state = Rules(15, "freestyle").from_moves(game.moves)
    assert bool(state.done) and int(state.winner) == game.winner
    assert again.reason == "five" and again.moves[:3] == OPENING
    assert a.proc is None and b.proc is None  # closed on leaving the block


def test_a_game_keeps_what_each_move_searched(referee):
    """``pbrain-agz --debug``'s line before each move (here the stand-in's, in
    its form) is kept for each move after the opening; an engine that prints
    none gets None."""
    with Piskvork(fake("normal", "--debug"), "ours", FAST) as a, \
            Piskvork(fake(), "theirs", FAST) as b:
        game = play_game(b, a, OPENING, referee)  # ours white: the first move after it
    assert len(game.searched) == len(game.moves) - len(OPENING)
    ours, theirs = game.searched[0::2], game.searched[1::2]
    assert all(s is None for s in theirs)
    assert ours[0] == ["search", 100, 0, 5] and ours[1] == ["search", 200, 20, 5]
    assert [s[1] for s in ours] == [100 * (i + 1) for i in range(len(ours))]
    assert piskvork_games.searched(["MESSAGE x", "DEBUG vcf: 0 simulations in 48 ms "
                                    "(budget 920 ms), value +1.000"]) == ["vcf", 0, 0, 48]
    assert piskvork_games.searched(["DEBUG search failed (ValueError: x)"]) is None


def test_begin_on_the_empty_board(referee):
    with Piskvork(fake(), "a", FAST) as a, Piskvork(fake(), "b", FAST) as b:
        game = play_game(a, b, [], referee)
    assert game.moves[0] == 7 * 15 + 7 and game.reason == "five"


@pytest.mark.parametrize("mode, kind, words", [
    ("illegal", "illegal", "an occupied point"),
    ("offboard", "illegal", "off the 15x15 board"),
    ("crash", "crashed", "exited with code 3"),
    ("hang", "timeout", "gave no reply to TURN"),
    ("error", "refused", "answered TURN"),
])
def test_a_failure_is_the_engines_loss(referee, mode, kind, words):
    """Each misbehaviour ends the game as the misbehaving engine's loss, with a
    one-line reason naming it; the manager then kills it, and a fresh process
    plays the next game."""
    with Piskvork(fake(), "good", FAST) as good, Piskvork(fake(mode), "bad", FAST) as bad:
        game = play_game(good, bad, OPENING, referee)  # bad is white
        assert (game.failed, game.winner, game.failure) == (1, 0, kind)
        assert game.reason.startswith("bad ") and words in game.reason
        assert "\n" not in game.reason
        first = bad.proc
        t0 = time.monotonic()
        bad.close()
        assert time.monotonic() - t0 < 1.5 and first.poll() is not None
        second = play_game(good, bad, OPENING, referee)  # restarted
        assert bad.proc is not first and second.failure == kind
    if mode == "crash":
        assert "crashing on purpose" in game.reason  # its last stderr line


def test_slow_reply_needs_the_quiet_wait(referee):
    """Like Rapfi, the slowreply fake drops a command sent within 50 ms of its
    last output: without the wait the game fails, with it the game is played."""
    rushed = Settings(timeout_turn_ms=300, grace_s=0.5, quiet_s=0.0)
    with Piskvork(fake(), "a", rushed) as a, Piskvork(fake("slowreply"), "slow", rushed) as s:
        game = play_game(a, s, OPENING, referee)
    assert game.failed == 1 and game.failure in ("refused", "timeout")
    patient = Settings(timeout_turn_ms=300, grace_s=0.5, quiet_s=0.06)
    with Piskvork(fake(), "a", patient) as a, Piskvork(fake("slowreply"), "slow", patient) as s:
        game = play_game(a, s, OPENING, referee)
    assert game.reason == "five" and game.failed is None


def test_a_missing_engine(tmp_path):
    with pytest.raises(piskvork.EngineMissing, match="does not exist"):
        Piskvork(str(tmp_path / "nothing"))
    plain = tmp_path / "plain"
    plain.write_text("not a program")
    with pytest.raises(piskvork.EngineMissing, match="not an executable"):
        Piskvork([str(plain)])
    with pytest.raises(piskvork.EngineMissing, match="not on PATH"):
        Piskvork("no-such-engine-here --flag")


def test_start_failure_is_a_loss(referee, tmp_path):
    """An engine that exits at once loses the game it was to start."""
    with Piskvork(fake(), "a", FAST) as a, Piskvork(["/bin/false"], "dead", FAST) as d:
        game = play_game(a, d, OPENING, referee)
    assert (game.failed, game.winner, game.failure) == (1, 0, "crashed")
    assert game.moves == OPENING


# -- experiments.play.outside ---------------------------------------------------------------------

def fake_candidate(name="ours@300ms", mode="normal"):
    return outside.Candidate(name, fake(mode, "--debug"), 15, "freestyle")


def play(tmp_path, lines, nodes=(10, 20), games=2, theirs=None, **kw):
    import numpy as np

    from agz_jax.game import openings

    return outside.play([fake_candidate()], theirs or fake(), list(nodes), seed=1, games=games,
                        turn_ms=300, outside_turn_ms=300,
                        openings=np.asarray(openings.load("balanced15", 15)),
                        openings_name="balanced15", ledger=tmp_path / "games.jsonl",
                        lines=lines, quiet_s=0.002, grace_s=1.0, **kw)


def test_ledger_keeps_every_game_and_a_rerun_resumes(tmp_path):
    from agz_jax.game import openings

    ledger = tmp_path / "games.jsonl"
    lines: list[dict] = []
    assert play(tmp_path, lines) == 4
    kept = ladder_ledger.read_ledger(ledger)  # the ladder's own checks pass
    assert [(x["b"], x["outside"]["game"], x["outside"]["a_black"]) for x in kept] == [
        ("rapfi:10", 0, True), ("rapfi:10", 1, False), ("rapfi:20", 0, True),
        ("rapfi:20", 1, False)]
    first = kept[0]
    assert first["outside"]["opening"] == kept[1]["outside"]["opening"]  # twice, swapped
    assert first["seed"] == ladder_ledger.pairing_seed(1, "ours@300ms", "rapfi:10")
    opening = openings.load("balanced15", 15)[first["outside"]["opening"]]
    assert first["outside"]["moves"][:3] == [int(a) for a in opening]
    assert (first["ladder_seed"], first["openings"], first["opening_plies"]) == (1, "balanced15", 0)
    # The candidate's account of each of its moves after the opening (black: its
    # stones are the even ones), and none of the outside engine's.
    ours = len(range(4, len(first["outside"]["moves"]), 2))
    assert [s[1] for s in first["outside"]["searched"]] == [100 * (i + 1) for i in range(ours)]
    assert [s[0] for s in kept[1]["outside"]["searched"]] == ["search"] * len(
        kept[1]["outside"]["searched"])
    assert outside_report.rows(kept)[0].simulations  # the table's median reads them
    assert play(tmp_path, ladder_ledger.read_ledger(ledger)) == 0  # all done: nothing to play
    # A run killed in its last game: only that game is played again, the same way.
    text = ledger.read_text().splitlines()
    ledger.write_text("\n".join(text[:3]) + "\n")
    assert play(tmp_path, ladder_ledger.read_ledger(ledger)) == 1
    again = ladder_ledger.read_ledger(ledger)
    assert again[3]["outside"]["moves"] == kept[3]["outside"]["moves"]
    # More node levels: only the new level is played.
    assert play(tmp_path, again, nodes=(10, 20, 30)) == 2
    # A longer match: only the games it lacks, with the same openings for the first.
    assert play(tmp_path, ladder_ledger.read_ledger(ledger), nodes=(10,), games=4) == 2
    longer = [x for x in ladder_ledger.read_ledger(ledger) if x["b"] == "rapfi:10"]
    assert [x["outside"]["game"] for x in longer] == [0, 1, 2, 3]
    assert [r.games for r in outside_report.rows(longer)] == [4]


def test_outside_failures_are_recorded_and_restarted(tmp_path, capsys):
    lines: list[dict] = []
    assert play(tmp_path, lines, nodes=(10,), theirs=fake("crash", "--after", "2")) == 2
    assert [x["wins"] for x in lines] == [1, 1]
    assert all(x["outside"]["failed"] == "rapfi:10" and x["outside"]["failure"] == "crashed"
               for x in lines)
    err = [e for e in capsys.readouterr().err.splitlines() if e]
    assert len(err) == 2 and all(e.startswith("rapfi:10 failed in game") and
                                 "restarting it" in e for e in err)
    # Three failures in a row stop the match, the games so far kept.
    lines = []
    with pytest.raises(outside.OutsideError, match="failed 3 games in a row"):
        play(tmp_path / "b", lines, nodes=(10,), games=4, theirs=fake("hang"))
    assert len(lines) == 3


def game_line(a, nodes, a_black, result, of=4, k=0, failed=None):
    wins, draws, losses = {"w": (1, 0, 0), "d": (0, 1, 0), "l": (0, 0, 1)}[result]
    return {"a": a, "b": f"rapfi:{nodes}", "wins": wins, "draws": draws, "losses": losses,
            "games": 1, "seed": nodes, "ladder_seed": 0, "size": 15, "rule": "freestyle",
            "openings": "balanced15", "opening_plies": 0, "seconds": 1.0,
            "outside": {"game": k, "of": of, "opening": 0, "a_black": a_black, "nodes": nodes,
                        "turn_ms": 1000, "outside_turn_ms": 30000, "reason": "five",
                        "failed": failed, "failure": failed and "timeout",
                        "moves": []}}


def test_table_rows_and_rung():
    from agz_jax.match.arena import wilson

    lines = [game_line("c", 300, True, "w"), game_line("c", 300, False, "d", k=1),
             game_line("c", 300, True, "w", k=2), game_line("c", 300, False, "l", k=3),
             game_line("c", 1000, True, "w"), game_line("c", 1000, False, "l", k=1),
             game_line("c", 3000, True, "l", failed="c"),
             {"a": "x", "b": "y", "wins": 1, "draws": 0, "losses": 1, "games": 2, "seed": 5,
              "size": 15, "rule": "freestyle"}]
    # Searched moves' simulations: the median over full searches only (not a block, a
    # VCF or a move said nothing of).
    lines[0]["outside"]["searched"] = [["search", 1000, 0, 900], None, ["vcf", 0, 0, 40]]
    lines[1]["outside"]["searched"] = [["search", 3000, 50, 900], ["block", 10, 0, 5],
                                       ["search", 5000, 0, 910]]
    rows = outside_report.rows(lines)
    assert rows[0].simulations == (1000, 3000, 5000) and rows[0].median_simulations == 3000
    assert rows[1].median_simulations is None
    assert [(r.opponent, r.games, r.black, r.white) for r in rows] == [
        ("rapfi:300", 4, (2, 0, 0), (0, 1, 1)), ("rapfi:1000", 2, (1, 0, 0), (0, 0, 1)),
        ("rapfi:3000", 1, (0, 0, 1), (0, 0, 0))]
    assert rows[0].score == pytest.approx(2.5 / 4)
    assert outside_report.rung(rows).opponent == "rapfi:1000"
    md = outside_report.table(lines, Path("docs/outside/games.jsonl"))
    low, high = wilson(0.625, 4)
    assert (f"| `rapfi:300` | 4 | 0.625 | 2-0-0 | 0-1-1 | {low:.2f} .. {high:.2f} | - "
            "| 3,000 |") in md
    assert "| 1× c timeout | - |" in md  # no account of any move in that ledger line
    assert "| `rapfi:1000` | 2 of 4 |" in md and "1× c timeout" in md
    assert "Rung: **`rapfi:1000`**" in md
    merged = outside_report.as_matches(lines)  # for the Elo fit: one line per match
    assert [(x["b"], x["wins"], x["draws"], x["losses"], x["games"]) for x in merged] == [
        ("rapfi:300", 2, 1, 1, 4), ("rapfi:1000", 1, 0, 1, 2), ("rapfi:3000", 0, 0, 1, 1),
        ("y", 1, 0, 1, 2)]
    assert outside_report.rung([r for r in rows if r.nodes == 3000]) is None


def test_schedule_pairs_each_opening_with_both_colours():
    plan = outside.schedule(7, 128, 6)
    assert [b for _, b in plan] == [True, False] * 3
    assert plan[0][0] == plan[1][0] and len({o for o, _ in plan}) == 3
    assert plan == outside.schedule(7, 128, 6) != outside.schedule(8, 128, 6)


# -- the command lines -----------------------------------------------------------------------

def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.mark.parametrize("argv, words", [
    (["--outside", "/no/such/rapfi"], "does not exist"),
    (["--nodes", "300,abc"], "'abc' is not an integer"),
    (["--nodes", "0"], "at least 1"),
    (["--nodes", "5,5"], "given twice"),
    (["--games", "3"], "even"),
    (["--turn-ms", "-1"], "--turn-ms"),
    ([], "nothing to play"),
    (["--candidate", "random"], "only our search"),
    (["--candidate", "mcts:default:4:plain"], "no :plain"),
    (["--candidate", "no-such-model"], "not found"),
])
def test_outside_cli_errors(tmp_path, capsys, argv, words):
    base = ["--outside", f"{sys.executable} {FAKE}", "--candidate", "default",
            "--ledger", str(tmp_path / "g.jsonl")]
    if "--candidate" in argv or argv == []:
        base = base[:2] + base[4:]
    assert outside_cli.main(base + argv) == 2
    assert words in one_line_error(capsys)


def test_outside_cli_without_engine(tmp_path, capsys):
    assert outside_cli.main(["--candidate", "default", "--ledger", str(tmp_path / "g.jsonl")]) == 2
    assert outside.ENV in one_line_error(capsys)
    assert outside_cli.main(["--table-only", "--ledger", str(tmp_path / "g.jsonl")]) == 2
    assert "not found" in one_line_error(capsys)


@pytest.mark.parametrize("argv, words", [
    (["--outside", "/no/such/rapfi"], "does not exist"),
    (["--outside-nodes", "1000,x"], "--outside-nodes"),
    (["--opening-plies", "2"], "--opening-plies 0"),
    (["--candidate", "policy:default"], "only our search"),
])
def test_ladder_outside_errors(tmp_path, capsys, monkeypatch, argv, words):
    monkeypatch.setenv(outside.ENV, f"{sys.executable} {FAKE}")
    base = ["--no-default-pool", "--openings", "balanced15", "--opening-plies", "0",
            "--ledger", str(tmp_path / "g.jsonl")]
    if "--candidate" not in argv:
        base += ["--candidate", "mcts:default:4"]
    if "--opening-plies" in argv:
        base = base[:2] + base[4:]
    assert ladder_cli.main(base + argv) == 2
    assert words in one_line_error(capsys)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_models import random_model

    return random_model(tmp_path_factory.mktemp("tiny") / "model")


def test_outside_cli_end_to_end(tmp_path, capsys, monkeypatch, tiny):
    """The command with a stand-in for pbrain-agz: outside.md with the table and
    the rung, and a rerun that plays nothing."""
    monkeypatch.setattr(outside, "pbrain_command", lambda: fake())
    ledger = tmp_path / "out" / "games.jsonl"
    argv = ["--candidate", str(tiny), "--outside", f"{sys.executable} {FAKE}", "--nodes",
            "100", "--games", "2", "--turn-ms", "500", "--ledger", str(ledger)]
    assert outside_cli.main(argv) == 0
    out = capsys.readouterr().out
    md = (ledger.parent / "outside.md").read_text()
    name = f"pbrain:{tiny}@500ms"
    assert f"## `{name}`" in md and "| `rapfi:100` | 2 |" in md and "Rung:" in md
    assert "2 games played" in out
    assert outside_cli.main(argv) == 0 and "0 games played" in capsys.readouterr().out
    assert [json.loads(x)["a"] for x in ledger.read_text().splitlines()] == [name, name]


def test_ladder_plays_the_outside_pool(tmp_path, capsys, monkeypatch, tiny):
    """``experiments.play.ladder --outside``: rapfi:N in the ledger, in the Elo table
    (its games as one match) and in outside.md."""
    monkeypatch.setattr(outside, "pbrain_command", lambda: fake())
    ledger = tmp_path / "games.jsonl"
    argv = ["--no-default-pool", "--candidate", f"mcts:{tiny}:2", "--outside",
            f"{sys.executable} {FAKE}", "--outside-nodes", "50", "--games", "2",
            "--openings", "balanced15", "--opening-plies", "0", "--ledger", str(ledger)]
    assert ladder_cli.main(argv) == 0
    name = f"mcts:{tiny}:2@1000ms"
    md = (tmp_path / "ladder.md").read_text()
    assert "2 games in 1 matches" in md and "`rapfi:50`" in md and f"`{name}`" in md
    assert "| `rapfi:50` | 2 |" in (tmp_path / "outside.md").read_text()
    assert ladder_cli.main(argv) == 0  # resumed: nothing left


def test_fake_engine_speaks_the_protocol():
    """The stand-in by hand: START, INFO (no reply), BEGIN, TURN, ABOUT."""
    proc = subprocess.run(fake(), input="START 15\nINFO rule 0\nBEGIN\nTURN 8,8\nABOUT\nEND\n",
                          capture_output=True, text=True, timeout=10)
    replies = [x for x in proc.stdout.splitlines() if not x.startswith("MESSAGE")]
    assert replies[0] == "OK" and replies[1] == "7,7" and "fake_piskvork" in replies[3]


def test_engine_args_reach_pbrain_and_name_the_candidate(tiny):
    spec = outside.candidate_spec(str(tiny))
    c = outside.candidate(spec, 1000, engine_args="--fpu 0.2  --c-puct 3")
    assert c.argv[-4:] == ["--fpu", "0.2", "--c-puct", "3"]
    assert c.name == f"pbrain:{tiny}[--fpu 0.2 --c-puct 3]@1000ms"
    assert outside.candidate(spec, 1000).name == f"pbrain:{tiny}@1000ms"
    # mcts:MODEL:SIMS is the model's own search: SIMS in one tree, its c_puct.
    mcts = outside.candidate(outside.candidate_spec(f"mcts:{tiny}:40:puct"), 1000)
    own = mcts.argv[mcts.argv.index("--c-puct") + 1]
    assert float(own) == models.load(str(tiny)).config.search.c_puct
    assert mcts.argv[mcts.argv.index("--threads") + 1] == "1"
    assert mcts.argv[mcts.argv.index("--sims") + 1] == "40"


def test_each_ledger_keeps_its_own_table(tmp_path):
    assert outside_report.table_path(tmp_path / "games.jsonl") == tmp_path / "outside.md"
    assert outside_report.table_path(tmp_path / "renju.jsonl") == tmp_path / "renju.md"
