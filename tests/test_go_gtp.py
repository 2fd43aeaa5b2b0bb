"""``gtp-agz`` (``agz_jax.go.gtp_engine``): the GTP 2 protocol command by
command, illegal moves refused, fuzzing (every line gets a well-formed ``=`` or
``?`` answer and the engine keeps its state), and the program over a pipe.

The protocol tests drive ``Engine`` with a stand-in move chooser (the first
empty point), so they compile only the rules' step; the net's moves are tested
end to end in test_go_e2e.py."""

from __future__ import annotations

import re
import subprocess
import sys

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agz_jax.go import gtp_engine
from agz_jax.go import net as net_lib
from agz_jax.go.gtp_engine import COMMANDS, Engine
from agz_jax.go.rules import vertex


def first_empty(state):
    empty = np.flatnonzero(np.asarray(state.board) == 0)
    return int(empty[0]) if len(empty) else -1


def new_engine() -> Engine:
    e = Engine(choose=first_empty, pass_when_ahead=False)
    assert e.handle("boardsize 5") == "=\n\n"
    return e


def ask(engine: Engine, line: str) -> str:
    response = engine.handle(line)
    assert response is not None and response.endswith("\n\n"), repr(response)
    return response[:-2]


def test_protocol_session():
    e = new_engine()
    assert ask(e, "protocol_version") == "= 2"
    assert ask(e, "12 name") == "=12 agz_jax"
    assert ask(e, "version").startswith("= 0.")
    assert ask(e, "known_command genmove") == "= true"
    assert ask(e, "known_command fly") == "= false"
    assert ask(e, "list_commands").split("\n")[0] == "= protocol_version"
    assert set(ask(e, "list_commands")[2:].split("\n")) == set(COMMANDS)
    assert set(COMMANDS) >= {"protocol_version", "name", "version", "boardsize", "komi",
                             "clear_board", "play", "genmove", "undo", "final_score",
                             "showboard", "list_commands", "quit"}
    assert ask(e, "komi 0.5") == "="
    assert ask(e, "play b C3") == "="
    assert ask(e, "play white C3") == "? illegal move"
    assert ask(e, "3 genmove w") == "=3 A5"  # the first empty point, top left
    assert ask(e, "play B b4") == "="
    board = ask(e, "showboard")
    assert board.split("\n")[1:7] == ["   A B C D E", " 5 O . . . .", " 4 . X . . .",
                                      " 3 . . X . .", " 2 . . . . .", " 1 . . . . ."]
    assert board.endswith("white to move, move 3")
    assert ask(e, "final_score") == "= B+0.5"  # areas 2 - 1 (the rest is neutral) - komi
    assert ask(e, "undo") == "=" and ask(e, "undo") == "=" and ask(e, "undo") == "="
    assert ask(e, "undo") == "? cannot undo"
    assert ask(e, "final_score") == "= W+0.5"
    assert ask(e, "play b pass") == "=" and ask(e, "play w PASS") == "="
    assert ask(e, "play b A1") == "="  # GTP plays on after two passes
    assert ask(e, "clear_board") == "=" and "move 0" in ask(e, "showboard")
    assert ask(e, "boardsize 7") == "=" and e.size == 7 and e.moves == []
    assert ask(e, "4 quit") == "=4" and e.done


@pytest.mark.parametrize("line, answer", [
    ("fly", "? unknown command"), ("7 fly away", "?7 unknown command"),
    ("boardsize", "? syntax error"), ("boardsize nine", "? syntax error"),
    ("boardsize 25", "? unacceptable size"), ("boardsize 1", "? unacceptable size"),
    ("komi", "? syntax error"), ("komi seven", "? syntax error"), ("komi nan", "? syntax error"),
    ("komi inf", "? syntax error"), ("play", "? syntax error"), ("play b", "? syntax error"),
    ("play purple C3", "? syntax error"), ("play b Z3", "? syntax error"),
    ("play b C9", "? syntax error"), ("play b I3", "? syntax error"),
    ("play b C3 C4", "? syntax error"), ("genmove", "? syntax error"),
    ("genmove x", "? syntax error"), ("name extra", "? syntax error"),
    ("known_command", "? syntax error"), ("42", "?42 missing command"),
])
def test_malformed_commands_get_errors(line, answer):
    e = new_engine()
    assert ask(e, line) == answer
    assert ask(e, "play b C3") == "="  # and it goes on


def test_preprocessing():
    e = new_engine()
    for nothing in ("", "   ", "# a comment", "\t\t", "\x01\x02"):
        assert e.handle(nothing) is None
    assert ask(e, "\tname # trailing comment") == "= agz_jax"
    assert ask(e, "na\x00me") == "= agz_jax"  # control characters are removed


def test_illegal_play_is_refused_and_changes_nothing():
    e = new_engine()
    assert ask(e, "play b C3") == "="
    before = ask(e, "showboard")
    assert ask(e, "play w C3") == "? illegal move"  # occupied
    assert ask(e, "showboard") == before
    e2 = new_engine()
    assert ask(e2, "play b A2") == "=" and ask(e2, "play b B1") == "="
    assert ask(e2, "play w A1") == "? illegal move"  # suicide
    assert ask(e2, "play b A1") == "="  # one's own last liberty, not suicide
    # a simple ko: black takes at C2, white may not take back at B2 at once
    e3 = new_engine()
    for move in ("b B3", "b A2", "b B1", "w C3", "w B2", "w D2", "w C1", "b C2"):
        assert ask(e3, "play " + move) == "="
    assert ask(e3, "play w B2") == "? illegal move"
    assert ask(e3, "play w E5") == "=" and ask(e3, "play b E4") == "="
    assert ask(e3, "play w B2") == "="  # after a ko threat and its answer it is legal


def test_genmove_passes_when_nothing_is_left():
    e = Engine(choose=lambda state: -1)
    assert ask(e, "boardsize 5") == "=" and ask(e, "genmove b") == "= pass"


def test_pass_when_ahead():
    e = Engine(choose=first_empty, pass_when_ahead=True)
    assert ask(e, "boardsize 5") == "=" and ask(e, "komi 0.5") == "="
    assert ask(e, "play b C3") == "=" and ask(e, "play w pass") == "="
    assert ask(e, "genmove b") == "= pass"  # black owns the board: 25 - 0.5
    assert ask(e, "genmove w") == "= A5"  # white is behind: it plays on


def test_a_net_engine_plays_its_size_only(capsys):
    config = net_lib.NetConfig(size=9, channels=28, layers=1, filters=2)
    e = Engine(config, params={}, ranks=0)
    assert ask(e, "boardsize 19") == "? unacceptable size"
    assert capsys.readouterr().err == ("gtp-agz: boardsize 19 refused: this net plays 9x9 only "
                                       "(a 19x19 net: --model DIR)\n")
    assert ask(e, "boardsize 9") == "="
    assert "1 layers, 2 filters, 9x9" in ask(e, "version")


def test_boardsize_switches_to_the_net_of_that_size(capsys):
    """An engine given ``net_for_size`` (gtp-agz without --model: the shipped
    net of each size) takes that net on ``boardsize``, plays on that board, and
    still refuses a size it has no net for."""
    import jax
    import jax.numpy as jnp

    nets = {}
    for size, layers in ((9, 1), (5, 2)):
        config = net_lib.NetConfig(size=size, channels=28, layers=layers, filters=2)
        nets[size] = (config, jax.tree.map(jnp.zeros_like, net_lib.init(config, 0)), 0, False)
    e = Engine(*nets[9][:3], ladder_plane=False, net_for_size=nets.get)
    assert "1 layers, 2 filters, 9x9" in ask(e, "version")
    assert ask(e, "boardsize 5") == "="
    assert "2 layers, 2 filters, 5x5" in ask(e, "version")
    move = ask(e, "genmove b")
    assert re.fullmatch(r"= [A-E][1-5]", move), move
    assert ask(e, "boardsize 7") == "? unacceptable size"
    assert capsys.readouterr().err == ("gtp-agz: boardsize 7 refused: this net plays 5x5 only, "
                                       "no 7x7 net is shipped (a 7x7 net: --model DIR)\n")
    assert ask(e, "boardsize 9") == "=" and "9x9" in ask(e, "version")


RESPONSE = re.compile(r"^[=?][0-9]*( [^\n]*)?(\n[^\n]+)*\n\n$", re.DOTALL)
words = st.sampled_from(list(COMMANDS) + ["b", "w", "black", "white", "C3", "pass", "A1",
                                          "E5", "Z9", "-1", "5", "19", "0", "7.5", "#", "\t",
                                          "resign", "I3", "c3", "\x00", "é", "99999999999"])
lines = st.one_of(
    st.text(max_size=40),
    st.lists(words, min_size=1, max_size=5).map(" ".join),
    st.tuples(st.integers(0, 999), st.lists(words, max_size=4)).map(
        lambda t: " ".join([str(t[0]), *t[1]])),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lines, min_size=1, max_size=12))
def test_fuzz(batch):
    """Any line: no exception, None (nothing to answer) or one GTP response;
    the board stays consistent with the moves the engine accepted. (A 5x5 net's
    engine: other board sizes are refused, so nothing else compiles.)"""
    e = Engine(net_lib.NetConfig(size=5, channels=28, layers=1, filters=2), params={},
               choose=first_empty, pass_when_ahead=False)
    assert e.handle("boardsize 5") == "=\n\n"
    for line in batch:
        if e.done:
            break
        response = e.handle(line)
        if response is not None:
            assert RESPONSE.match(response), repr((line, response))
    # the moves it accepted, played again through GTP, give the same board
    again = new_engine()
    for colour, action in e.moves:
        assert ask(again, f"play {'bw'[colour]} {vertex(5, action)}") == "="
    assert ask(again, "showboard") == ask(e, "showboard")


def zero_model(path, size: int = 5):
    """A model directory of a tiny net with zero parameters (no compilation)."""
    config = net_lib.NetConfig(size=size, channels=28, layers=1, filters=2)
    shapes = jax.eval_shape(net_lib.GoNet(config).init, jax.random.key(0, impl="rbg"))
    return net_lib.save(path, config, jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes))


def test_the_program_over_a_pipe(tmp_path):
    model = zero_model(tmp_path / "m")
    script = "protocol_version\nname\n\x01junk junk\nboardsize 9\nboardsize 5\nlist_commands\n" \
             "9 quit\nname\n"
    run = subprocess.run([sys.executable, "-m", "agz_jax.go.gtp_engine", "--model", str(model)],
                         input=script, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    answers = run.stdout.split("\n\n")
    assert answers[:5] == ["= 2", "= agz_jax", "? unknown command", "? unacceptable size", "="]
    assert answers[5].split("\n") == ["= protocol_version", *COMMANDS[1:]]
    assert answers[6:] == ["=9", ""]  # nothing after quit
    assert run.stderr == "gtp-agz: boardsize 9 refused: this net plays 5x5 only (a 9x9 net: " \
                         "--model DIR)\n"  # the one line that says why


def test_bad_model_directory(tmp_path, capsys):
    assert gtp_engine.main(["--model", str(tmp_path / "none")]) == 2
    assert "none: not a Go model directory (net.json is missing)" in capsys.readouterr().err
    model = zero_model(tmp_path / "m")
    (model / "params.msgpack").write_bytes(b"garbage")
    assert gtp_engine.main(["--model", str(model)]) == 2
    assert "a damaged Go model" in capsys.readouterr().err


@pytest.mark.parametrize("guard", [False, True])
def test_the_ladder_guard_keeps_a_blind_net_out_of_a_working_ladder(guard):
    """A net that reads no ladder plane, with uniform logits (so the first of
    its points in board order is its move): of white's extension at E4, into a
    ladder that works, and A1, the guard plays A1; without the guard E4 (the
    earlier point). With E4 alone left, the guard plays it all the same."""
    import jax.numpy as jnp
    from test_go_ladder import SHAPE, diagram

    from agz_jax.go.board import label_chains
    from agz_jax.go.rules import WHITE, from_text, point

    rules = gtp_engine.engine_rules(9)
    state = from_text(rules, diagram(9, {**SHAPE, "F5": "X"}), WHITE)
    config = net_lib.NetConfig(size=9, channels=28, layers=1, filters=2)
    params = jax.tree.map(jnp.zeros_like, net_lib.init(config, 0))
    choose = gtp_engine._policy_fn(rules, config, guard)
    board = jnp.asarray(state.board)
    e4, a1 = point(9, "E4"), point(9, "A1")
    assert e4 < a1

    def move(*points):
        legal = jnp.zeros(81, bool).at[jnp.asarray(points)].set(True)
        return int(choose(params, jnp.zeros((9, 9, 28)), legal, board, label_chains(9, board),
                          jnp.int32(WHITE), jnp.int32(-1))[0])

    assert move(e4, a1) == (a1 if guard else e4)
    assert move(e4) == e4
