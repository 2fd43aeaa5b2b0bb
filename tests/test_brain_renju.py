"""pbrain-agz under renju (``INFO rule 4``), end to end over the protocol with
a random renju model: black's forbidden points are refused from the manager
and never played by the engine; a model of another rule is refused."""

from __future__ import annotations

import numpy as np
import pytest
from test_brain import SIZE, Brain, board_cmd, parse_move
from tiny_models import compile_lock, random_model, renju_fouls, xla_cache_dir

from agz_jax.game import renju
from agz_jax.game.gomoku import Rules
from agz_jax.play.engine import winning_line


@pytest.fixture(scope="module")
def renju_brain(tmp_path_factory):
    cache = xla_cache_dir(tmp_path_factory)
    model = random_model(tmp_path_factory.mktemp("renju_model") / "m", SIZE, rule="renju")
    with compile_lock(cache):
        b = Brain(model, cache)
        assert b.ask("START 15", timeout=600) == "OK"
    yield b
    b.close()


def fresh(b: Brain):
    assert b.ask("RESTART") == "OK"
    b.send("INFO timeout_turn 300", "INFO time_left 1000000", "INFO rule 4")
    b.no_reply_pending()


# Black's two open threes crossing at 7,5 (x, y = column, row): 5,5 6,5 and 7,6 7,7.
BLACK = [(5, 5), (6, 5), (7, 6), (7, 7)]
WHITE = [(0, 0), (0, 2), (0, 4)]


def board_of(stones: list[tuple[int, int, int]], black_field: int) -> np.ndarray:
    board = np.zeros(SIZE * SIZE, np.int8)
    for x, y, f in stones:
        board[y * SIZE + x] = 1 if f == black_field else -1
    return board


def test_a_board_with_black_on_a_forbidden_point_is_refused(renju_brain):
    b = renju_brain
    fresh(b)
    stones = []
    for (bx, by), (wx, wy) in zip(BLACK, WHITE + [(0, 6)], strict=True):
        stones += [(bx, by, 2), (wx, wy, 1)]
    stones.append((7, 5, 2))  # black's fifth stone: the double three
    reply = board_cmd(b, stones)
    assert reply.startswith("ERROR BOARD rejected") and "7,5" in reply, reply
    assert "double three" in reply and "unchanged" in reply, reply
    assert b.ask("BEGIN")  # the position was left empty: BEGIN plays
    # The same stones without the forbidden one: a position, and we move.
    fresh(b)
    parse_move(board_cmd(b, stones[:-2]))


@pytest.mark.long
def test_a_turn_onto_a_forbidden_point_is_refused_and_the_engine_never_plays_one(renju_brain):
    b = renju_brain
    fresh(b)
    stones = [(x, y, 2) for x, y in BLACK]
    for i, (x, y) in enumerate(WHITE):
        stones.insert(2 * i + 1, (x, y, 1))
    ours = parse_move(board_cmd(b, stones))  # we are white
    board = board_of(stones, black_field=2)
    board[ours] = -1
    forbidden = np.flatnonzero(renju_fouls(board))
    assert forbidden.size, "the double three at 7,5 is gone only if white took 7,5 or a neighbour"
    p = int(forbidden[0])
    reply = b.ask(f"TURN {p % SIZE},{p // SIZE}")
    assert reply.startswith("ERROR") and "may not play" in reply and "unchanged" in reply, reply
    # As black: a position full of black double threes; the engine's moves never
    # land on one, whatever the random net prefers.
    fresh(b)
    rng = np.random.default_rng(0)
    stones = [(5, 5, 1), (0, 0, 2), (6, 5, 1), (0, 2, 2), (7, 6, 1), (0, 4, 2), (7, 7, 1),
              (14, 14, 2), (9, 9, 1), (14, 12, 2), (9, 10, 1), (14, 10, 2)]
    board = board_of(stones, black_field=1)
    assert sum(renju.foul_code(board, p) > 0 for p in range(SIZE * SIZE)) >= 2
    reply = board_cmd(b, stones)
    for _ in range(4):
        ours = parse_move(reply)
        assert renju.foul_code(board, ours) == 0 and board[ours] == 0, reply
        board[ours] = 1
        if winning_line(Rules(SIZE, "renju"), board, ours):
            break  # its five against random replies: the game is over
        theirs = int(rng.choice(np.flatnonzero(board == 0)))
        board[theirs] = -1
        reply = b.ask(f"TURN {theirs % SIZE},{theirs // SIZE}")


@pytest.mark.long
def test_a_freestyle_model_refuses_renju(tmp_path, tmp_path_factory):
    cache = xla_cache_dir(tmp_path_factory)  # the freestyle brains' programs, compiled once
    b = Brain(random_model(tmp_path / "m", SIZE), cache)
    try:
        with compile_lock(cache):
            assert b.ask("START 15", timeout=600) == "OK"
        b.send("INFO rule 4")
        reply = b.ask("BEGIN")
        assert reply.startswith("ERROR") and "renju" in reply and "freestyle" in reply, reply
        assert reply.endswith("(--model models/renju)")  # the shipped model that plays it
        b.send("INFO rule 0")
        parse_move(b.ask("BEGIN"))
    finally:
        b.close()
