"""The opening sets shipped in agz_jax/data/: each one loads, every opening is a
legal, unfinished game by the plain-Python referee, no two are the same position
under the board's symmetries, and the file says how it was made."""

import re

import numpy as np
import pytest
import reference

from agz_jax.game import openings, symmetry


def shipped():
    names = openings.available()
    assert names, "no opening set is shipped"
    return names


@pytest.mark.parametrize("name", shipped())
def test_a_shipped_set_is_legal_distinct_and_documented(name):
    size = int(re.search(r"(\d+)", name).group(1))  # the board size is in the name
    text = openings.resolve(name).read_text()
    assert "Made by: python -m experiments.play.openings" in text, "the file records its command"
    moves = openings.load(name, size)
    assert len(moves) >= 16 and moves.shape[1] >= 1
    for row in moves.tolist():
        game = reference.play_all(size, "freestyle", row)
        assert not game.illegal and not game.done, f"{row}: illegal, or the game is over"
        assert game.to_play == len(row) % 2
    # Distinct positions: the stones of each colour, compared under all 8 symmetries.
    maps = symmetry.permutations(size)
    seen = set()
    for row in moves:
        board = np.zeros(size * size, np.int8)
        board[row[0::2]], board[row[1::2]] = 1, -1
        key = min(tuple(board[m]) for m in maps)
        assert key not in seen, f"{row.tolist()} repeats another opening of {name}"
        seen.add(key)
