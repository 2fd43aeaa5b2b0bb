"""experiments.play.tactics: the mentor's tactics a player carried out or missed,
counted on hand-made 9x9 games."""

import json

from agz_jax.game import records
from experiments.play import tactics

SIZE = 9


def at(row, col):
    return row * SIZE + col


def four_on_row_0(white_reply):
    """Black fills row 0 from the edge: (0,0)..(0,3) is a four whose only five
    point is (0,4); white's 4th move is ``white_reply``."""
    black = [at(0, 0), at(0, 1), at(0, 2), at(0, 3)]
    white = [at(4, 4), at(6, 6), at(8, 2), white_reply]
    moves = [m for pair in zip(black, white, strict=True) for m in pair]
    if white_reply != at(0, 4):
        moves.append(at(0, 4))  # black's five
    return moves


def write_games(directory, games):
    directory.mkdir()
    for i, (moves, black, white) in enumerate(games):
        records.write_psq(directory / f"game_{i:04d}.psq", moves, SIZE,
                          trailer=(f"black: {black}", f"white: {white}"))


def test_counts_a_missed_and_a_made_block(tmp_path, capsys):
    games = tmp_path / "games"
    write_games(games, [(four_on_row_0(at(8, 8)), "mentor:0", "student"),
                        (four_on_row_0(at(0, 4)), "mentor:0", "student")])
    report = tactics.count(games, "student", skip=2)
    assert report["games"] == 2 and report["as_black"] == 0
    assert report["moves"] == 6  # white's plies 3, 5, 7 in each game
    assert report["tactics"]["block a four"] == {"seen": 2, "missed": 1}
    assert report["lost"] == 1  # the missed block: black's five ends the game
    assert sum(r["seen"] for r in report["tactics"].values()) == 2
    # Black, by default the player (the first game's black): it completed its five.
    black = tactics.count(games, None, skip=0)
    assert black["player"] == "mentor:0" and black["as_black"] == 2
    assert black["tactics"]["complete a five"] == {"seen": 1, "missed": 0}
    assert tactics.main([str(games), "--player", "student", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == report


def test_counts_a_four_three_left_to_the_opponent(tmp_path):
    """Black's row 4 is a three closed by white at (4, 0); with (2, 4) and (3, 4),
    black's (4, 4) would be a four-three. White's last move leaves it, or takes it."""
    black = [at(2, 4), at(4, 1), at(4, 2), at(3, 4), at(4, 3)]

    def game(last):
        white = [at(4, 0), at(8, 8), at(8, 6), at(0, 8), last]
        return [m for pair in zip(black, white, strict=True) for m in pair]

    games = tmp_path / "games"
    write_games(games, [(game(at(8, 0)), "mentor:0", "student"),
                        (game(at(4, 4)), "mentor:0", "student"),
                        (game(at(8, 0)), "mentor:0", "student")])
    report = tactics.count(games, "student", skip=0)
    left = report["left_four_three"]
    assert (left["moves"], left["games"], left["lost_games"], report["lost"]) == (2, 2, 0, 0)
    assert sum(left["when_the_tactic_was"].values()) == 2
    assert "double four or four-three: 2 (in 2 games, 0 of them lost" in tactics.text(report)
    # Black plays the four-three, white blocks the four, black makes the open
    # four and then five: the game is lost.
    black_wins = game(at(8, 0)) + [at(4, 4), at(4, 5), at(5, 4), at(1, 4), at(6, 4)]
    write_games(tmp_path / "lost", [(black_wins, "mentor:0", "student")])
    lost = tactics.count(tmp_path / "lost", "student", skip=0)
    assert lost["lost"] == 1 and lost["left_four_three"]["lost_games"] == 1


def test_bad_input_is_named(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert tactics.main([str(empty)]) == 2
    assert "no .psq games" in capsys.readouterr().err
    games = tmp_path / "games"
    write_games(games, [(four_on_row_0(at(8, 8)), "a", "b")])
    assert tactics.main([str(games), "--player", "nobody"]) == 2
    assert "no game names 'nobody'" in capsys.readouterr().err
    assert tactics.main([str(games), "--skip", "-1"]) == 2
    assert "--skip" in capsys.readouterr().err


def test_a_winning_move_leaves_the_opponent_nothing(tmp_path):
    """Black's (4, 3) would be a four-three (row 4 from the edge and column 3).
    White's five on row 8 runs from the edge to black's (8, 5), so no point
    extends it: after it the mentor's most urgent tactic for black is that
    four-three, but the five ended the game and left black nothing."""
    black = [at(2, 3), at(4, 0), at(4, 1), at(3, 3), at(8, 5), at(4, 2)]
    white = [at(8, 0), at(8, 1), at(0, 8), at(8, 2), at(8, 3), at(8, 4)]
    moves = [m for pair in zip(black, white, strict=True) for m in pair]
    write_games(tmp_path / "games", [(moves, "mentor:0", "student")])
    report = tactics.count(tmp_path / "games", "student", skip=0)
    assert report["tactics"]["complete a five"] == {"seen": 1, "missed": 0}
    assert report["left_four_three"]["moves"] == 0
    assert report["lost"] == 0
    # Black's count: its (4, 2) let white's five be completed, not a four-three.
    assert tactics.count(tmp_path / "games", "mentor:0", skip=0)["lost"] == 1


def test_counts_a_double_three_left_to_the_opponent(tmp_path):
    """Black's (4, 2), (4, 3) and (2, 4), (3, 4) meet at (4, 4), which would make
    two open threes. White's last move leaves that point, or takes it."""
    black = [at(4, 2), at(2, 4), at(4, 3), at(3, 4)]

    def game(last):
        white = [at(8, 0), at(0, 8), at(8, 6), last]
        return [m for pair in zip(black, white, strict=True) for m in pair]

    write_games(tmp_path / "games", [(game(at(8, 8)), "mentor:0", "student"),
                                     (game(at(4, 4)), "mentor:0", "student")])
    report = tactics.count(tmp_path / "games", "student", skip=0)
    three = report["left_double_three"]
    assert (three["moves"], three["games"], three["lost_games"]) == (1, 1, 0)
    assert report["left_four_three"]["moves"] == 0
    assert "nothing urgent but a double three to make: 1 (in 1 games, 0 of them lost)" in \
        tactics.text(report)
    # Black plays it; white stops the row; black makes the open four on the
    # column, white blocks one end, black completes five at the other.
    lost = game(at(8, 8)) + [at(4, 4), at(4, 5), at(5, 4), at(1, 4), at(6, 4)]
    write_games(tmp_path / "lost", [(lost, "mentor:0", "student")])
    report = tactics.count(tmp_path / "lost", "student", skip=0)
    assert report["lost"] == 1 and report["left_double_three"]["lost_games"] == 1
    assert report["left_double_three"]["moves"] == 1
