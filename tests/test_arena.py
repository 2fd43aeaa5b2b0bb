"""Matches: colours alternated by halves, statistics on fixed outcomes."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.game.gomoku import Rules
from agz_jax.match import arena

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


def _hashed(rules, salt):
    """A deterministic player whose move depends only on its own position (a
    fixed pseudo-random score of the board and each point), so its games do
    not depend on the batch they are played in, yet end at varied lengths."""
    points = jnp.arange(rules.num_actions, dtype=jnp.int32)

    def act(key, states):
        del key

        def one(state):
            h = jnp.sum(state.board.astype(jnp.int32) * (points * 31 + 7)) + salt
            score = (points * 7919 + h * 104729) % 1009
            return jnp.argmax(jnp.where(rules.legal_mask(state), score, -1)).astype(jnp.int32)

        return jax.vmap(one)(states)

    return act


def test_compact_match_plays_the_same_games_as_the_scan():
    """With players that look only at their own position, dropping finished
    games between chunks changes nothing: same moves, winners and lengths, and
    the batch did shrink on the way."""
    rules = Rules(SIZE)
    a, b = _hashed(rules, 1), _hashed(rules, 2)
    key = jax.random.PRNGKey(3)
    scan = jax.device_get(jax.jit(lambda k: arena.play_match(rules, a, b, k, 16, 2))(key))
    lengths = np.asarray(scan.length)
    assert len(set(lengths.tolist())) > 3  # games of varied lengths: compaction matters
    live, plies = [], []

    def on_chunk(ply, so_far, finished):
        plies.append(ply)
        live.append(int(np.sum(~finished)))
        # Games reported over are over in the scan by this ply, with its winner.
        np.testing.assert_array_equal(finished, lengths <= ply)
        np.testing.assert_array_equal(so_far.winner[finished], scan.winner[finished])

    compact = arena.play_match_compact(rules, lambda v: (a, b), None, key, 16, 2, chunk=3,
                                       on_chunk=on_chunk)
    np.testing.assert_array_equal(compact.moves, scan.moves)
    np.testing.assert_array_equal(compact.winner, scan.winner)
    np.testing.assert_array_equal(compact.length, scan.length)
    np.testing.assert_array_equal(compact.a_black, scan.a_black)
    assert live[-1] == 0 and any(0 < n < 16 for n in live)
    assert plies == [min(3 * (i + 1), rules.num_actions) for i in range(len(plies))]
    assert plies[-1] >= lengths.max()


def test_compact_match_with_random_players_records_every_game_correctly():
    """Batch-keyed samplers play other games once the batch shrinks; each game
    is still recorded in its own column, and replays to its winner and length."""
    rules = Rules(SIZE)
    rnd = arena.random_player(rules)
    result = arena.play_match_compact(rules, lambda v: (rnd, _first_legal(rules)), None,
                                      jax.random.PRNGKey(0), 12, 2, chunk=4)
    assert result.moves.shape == (rules.num_actions, 12)
    for g in range(12):
        seq = [int(m) for m in result.moves[:, g] if m >= 0]
        assert len(seq) == result.length[g]
        replay = rules.from_moves(seq)
        assert not bool(replay.illegal) and bool(replay.done)
        assert int(replay.winner) == result.winner[g]
    again = arena.play_match_compact(rules, lambda v: (rnd, _first_legal(rules)), None,
                                     jax.random.PRNGKey(0), 12, 2, chunk=4)
    np.testing.assert_array_equal(again.moves, result.moves)  # a pure function of the key


def test_compact_match_passes_variables_to_the_players():
    rules = Rules(SIZE)

    def players(v):
        def act(key, states):  # plays the first legal point at or after v["start"]
            legal = jax.vmap(rules.legal_mask)(states)
            order = (jnp.arange(rules.num_actions) - v["start"]) % rules.num_actions
            return jnp.argmax(jnp.where(legal, -order, -10**6), axis=-1).astype(jnp.int32)
        return act, act

    result = arena.play_match_compact(rules, players, {"start": jnp.int32(7)},
                                      jax.random.PRNGKey(0), 2, 0)
    assert result.moves[0, 0] == 7 and result.moves[1, 0] == 8


def test_compact_match_refuses_bad_arguments():
    rules = Rules(SIZE)
    players = lambda v: (_first_legal(rules), _first_legal(rules))
    with pytest.raises(ValueError, match="even"):
        arena.play_match_compact(rules, players, None, jax.random.PRNGKey(0), 5)
    with pytest.raises(ValueError, match="chunk"):
        arena.play_match_compact(rules, players, None, jax.random.PRNGKey(0), 4, chunk=0)
