"""SGF records (``agz_jax.go.sgf``): read and write round trips (hand-made and
hypothesis-generated records), the fields of a GnuGo-style record, malformed
files (the error names the file and the property) and records that break the
rules (the move and the reason are named)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agz_jax.go import sgf
from agz_jax.go.rules import BLACK, WHITE, point

GNUGO_STYLE = b"""(;GM[1]FF[4]SZ[9]KM[7.5]HA[2]RU[Chinese]PB[GNU Go 3.8]PW[Someone]
BR[3d]WR[12k]RE[W+12.5]AB[cg][gc]
;W[ee];B[dd]C[a comment];W[];B[tt];W[ab])"""


def test_fields_of_a_record(tmp_path):
    path = tmp_path / "game.sgf"
    path.write_bytes(GNUGO_STYLE)
    r = sgf.read(path)
    assert (r.size, r.komi, r.handicap, r.rules) == (9, 7.5, 2, "Chinese")
    assert (r.black, r.white, r.black_rank, r.white_rank) == ("GNU Go 3.8", "Someone", "3d", "12k")
    assert r.result == "W+12.5" and r.winner() == WHITE
    assert r.black_setup == tuple(sorted((point(9, "C3"), point(9, "G7"))))
    assert r.white_setup == ()
    pass_ = 81
    assert r.moves == ((WHITE, point(9, "E5")), (BLACK, point(9, "D6")), (WHITE, pass_),
                       (BLACK, pass_), (WHITE, point(9, "A8")))
    assert r.rank(BLACK) == 2 and r.rank(WHITE) == -1
    assert r.source == str(path)


def test_results_and_ranks():
    assert sgf.Record(9, result="B+R").winner() == BLACK
    assert sgf.Record(9, result="0").winner() == -1
    assert sgf.Record(9, result="Void").winner() is None
    assert sgf.Record(9, black_rank="9d").rank(BLACK) == 8
    assert sgf.Record(9, black_rank="1p").rank(BLACK) == -1


def test_hand_made_round_trip(tmp_path):
    r = sgf.Record(size=13, komi=-3.5, handicap=3, black_setup=(0, 14, 168),
                   white_setup=(100,), moves=((WHITE, 50), (BLACK, 169), (WHITE, 0 + 1)),
                   result="B+0.5", black="Black [x] \\ y", white="Wé", black_rank="2d",
                   white_rank="1k", rules="Japanese")
    back = sgf.read(sgf.write(r, tmp_path / "r.sgf"))
    assert back == r
    assert sgf.parse(sgf.dumps(back)) == r


text = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, blacklist_characters="\x7f"),
               max_size=12).map(str.strip)


@st.composite
def records(draw):
    size = draw(st.integers(2, 19))
    a = size * size
    points = draw(st.permutations(range(a)))
    n_setup = draw(st.integers(0, min(4, a)))
    black = tuple(points[:n_setup // 2])
    white = tuple(points[n_setup // 2:n_setup])
    moves = tuple(draw(st.lists(st.tuples(st.sampled_from((BLACK, WHITE)),
                                          st.integers(0, a)), max_size=30)))
    return sgf.Record(size=size, komi=draw(st.integers(-20, 20)) / 2,
                      handicap=draw(st.sampled_from((0, 2, 3))), black_setup=black,
                      white_setup=white, moves=moves,
                      result=draw(st.sampled_from(("", "B+R", "W+3.5", "0", "?"))),
                      black=draw(text), white=draw(text),
                      black_rank=draw(st.sampled_from(("", "5d", "30k"))),
                      rules=draw(st.sampled_from(("", "Chinese"))))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_round_trip(record):
    """write then read gives the record back; read then write gives the bytes back."""
    data = sgf.dumps(record)
    back = sgf.parse(data, "x.sgf")
    assert back == record
    assert sgf.dumps(back) == data


@pytest.mark.parametrize("data, prop", [
    (b"(;FF[4]SZ[9]KM[abc];B[ee])", "KM"),
    (b"(;FF[4]SZ[9]KM[0.3];B[ee])", "KM"),
    (b"(;FF[4]SZ[9]HA[two])", "HA"),
    (b"(;FF[4]SZ[9];B[ee];W[zz])", "W"),
    (b"(;FF[4]SZ[9];B[jj])", "B"),
    (b"(;FF[4]SZ[9]AB[ee][zz])", "AB"),
    (b"(;FF[4]SZ[9]AB[ee]AW[ee])", "AB/AW"),
    (b"(;FF[4]SZ[9];B[ee];AB[dd])", "AB"),
    (b"(;FF[4]SZ[99];B[ee])", "SZ"),
    (b"(;FF[4]SZ[1])", "SZ"),
    (b"(;FF[4]SZ[9];B[ee]", "syntax"),
    (b"not sgf at all", "syntax"),
])
def test_malformed_records_name_the_file_and_property(tmp_path, data, prop):
    path = tmp_path / "broken.sgf"
    path.write_bytes(data)
    with pytest.raises(sgf.SgfError) as e:
        sgf.read(path)
    assert str(e.value).startswith(f"{path}: {prop}:"), str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(sgf.SgfError, match="nothing.sgf: cannot be read"):
        sgf.read(tmp_path / "nothing.sgf")


def test_rules_violations_name_the_move_and_why():
    """Replayed with go.rules (positional superko): occupied, suicide, ko."""
    p = lambda v: point(5, v)
    ko = dict(black_setup=(p("B3"), p("A2"), p("B1")),
              white_setup=(p("C3"), p("B2"), p("D2"), p("C1")))
    cases = [
        ("the point is occupied", {}, ((BLACK, p("C3")), (WHITE, p("C3")))),
        ("it is suicide", {}, ((BLACK, p("A2")), (WHITE, p("C3")), (BLACK, p("B1")),
                               (WHITE, p("A1")))),
        # black takes the ko at C2, white takes back at once
        ("it retakes a ko", ko, ((BLACK, p("C2")), (WHITE, p("B2")))),
    ]
    for reason, setup, moves in cases:
        record = sgf.Record(5, moves=moves, source="game.sgf", **setup)
        with pytest.raises(sgf.RulesViolation) as e:
            sgf.check_rules(record)
        last = moves[-1]
        assert str(e.value).startswith(f"game.sgf: move {len(moves)} ("
                                       f"{'BW'[last[0]]} "), str(e.value)
        assert str(e.value).endswith(reason), str(e.value)
    # legal games replay, out-of-turn moves (handicap placement) included
    final = sgf.check_rules(sgf.Record(5, moves=((BLACK, p("C3")), (BLACK, p("B2")),
                                                 (WHITE, p("D4")), (WHITE, 25))))
    assert int(final.num_moves) == 4 and int(final.board[p("B2")]) == 1


@pytest.mark.long
def test_import_prints_no_warning_when_sgfmill_is_compiled_afresh(tmp_path):
    """sgfmill 1.1.1 has an invalid escape in a docstring: compiling it warns
    (3.11: DeprecationWarning, 3.12: SyntaxWarning). An empty bytecode cache
    makes Python compile it again, with every warning shown."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"))
    run = subprocess.run([sys.executable, "-W", "default", "-c", "import agz_jax.go.sgf"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
