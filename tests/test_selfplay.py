"""Self-play trajectories, decayed z labels, and the replay buffer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.config.schema import Config, GameConfig, NetConfig, SearchConfig, SelfPlayConfig
from agz_jax.game import symmetry
from agz_jax.game.gomoku import Rules
from agz_jax.training import replay
from agz_jax.training.replay import Examples
from agz_jax.training.run import make_networks
from agz_jax.training.selfplay import decayed_z, make_selfplay, to_examples

SIZE = 5


def test_decayed_z_hand_computed():
    # Game 0: 5 plies, black (colour 0) wins with ply 4. Game 1: draw. Game 2: white
    # wins at ply 3 (4 plies). gamma = 0.5.
    T = 6
    to_play = jnp.tile((jnp.arange(T) % 2)[:, None], (1, 3))
    winner = jnp.array([0, -1, 1])
    length = jnp.array([5, 6, 4])
    z = np.asarray(decayed_z(to_play, winner, length, 0.5))
    np.testing.assert_allclose(z[:5, 0], [1 / 16, -1 / 8, 1 / 4, -1 / 2, 1.0])
    np.testing.assert_array_equal(z[:, 1], 0.0)
    np.testing.assert_allclose(z[:4, 2], [-1 / 8, 1 / 4, -1 / 2, 1.0])


def test_gamma_one_gives_plain_outcomes():
    to_play = jnp.tile((jnp.arange(4) % 2)[:, None], (1, 1))
    z = np.asarray(decayed_z(to_play, jnp.array([1]), jnp.array([4]), 1.0))
    np.testing.assert_array_equal(z[:, 0], [-1, 1, -1, 1])


@pytest.fixture(scope="module")
def played():
    config = Config(
        game=GameConfig(size=SIZE),
        net=NetConfig(filters=4, blocks=1, value_hidden=4),
        search=SearchConfig(num_simulations=4),
        selfplay=SelfPlayConfig(num_games=6),
    )
    rules = Rules(SIZE)
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    variables = nets.init(jax.random.PRNGKey(0))
    play = jax.jit(make_selfplay(rules, nets, search=config.search, decay=config.decay,
                                 selfplay=config.selfplay, openings=config.openings))
    traj, final, stats = play(variables, jax.random.PRNGKey(1))
    return config, rules, traj, final, stats


def test_trajectory_replays_to_the_final_position(played):
    config, rules, traj, final, stats = played
    T, B = traj.action.shape
    assert T == SIZE * SIZE and B == 6
    valid = np.asarray(traj.valid)
    length = np.asarray(final.num_moves)
    np.testing.assert_array_equal(valid.sum(0), length)
    assert int(stats["moves"]) == length.sum()
    step, observe = jax.jit(rules.step), jax.jit(rules.observe)  # one move at a time
    for b in range(B):
        moves = [int(a) for a in np.asarray(traj.action[:, b]) if a >= 0]
        assert len(moves) == length[b]
        state = rules.from_moves(moves)
        np.testing.assert_array_equal(state.board, final.board[b])
        assert int(state.winner) == int(final.winner[b])
        assert bool(final.done[b])
        # Observations are of the position before each move, side to move first.
        replayed = rules.init()
        for t, m in enumerate(moves):
            np.testing.assert_array_equal(observe(replayed), traj.obs[t, b])
            assert int(traj.to_play[t, b]) == t % 2
            replayed = step(replayed, m)


def test_policy_targets_are_distributions_on_legal_moves(played):
    _, rules, traj, final, _ = played
    valid = np.asarray(traj.valid)
    pi = np.asarray(traj.policy)[valid]
    np.testing.assert_allclose(pi.sum(-1), 1.0, atol=1e-5)
    obs = np.asarray(traj.obs)[valid]
    occupied = (obs[..., 0] + obs[..., 1]).reshape(len(obs), -1) > 0
    assert np.all(pi[occupied] == 0)


def test_examples_labels(played):
    config, rules, traj, final, _ = played
    ex = to_examples(traj, final, 0.9)
    valid = np.asarray(ex.valid)
    assert valid.sum() == int(np.asarray(final.num_moves).sum())
    z = np.asarray(ex.z).reshape(SIZE * SIZE, -1)
    for b in range(z.shape[1]):
        n = int(final.num_moves[b])
        w = int(final.winner[b])
        if w < 0:
            assert np.all(z[:n, b] == 0)
        else:
            # The winner's last move is labelled 1 for the side that made it.
            assert z[n - 1, b] == pytest.approx(1.0)
            assert z[n - 2, b] == pytest.approx(-0.9)


def _examples(n, size, colour_of, z0=0.0):
    obs = jnp.zeros((n, size, size, 3), jnp.int8).at[:, 0, 0, 0].set(1)
    policy = jax.nn.one_hot(jnp.arange(n) % (size * size), size * size)
    z = z0 + jnp.arange(n, dtype=jnp.float32)
    return Examples(obs, policy, z, colour_of(jnp.arange(n)), jnp.ones(n, bool))


def test_replay_rings_split_by_colour_and_wrap():
    buf = replay.init(2, 5, (3, 3, 3), 9)
    ex = _examples(8, 3, lambda i: i % 2)  # even indices black, odd white
    buf = replay.add(buf, ex)
    np.testing.assert_array_equal(buf.size, [4, 4])
    np.testing.assert_array_equal(buf.z[0, :4], [0, 2, 4, 6])
    np.testing.assert_array_equal(buf.z[1, :4], [1, 3, 5, 7])
    # Three more black positions: the ring of capacity 5 wraps over the oldest.
    more = _examples(3, 3, lambda i: 0 * i, z0=100.0)
    buf = replay.add(buf, more)
    np.testing.assert_array_equal(buf.size, [5, 4])
    np.testing.assert_array_equal(buf.z[0], [101, 102, 4, 6, 100])
    np.testing.assert_array_equal(buf.ptr, [2, 4])


def test_replay_invalid_examples_are_not_added_and_overflow_keeps_newest():
    buf = replay.init(1, 4, (3, 3, 3), 9)
    ex = _examples(10, 3, lambda i: i % 2)
    ex = ex._replace(valid=jnp.arange(10) != 9)
    buf = replay.add(buf, ex)  # one ring: 9 valid examples into capacity 4
    assert int(buf.size[0]) == 4
    assert sorted(np.asarray(buf.z[0]).tolist()) == [5, 6, 7, 8]


def test_replay_sample_augments_obs_and_policy_together():
    size = 5
    n = 40
    key = jax.random.PRNGKey(0)
    points = jax.random.randint(key, (n,), 0, size * size)
    # The target move is the marked point of plane 2, so any correct symmetry
    # keeps argmax(policy) on the mark.
    obs = jax.vmap(lambda p: jnp.zeros(size * size, jnp.int8).at[p].set(1))(points)
    obs = jnp.zeros((n, size, size, 3), jnp.int8).at[..., 2].set(obs.reshape(n, size, size))
    ex = Examples(obs, jax.nn.one_hot(points, size * size), jnp.zeros(n),
                  jnp.zeros(n, jnp.int32), jnp.ones(n, bool))
    buf = replay.add(replay.init(1, 64, (size, size, 3), size * size), ex)
    batch = replay.sample(buf, jax.random.PRNGKey(1), 256)
    mark = np.asarray(batch.obs[0, ..., 2]).reshape(256, -1).argmax(-1)
    np.testing.assert_array_equal(np.asarray(batch.policy[0]).argmax(-1), mark)
    # Augmentation actually moves points around (not the identity only).
    orig = set(np.asarray(points).tolist())
    assert len(set(mark.tolist()) - orig) > 0
    un = replay.sample(buf, jax.random.PRNGKey(1), 64, augment=False)
    assert set(np.asarray(un.policy[0]).argmax(-1).tolist()) <= orig
    assert symmetry.NUM_SYMMETRIES == 8
