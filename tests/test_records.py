"""Piskvork .psq game records: format, round trips, errors, match export."""

import os
import tempfile

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agz_jax.game.gomoku import Rules
from agz_jax.game.records import Record, RecordError, read_psq, save_match, to_states, write_psq
from agz_jax.match import arena


@st.composite
def _games(draw):
    size = draw(st.integers(5, 19))
    points = draw(st.permutations(range(size * size)))
    n = draw(st.integers(0, size * size))
    times = draw(st.lists(st.integers(-1, 10**7), min_size=n, max_size=n))
    return size, list(points[:n]), times


@settings(max_examples=60, deadline=None)
@given(_games(), st.integers(0, 3))
def test_write_read_round_trip(game, padding):
    size, moves, times = game
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "g.psq")
        write_psq(path, moves + [-1] * padding, size, times_ms=times, trailer=("-1", "x"))
        rec = read_psq(path)
    assert rec == Record(size, moves, times)


def test_exact_text(tmp_path):
    path = tmp_path / "g.psq"
    write_psq(path, [0, 1, 5, 24, -1, -1], 5, times_ms=[10, 20, 30, 40])
    assert path.read_bytes() == b"Piskvorky 5x5, 11:11, 0\n1,1,10\n2,1,20\n1,2,30\n5,5,40\n"
    write_psq(path, [7], 5, trailer=("-1", "pbrain-foo"))
    assert path.read_text() == "Piskvorky 5x5, 11:11, 0\n3,2,0\n-1\npbrain-foo\n"


def test_hand_written_file_with_trailer_and_crlf(tmp_path):
    path = tmp_path / "g.psq"
    path.write_bytes(
        b"Piskvorky 20x20, 11:11, 0\r\n"
        b"10,10,1500\r\n"
        b" 11 , 9 , 0 \r\n"
        b"1,20,-3\r\n"
        b"-1\r\n"
        b"pbrain-one.exe\r\n"
        b"5,5,0\r\n"  # after the trailer started: ignored
    )
    rec = read_psq(path)
    assert rec.size == 20
    assert rec.moves == [9 * 20 + 9, 8 * 20 + 10, 19 * 20 + 0]
    assert rec.times_ms == [1500, 0, -3]


def test_header_only_is_an_empty_game(tmp_path):
    path = tmp_path / "g.psq"
    path.write_text("Piskvorky 15x15, 11:11, 0\n")
    assert read_psq(path) == Record(15, [], [])


@pytest.mark.parametrize(
    "text, line, problem",
    [
        ("", 1, "header"),
        ("1,1,0\n", 1, "header"),
        ("Piskvork 15x15, 11:11, 0\n1,1,0\n", 1, "header"),
        ("Piskvorky 15, 11:11, 0\n", 1, "header"),
        ("Piskvorky 15x20, 11:11, 0\n", 1, "not square"),
        ("Piskvorky 7x7, 11:11, 0\n1,1,0\n8,1,0\n", 3, "outside"),
        ("Piskvorky 7x7, 11:11, 0\n1,1,0\n2,2,0\n1,0,0\n", 4, "outside"),
        ("Piskvorky 7x7, 11:11, 0\n1,1,0\n2,2,0\n3,3,0\n2,2,0\n", 5, "repeats"),
        # Starts like a move but is not one: an error, not the start of the trailer
        # (which would silently drop the moves after it).
        ("Piskvorky 15x15, 11:11, 0\n8,8,0\n9,9\n10,10,0\n11,11,0\n", 3, "looks like a move"),
        ("Piskvorky 15x15, 11:11, 0\n8,8,0\n9,9,x\n10,10,0\n", 3, "looks like a move"),
        ("Piskvorky 15x15, 11:11, 0\n8,8,0\n3,3,1e5\n10,10,0\n", 3, "looks like a move"),
        ("Piskvorky 15x15, 11:11, 0\n8,8,0\n9,9,0,0\n", 3, "looks like a move"),
        ("Piskvorky 15x15, 11:11, 0\n8,8,0\n-1,2,0\n", 3, "looks like a move"),
        ("Piskvorky 15x15, 11:11, 0\n8,8,0\n9 , 9, 1.5\n", 3, "'9,9,0', or delete it"),
    ],
)
def test_errors_name_file_and_line(tmp_path, text, line, problem):
    path = tmp_path / "bad.psq"
    path.write_text(text)
    with pytest.raises(RecordError, match=problem) as err:
        read_psq(path)
    assert f"{path}:{line}:" in str(err.value)
    assert isinstance(err.value, ValueError)


def test_write_rejects_bad_input(tmp_path):
    path = tmp_path / "g.psq"
    with pytest.raises(ValueError, match="off"):
        write_psq(path, [25], 5)
    with pytest.raises(ValueError, match="repeats"):
        write_psq(path, [3, 3], 5)
    with pytest.raises(ValueError, match="move"):
        write_psq(path, [3], 5, trailer=("1,2,3",))
    with pytest.raises(ValueError, match="move"):  # the reader would refuse it
        write_psq(path, [3], 5, trailer=("1,2",))
    with pytest.raises(ValueError, match="times_ms"):
        write_psq(path, [3, 4], 5, times_ms=[1, 2, 3])


def test_to_states_replays_a_win():
    # Black fills row 0 from column 0, white plays row 1.
    moves = [0, 5, 1, 6, 2, 7, 3, 8, 4]
    state = to_states(Record(5, moves, [0] * len(moves)))
    assert bool(state.done) and int(state.winner) == 0 and int(state.num_moves) == 9
    with pytest.raises(RecordError, match="move 10 .*follows the end"):
        to_states(Record(5, moves + [20], [0] * 10))
    with pytest.raises(RecordError, match="move 3 .*occupied"):
        to_states(Record(5, [0, 5, 5], [0] * 3))
    with pytest.raises(RecordError, match="off the board"):
        to_states(Record(5, [0, 25], [0] * 2))
    state = to_states(Record(6, [0, 35], [0, 0]), rule="standard")
    assert not bool(state.done) and int(state.num_moves) == 2


def test_save_match_of_random_players(tmp_path):
    rules = Rules(7)
    player = arena.random_player(rules)
    result = arena.play_match(rules, player, player, jax.random.key(0), 4)
    paths = save_match(tmp_path / "match", result, 7, names=("alpha", "beta"))
    assert [os.path.basename(p) for p in paths] == [f"game_{i:04d}.psq" for i in range(4)]
    winner, length = np.asarray(result.winner), np.asarray(result.length)
    for i, path in enumerate(paths):
        rec = read_psq(path)
        assert rec.size == 7 and len(rec.moves) == length[i]
        assert rec.moves == [int(m) for m in np.asarray(result.moves)[:, i] if m >= 0]
        state = to_states(rec)
        assert bool(state.done)
        assert int(state.winner) == winner[i]
        text = open(path).read().splitlines()
        black, white = ("alpha", "beta") if result.a_black[i] else ("beta", "alpha")
        assert text[-2:] == [f"black: {black}", f"white: {white}"]
