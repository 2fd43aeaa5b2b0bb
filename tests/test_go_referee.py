"""The rules against GnuGo 3.8 over GTP (``agz_jax.go.referee``): a few hundred
positions of random games (the full >= 100k-position run is
``python -m experiments.go.referee``, recorded in docs/go.md), a corrupted record
that must be caught, and the hand-made ladders of test_go_ladder against
GnuGo's own ladder reader. Skipped where gnugo is not installed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_go_features import NINE, planes
from test_go_ladder import SHAPE, diagram
from test_go_rules import FIVE, fns, own_eyes

from agz_jax.go import gtp, referee
from agz_jax.go.rules import BLACK, from_text, point, vertex

pytestmark = pytest.mark.skipif(gtp.find_gnugo() is None, reason="gnugo is not installed")


def record_games(rules, games: int, seed: int) -> referee.Games:
    """Random games (no own-eye filling, rare passes) as ``referee.Games``,
    played with the rules tests' compiled step."""
    rng = np.random.default_rng(seed)
    step, look = fns(rules)
    a, t_max = rules.num_points, rules.max_moves
    out = dict(actions=np.full((games, t_max), -1, np.int32),
               legal=np.zeros((games, t_max, a + 1), bool),
               boards=np.zeros((games, t_max, a), np.int8),
               ko=np.zeros((games, t_max), bool), superko=np.zeros((games, t_max), bool),
               captured=np.zeros((games, t_max), np.int32))
    done, passes, score = np.zeros(games, bool), np.zeros(games, np.int32), np.zeros(games)
    for g in range(games):
        state = rules.init()
        for t in range(t_max):
            mask = np.asarray(look(state)[0])
            board = np.asarray(state.board)
            choices = np.flatnonzero(mask[:a] & ~own_eyes(board, rules.size,
                                                          1 if int(state.to_play) == 0 else -1))
            action = a if not len(choices) or rng.random() < 0.01 else int(rng.choice(choices))
            out["actions"][g, t], out["legal"][g, t], out["ko"][g, t] = action, mask, state.ko >= 0
            after = step(state, jnp.int32(action))
            out["boards"][g, t] = np.asarray(after.board)
            out["captured"][g, t] = np.sum((board != 0) & (out["boards"][g, t] == 0))
            state = after
            if bool(state.done):
                break
        done[g], passes[g], score[g] = bool(state.done), int(state.passes), float(look(state)[2])
    return referee.Games(**out, done=done, passes=passes, score=score)


@pytest.fixture(scope="module")
def engine():
    with gtp.gnugo(superko=True, komi=NINE.komi) as e:
        yield e


def test_random_games_agree_with_gnugo(engine):
    tally = referee.Tally()
    for rules, n in ((FIVE, 4), (NINE, 3)):
        games = record_games(rules, n, seed=11)
        engine.send(f"komi {rules.komi}")
        for g in range(n):
            tally.add(referee.check_game(rules, games, g, engine))
    assert tally.disagreements == []
    assert tally.positions >= 300 and tally.captures > 20 and tally.scores >= 3


def test_a_corrupted_record_is_caught(engine):
    games = record_games(FIVE, 1, seed=6)
    games.legal[0, 3, 12] ^= True
    games.boards[0, 5, 0] = 1 - games.boards[0, 5, 0]
    games.score[0] += 1
    tally = referee.check_game(FIVE, games, 0, engine)
    kinds = {(t, kind) for _, t, kind, _ in tally.disagreements}
    assert tally.scores == 1  # this game is passed out with no dead stone
    assert kinds == {(3, "legal"), (5, "board"), (-1, "score")}


def test_gtp_errors_and_scores(engine):
    with pytest.raises(gtp.GtpError, match="not_a_command"):
        engine.send("not_a_command")
    engine.send("boardsize 9")
    with pytest.raises(gtp.GtpError):
        engine.send("play black Z99")
    assert referee.parse_score("B+3.5") == 3.5 and referee.parse_score("W+0.5") == -0.5
    assert referee.parse_score("0") == 0.0


def gnugo_ladder(engine, state, prey: str) -> str:
    """GnuGo's ``ladder_attack`` of the chain through ``prey``: "0" or "1 <move>"."""
    engine.send("boardsize 9")
    engine.send("clear_board")
    board = np.asarray(state.board)
    for p in np.flatnonzero(board):
        engine.send(f"play {'black' if board[p] > 0 else 'white'} {vertex(9, int(p))}")
    return engine.send(f"ladder_attack {prey}")


@pytest.mark.parametrize("extra", [{}, {"H8": "O"}, {"B2": "O"}, {"H8": "O", "B2": "O"},
                                   {"H8": "O", "G8": "X"}, {"C5": "O", "D4": "O"},
                                   {"E3": "O", "G5": "O"}],
                         ids=["clear", "breaker-up", "breaker-down", "both", "maker",
                              "chaser-in-atari", "friends"])
def test_ladders_agree_with_gnugo(engine, extra):
    """Our ladder moves against white E5 are empty exactly when GnuGo's ladder
    reader finds no attack, and GnuGo's attacking move is one of ours."""
    state = from_text(NINE, diagram(9, {**SHAPE, **extra}), BLACK)
    ours = {vertex(9, int(p)) for p in
            np.flatnonzero(planes(NINE, state)[0][..., 26].reshape(-1))}
    theirs = gnugo_ladder(engine, state, "E5").split()
    assert (theirs[0] != "0") == bool(ours)
    if theirs[0] != "0":
        assert theirs[1] in ours
    assert point(9, "E5") not in ours


def test_a_forgotten_superko_repetition_is_recognised():
    """``referee.repeats`` (used past GnuGo's 500-move history): in the double ko
    of test_go_rules, black retaking C2 recreates the starting board (a record
    board), E1 does not; GnuGo's board and history are left as they were."""
    from test_go_rules import DOUBLE_KO, FIVE_SIMPLE

    start = from_text(FIVE_SIMPLE, DOUBLE_KO, BLACK)
    board = np.asarray(start.board)
    with gtp.gnugo(superko=False, komi=0) as e:
        e.send("boardsize 5")
        e.send("clear_board")
        for p in np.flatnonzero(board):
            e.send(f"play {'black' if board[p] > 0 else 'white'} {vertex(5, int(p))}")
        for colour, move in (("black", "C4"), ("white", "B2"), ("black", "pass"),
                             ("white", "B4")):
            e.send(f"play {colour} {move}")
        before, history = referee.board_of(FIVE_SIMPLE, e), e.send("move_history")
        games = referee.Games(*[None] * 2, boards=board[None, None], ko=None, superko=None,
                              captured=None, done=None, passes=None, score=None)
        assert referee.repeats(e, FIVE_SIMPLE, games, 0, 1, "black", "C2")
        assert not referee.repeats(e, FIVE_SIMPLE, games, 0, 1, "black", "E1")
        assert np.array_equal(referee.board_of(FIVE_SIMPLE, e), before)
        assert e.send("move_history") == history


def test_an_empty_board_passed_out_is_not_scored(engine):
    # two passes on an empty board: GnuGo's final_score is no area count there
    # (B+5.5 with komi 7.5, where area scoring gives W+7.5): skipped, as dead stones are
    games = referee.random_games(NINE, jax.random.PRNGKey(0), 2, pass_prob=1.0)
    tally = referee.Tally()
    for g in range(2):
        tally.add(referee.check_game(NINE, games, g, engine))
    assert tally.disagreements == []
    assert tally.scores == 0 and tally.scores_skipped == 2
