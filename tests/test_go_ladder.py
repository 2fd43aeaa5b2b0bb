"""The ladder reader (``agz_jax.go.ladder``) through the "ladder" feature plane,
on ladders that work, ladders broken by a ladder breaker, by a chasing stone in
atari, and long ladders across a 19x19 board. The expected answers were
checked with GnuGo 3.8's ``ladder_attack`` (tests/test_go_referee.py repeats
that check where gnugo is installed)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from test_go_features import NINE, NINETEEN, marked, planes

from agz_jax.go import ladder
from agz_jax.go.rules import BLACK, WHITE, from_text, point, stone


def diagram(size: int, stones: dict[str, str]) -> str:
    """A diagram with ``stones`` ({vertex: "X" or "O"}) on an empty board."""
    cells = [["."] * size for _ in range(size)]
    for v, c in stones.items():
        r, col = divmod(point(size, v), size)
        cells[r][col] = c
    return "\n".join(" ".join(row) for row in cells)


# White E5 has two liberties (F5, E4); black's atari on either starts a ladder:
# E4 drives it up and right (towards J9), F5 down and left (towards A1).
SHAPE = {"E6": "X", "D5": "X", "F4": "X", "E5": "O"}


def ladders(rules, *positions, to_play=BLACK) -> list[set[str]]:
    states = [from_text(rules, diagram(rules.size, p), to_play) for p in positions]
    return [marked(x, "ladder", rules.size) for x in planes(rules, *states)]


def test_ladders_that_work_and_ladders_a_breaker_stops():
    clear, up_right_broken, down_left_broken, both, maker = ladders(
        NINE, SHAPE, {**SHAPE, "H8": "O"}, {**SHAPE, "B2": "O"},
        {**SHAPE, "H8": "O", "B2": "O"}, {**SHAPE, "H8": "O", "G8": "X"})
    assert clear == {"E4", "F5"}
    assert up_right_broken == {"F5"}  # white H8 is on the ladder's path
    assert down_left_broken == {"E4"}
    assert both == set()
    assert maker == {"E4", "F5"}  # a black stone next to the breaker captures it first


def test_a_chasing_stone_in_atari_breaks_the_ladder():
    """Black D5 has one liberty (D6): at any point of the ladder white can take it
    and escape, so neither atari is a ladder capture."""
    (broken,) = ladders(NINE, {**SHAPE, "C5": "O", "D4": "O"})
    assert broken == set()


def test_the_plane_is_for_the_side_to_move_only():
    (white,) = ladders(NINE, SHAPE, to_play=WHITE)
    assert white == set()  # white has no black chain with two liberties to ladder
    swapped = {v: "O" if c == "X" else "X" for v, c in SHAPE.items()}
    (black_prey,) = ladders(NINE, swapped, to_play=WHITE)
    assert black_prey == {"E4", "F5"}


def test_a_prey_next_to_friends_is_no_ladder():
    (x,) = ladders(NINE, {**SHAPE, "E3": "O", "G5": "O"})  # F5 and E4 both connect out
    assert x == set()


def test_long_ladders_on_nineteen_by_nineteen():
    """From the lower-left, black D3 runs a ladder diagonally across the whole
    board to the top-right corner; white R17 on its path breaks it, and a
    black stone beside the breaker mends it."""
    shape = {"D5": "X", "C4": "X", "E3": "X", "D4": "O"}
    clear, broken = ladders(NINETEEN, shape, {**shape, "R17": "O"})
    assert clear == {"D3", "E4"}  # E4 runs the short way, to the lower-left corner
    assert broken == {"E4"}


def test_a_cut_off_reading_claims_no_ladder():
    """The long ladder needs many nodes: with too few steps the reader gives up and
    says no (never a ladder without a proof); the default budget proves it."""
    state = from_text(NINETEEN, diagram(19, {"D5": "X", "C4": "X", "E3": "X", "D4": "O"}))
    read = jax.jit(functools.partial(ladder.read, 19))
    args = (state.board, state.chain, stone(BLACK), point(19, "D3"), point(19, "D4"))
    assert bool(read(*args, steps=jnp.int32(ladder.default_steps(19))))
    assert not bool(read(*args, steps=jnp.int32(20)))


def test_an_extension_that_runs_a_working_ladder_is_doomed():
    """``doomed_extensions``: after black's atari at F5, white's extension at E4
    runs a ladder down and left that works (marked); with a white breaker at
    B2 the same extension escapes (not marked); a point that is no extension
    of a chain in atari is never marked."""
    from agz_jax.go.board import label_chains

    @jax.jit
    def extensions(board):  # one program, not op by op
        return ladder.doomed_extensions(9, board, label_chains(9, board), stone(WHITE))

    def doomed(stones):
        state = from_text(NINE, diagram(9, stones), WHITE)
        marked = extensions(jnp.asarray(state.board))
        return {v for v in ("E4", "D4", "C3", "A1") if bool(marked[point(9, v)])}

    atari = {**SHAPE, "F5": "X"}
    assert doomed(atari) == {"E4"}
    assert doomed({**atari, "B2": "O"}) == set()
    assert doomed(SHAPE) == set()  # two liberties: nothing to extend
