"""Matches: colours alternated by halves, statistics on fixed outcomes."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax import arena
from agz_jax.gomoku import Rules

SIZE = 7


def test_score_on_a_fixed_outcome_vector():
    # 10 games, A black in the first 5. A wins games 0,1,2 (as black) and 7 (as
    # white); game 4 and 9 drawn; the rest lost.
    winner = np.array([0, 0, 0, 1, -1, 0, 0, 1, 0, -1])
    result = arena.MatchResult(jnp.asarray(winner), jnp.arange(10) < 5, jnp.zeros(10), None)
    s = arena.score(result)
    assert (s.games, s.wins, s.draws, s.losses) == (10, 4, 2, 4)
    assert (s.wins_as_black, s.wins_as_white) == (3, 1)
    assert s.score == pytest.approx(0.5)
    assert s.elo == pytest.approx(0.0)
    # Wilson interval at p = 0.5, n = 10.
    z = 1.96
    half = z * math.sqrt(0.25 / 10 + z * z / 400) / (1 + z * z / 10)
    assert s.low == pytest.approx(0.5 - half)
    assert s.high == pytest.approx(0.5 + half)


@pytest.mark.parametrize("n", [2, 6, 10, 100])
def test_interval_contains_perfect_scores(n):
    """All wins (or all losses): the interval reaches exactly 1 (or 0)."""
    a_black = jnp.arange(n) < n // 2
    for a_wins in (True, False):
        winner = jnp.where(a_black == a_wins, 0, 1)
        s = arena.score(arena.MatchResult(winner, a_black, jnp.zeros(n), None))
        assert s.score == (1.0 if a_wins else 0.0)
        assert s.low <= s.score <= s.high
        assert (s.high == 1.0) if a_wins else (s.low == 0.0)


def test_elo():
    assert arena.elo(0.5) == 0.0
    assert arena.elo(0.75) == pytest.approx(400 * math.log10(3))
    assert arena.elo(0.25) == pytest.approx(-400 * math.log10(3))
    assert arena.elo(1.0) == 800.0 and arena.elo(0.0) == -800.0


def _first_legal(rules):
    def act(key, states):
        legal = jax.vmap(rules.legal_mask)(states)
        return jnp.argmax(legal, axis=-1).astype(jnp.int32)

    return act


def test_colours_alternate_by_halves():
    """A deterministic player that takes the first empty point: as black on 7x7
    it completes row 0 first, so it wins exactly the games where it is black."""
    rules = Rules(SIZE)
    a = _first_legal(rules)
    b = _first_legal(rules)
    result = jax.jit(lambda k: arena.play_match(rules, a, b, k, 6))(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(result.winner, [0] * 6)  # black always wins
    s = arena.score(result)
    assert (s.wins, s.losses, s.wins_as_black, s.wins_as_white) == (3, 3, 3, 0)
    # Moves recorded replay to the final position.
    moves = np.asarray(result.moves)
    for g in range(6):
        seq = [int(m) for m in moves[:, g] if m >= 0]
        assert len(seq) == int(result.length[g]) == int(result.length[0])
        assert int(rules.from_moves(seq).winner) == 0


def test_openings_make_games_distinct_and_random_loses_to_a_line_maker():
    rules = Rules(SIZE)
    result = jax.jit(lambda k: arena.play_match(
        rules, _first_legal(rules), arena.random_player(rules), k, 20, opening_plies=2))(
        jax.random.PRNGKey(1))
    moves = np.asarray(result.moves)
    openings = {tuple(moves[:2, g]) for g in range(20)}
    assert len(openings) > 10
    centre = SIZE // 2
    for g in range(20):
        for m in moves[:2, g]:
            r, c = divmod(int(m), SIZE)
            assert abs(r - centre) <= 2 and abs(c - centre) <= 2
        legal_replay = rules.from_moves([int(m) for m in moves[:, g] if m >= 0])
        assert not bool(legal_replay.illegal)


def test_odd_number_of_games_is_refused():
    rules = Rules(SIZE)
    with pytest.raises(ValueError, match="even"):
        arena.play_match(rules, _first_legal(rules), _first_legal(rules),
                         jax.random.PRNGKey(0), 5)
