"""Continuous self-play: slots that start a new game when theirs ends, inside the scan.

Checked against lockstep self-play (the same games when no slot refills),
against the rules and the decayed-z formula written out in plain Python (every
game a refilled slot played, as it reached the replay), and for exact resume
through a checkpoint.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agz_jax.config import files
from agz_jax.config.schema import (
    Config,
    GameConfig,
    NetConfig,
    OpeningsConfig,
    SearchConfig,
    SelfPlayConfig,
)
from agz_jax.game import openings
from agz_jax.game.gomoku import Rules
from agz_jax.nets import checkpoint
from agz_jax.training import replay, run
from agz_jax.training.selfplay import NO_GAME, make_continuous, make_selfplay, to_examples

SIZE = 5
T = SIZE * SIZE


def tiny(**selfplay) -> Config:
    return Config(
        game=GameConfig(size=SIZE),
        net=NetConfig(filters=4, blocks=1, value_hidden=4, double=False),
        search=SearchConfig(num_simulations=4),
        selfplay=SelfPlayConfig(num_games=4, continuous=True, **selfplay),
    )


def sections(config: Config) -> dict:
    """The config sections self-play's builders take."""
    return dict(search=config.search, decay=config.decay, selfplay=config.selfplay,
                openings=config.openings)


def sorted_rows(obs, policy, z):
    """The examples as a sorted list of byte strings (an order-free comparison)."""
    obs, policy, z = (np.asarray(x) for x in (obs, policy, z))
    rows = [o.tobytes() + np.round(p, 5).tobytes() + np.float32(round(float(v), 5)).tobytes()
            for o, p, v in zip(obs, policy, z, strict=True)]
    return sorted(rows)


def test_without_refill_it_plays_the_lockstep_games():
    config = tiny(steps=T)
    rules = Rules(SIZE)
    nets = run.make_networks(config.net, board_size=config.game.size, features=config.features)
    variables = nets.init(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(3)

    traj, final, _ = jax.jit(make_selfplay(rules, nets, **sections(config)))(variables, key)
    init, play = make_continuous(rules, nets, **sections(config), refill=False)
    buffer = replay.init_for(nets, rules, 4 * T)
    slots, buffer, stats, moves = jax.jit(play)(variables, init(key), buffer, key)

    lock_moves = np.asarray(traj.action)
    cont_moves = np.where(np.cumsum(np.asarray(moves.ended), 0) - np.asarray(moves.ended) > 0,
                          -1, np.asarray(moves.action))
    np.testing.assert_array_equal(cont_moves, lock_moves)
    assert int(stats["games"]) == 4
    np.testing.assert_array_equal(slots.states.board, final.board)

    ex = to_examples(traj, final, config.decay.gamma)
    valid = np.asarray(ex.valid)
    n = int(buffer.size[0])
    assert n == valid.sum()
    assert sorted_rows(buffer.obs[0, :n], buffer.policy[0, :n], buffer.z[0, :n]) == sorted_rows(
        np.asarray(ex.obs)[valid], np.asarray(ex.policy)[valid], np.asarray(ex.z)[valid])


def reference_z(length: int, winner: int, to_play: list[int], gamma: float) -> list[float]:
    """z_t = +-gamma^(L - t - 1) from the side to move's view, 0 for a draw."""
    if winner < 0:
        return [0.0] * length
    return [(1.0 if to_play[t] == winner else -1.0) * gamma ** (length - t - 1)
            for t in range(length)]


@pytest.mark.parametrize("with_openings, empty_fraction, shift, reuse",
                         [pytest.param(False, 0.0, 0, False, marks=pytest.mark.long),
                          pytest.param(True, 0.0, 1, False, marks=pytest.mark.long),
                          pytest.param(True, 0.5, 0, False, marks=pytest.mark.long),
                          (True, 0.5, 0, True)])
def test_every_refilled_slot_plays_legal_games_with_decayed_z(tmp_path, with_openings,
                                                              empty_fraction, shift, reuse):
    gamma = 0.9
    config = tiny(steps=3 * T).replace(**{"search.reuse": reuse})
    opening_moves: list = []
    if with_openings:
        path = tmp_path / "open.txt"
        path.write_text("# two-stone openings\n2,2 2,3\n1,1 3,3\n0,4 4,0\n")
        config = config.replace(**{"openings.path": str(path),
                                   "openings.empty_fraction": empty_fraction,
                                   "openings.shift": shift})
        opening_moves = files.selfplay_opening_set(config.openings, SIZE).tolist()
        # Shifted by up to one point: 9 + 9 + 1 placements of the three openings.
        assert len(opening_moves) == (19 if shift else 3)
    start = lambda i: [] if i == openings.EMPTY else opening_moves[i]  # noqa: E731
    config = config.replace(**{"decay.gamma": gamma})
    rules = Rules(SIZE)
    nets = run.make_networks(config.net, board_size=config.game.size, features=config.features)
    variables = nets.init(jax.random.PRNGKey(1))
    init, play = make_continuous(rules, nets, **sections(config))
    slots0 = init(jax.random.PRNGKey(2))
    buffer = replay.init_for(nets, rules, 10_000)
    slots, buffer, stats, moves = jax.jit(play)(variables, slots0, buffer,
                                                jax.random.PRNGKey(4))
    action, ended = np.asarray(moves.action), np.asarray(moves.ended)
    next_opening = np.asarray(moves.opening)
    B = action.shape[1]

    # Rebuild, in plain Python, the examples each finished game must have added:
    # games end in step order, and within a step in slot order.
    expected = []
    step_one, observe = jax.jit(rules.step), jax.jit(rules.observe)  # one move at a time
    current = np.asarray(slots0.opening).copy()  # each slot's game's opening
    games = {b: [] for b in range(B)}  # the moves of each slot's current game
    finished, starts = 0, []
    for step in range(action.shape[0]):
        for b in range(B):
            games[b].append(int(action[step, b]))
            if not ended[step, b]:
                assert next_opening[step, b] == NO_GAME
                continue
            finished += 1
            starts.append(current[b])
            state = rules.from_moves(start(current[b]))
            to_play, obs = [], []
            for i, a in enumerate(games[b]):
                assert np.asarray(state.board)[a] == 0, "an illegal move"
                obs.append(np.asarray(observe(state)))
                to_play.append(int(state.to_play))
                state = step_one(state, a)
                # Only the last move of the game ends it.
                assert bool(state.done) == (i == len(games[b]) - 1)
            assert not bool(state.illegal)
            expected += zip(obs, reference_z(len(obs), int(state.winner), to_play, gamma),
                            strict=True)
            games[b] = []
            current[b] = next_opening[step, b]
            assert openings.EMPTY <= current[b] < len(opening_moves)
    assert finished == int(stats["games"]) and finished > B
    # With reuse, searches start from the last move's subtree (and only then).
    assert (float(stats["reused_visits"]) > 0) == reuse
    empty = np.mean(np.asarray(starts) == openings.EMPTY)
    if shift:  # games did start from moved openings
        assert len({int(i) for i in starts if i != openings.EMPTY}) > 3
    if not with_openings:
        assert empty == 1.0
    elif empty_fraction == 0:
        assert empty == 0.0
    else:
        assert 0.2 < empty < 0.8, empty  # about half of the games start on the empty board
    # The games in progress are the slots' states.
    for b in range(B):
        state = rules.from_moves(start(current[b]) + games[b])
        np.testing.assert_array_equal(state.board, slots.states.board[b])

    n = int(buffer.size[0])
    assert n == len(expected)
    np.testing.assert_array_equal(np.asarray(buffer.obs[0, :n]),
                                  np.stack([o for o, _ in expected]).astype(np.int8))
    np.testing.assert_allclose(np.asarray(buffer.z[0, :n]), [z for _, z in expected],
                               rtol=1e-6)
    pi = np.asarray(buffer.policy[0, :n])
    np.testing.assert_allclose(pi.sum(-1), 1.0, atol=1e-5)
    occupied = (np.stack([o for o, _ in expected])[..., :2].sum(-1) > 0).reshape(n, -1)
    assert np.all(pi[occupied] == 0)


@pytest.mark.long
def test_killed_continuous_run_resumes_equal_to_unbroken(tmp_path):
    config = tiny(steps=16).replace(**{
        "iterations": 3, "selfplay.num_games": 4, "replay.capacity": 512,
        "train.batch_size": 8, "train.min_replay": 8, "train.steps_per_iteration": 2,
        "gating.num_games": 2, "gating.num_simulations": 2, "eval.every": 0})
    comps = run.build(config)

    state = run.init_state(comps)
    unbroken = []
    for _ in range(3):
        state, m = run.run_iteration(comps, state)
        unbroken.append(run.deterministic(m))
    assert any(m["selfplay/games"] > 0 for m in unbroken)
    assert unbroken[-1]["train/trained"] == 1.0
    final_hash = run.params_hash(state)

    state = run.init_state(comps)
    state, m1 = run.run_iteration(comps, state)
    checkpoint.save(tmp_path, 1, state, {"iteration": 1})
    del state  # "killed": only the checkpoint is left
    restored, _, step = checkpoint.restore(tmp_path, run.init_state(comps))
    assert step == 1
    resumed = [run.deterministic(m1)]
    for _ in range(2):
        restored, m = run.run_iteration(comps, restored)
        resumed.append(run.deterministic(m))
    assert resumed == unbroken
    assert run.params_hash(restored) == final_hash


def test_opening_config_errors_name_the_field(tmp_path):
    """A config is data: it names a file without reading it. ``files.check``
    reads it (the commands do, before anything compiles), and a file that is
    missing or does not fit is a ConfigError naming the field."""
    from agz_jax.config.schema import ConfigError

    def check(path):
        return files.check(Config(openings=OpeningsConfig(path=path)))

    missing = Config(openings=OpeningsConfig(path=str(tmp_path / "missing.txt")))
    with pytest.raises(ConfigError, match="openings.path.*is not a file"):
        files.check(missing)
    bad = tmp_path / "bad.txt"
    bad.write_text("7,7 7,8\n7,7 20,1\n")
    with pytest.raises(ConfigError, match="line 2: 20,1 is off the 15x15 board"):
        check(str(bad))
    bad.write_text("7,7 7,8\n7,7 7,8 8,8\n")
    with pytest.raises(ConfigError, match="line 2: 3 stones"):
        check(str(bad))
    with pytest.raises(ConfigError, match="no shipped opening set 'nope'"):
        check("nope")
    assert check("balanced15").openings.path == "balanced15"
    with pytest.raises(ConfigError, match="openings.empty_fraction must be in"):
        Config(openings=OpeningsConfig(empty_fraction=1.5))


def test_opening_sets_round_trip_and_set_up_states():
    rules = Rules(7)
    moves = openings.parse("# c\n3,3 3,4 4,4  # trailing comment\n\n0,0 6,6 1,1\n", 7)
    np.testing.assert_array_equal(moves, [[24, 25, 32], [0, 48, 8]])
    assert np.array_equal(openings.parse(openings.format_set(moves, 7, "made here"), 7), moves)
    states = jax.jit(lambda i: openings.start_states(rules, moves, i))(jnp.array([1, 0, 1]))
    for b, i in enumerate([1, 0, 1]):
        ref = rules.from_moves(moves[i].tolist())
        for field in ("board", "to_play", "last_action", "num_moves", "played_at"):
            np.testing.assert_array_equal(getattr(states, field)[b], getattr(ref, field))
    # A match plays each opening drawn once with each colour.
    paired, index = openings.paired_states(rules, moves, jax.random.PRNGKey(0), 4)
    np.testing.assert_array_equal(index[:2], index[2:])
    np.testing.assert_array_equal(paired.board, [rules.from_moves(moves[i].tolist()).board
                                                 for i in np.asarray(index)])
    np.testing.assert_array_equal(paired.board[:2], paired.board[2:])
    assert len({tuple(np.asarray(b)) for b in paired.board[:2]}) == 2  # without replacement


@settings(max_examples=60, deadline=None)
@given(size=st.integers(5, 15), shift=st.integers(0, 4), data=st.data())
def test_translated_openings_are_every_fitting_move_of_each(size, shift, data):
    """Checked against a count made per axis: an opening spanning rows r0..r1
    fits min(shift, r0) offsets up and min(shift, size - 1 - r1) down."""
    stones = data.draw(st.integers(1, 4))
    points = st.lists(st.integers(0, size * size - 1), min_size=stones, max_size=stones,
                      unique=True)
    moves = np.array(data.draw(st.lists(points, min_size=1, max_size=3)), np.int32)
    out = openings.translated(moves, size, shift)
    assert out.dtype == np.int32 and out.shape[1] == stones
    fits = lambda lo, hi: min(shift, lo) + min(shift, size - 1 - hi) + 1  # noqa: E731
    first = 0
    for m in moves:
        r, c = m // size, m % size
        count = fits(r.min(), r.max()) * fits(c.min(), c.max())
        block = out[first:first + count]
        first += count
        np.testing.assert_array_equal(block[0], m)  # the opening itself first
        dr, dc = block // size - r, block % size - c
        # Each row moves every stone by the same offset, of at most shift points.
        assert np.all(dr == dr[:, :1]) and np.all(dc == dc[:, :1])
        assert np.abs(dr).max() <= shift and np.abs(dc).max() <= shift
        assert len({(a, b) for a, b in zip(dr[:, 0], dc[:, 0], strict=True)}) == count
    assert first == len(out)
    if shift == 0:
        np.testing.assert_array_equal(out, moves)


def test_matches_and_lockstep_selfplay_start_from_the_openings(tmp_path):
    from agz_jax.match import arena

    rules = Rules(SIZE)
    moves = np.array([[12, 13], [0, 24], [6, 18]], np.int32)
    players = (arena.random_player(rules), arena.random_player(rules))
    key = jax.random.PRNGKey(5)
    result = jax.jit(lambda k: arena.play_match(rules, *players, k, 6, openings=moves))(key)
    compact = arena.play_match_compact(rules, lambda v: players, None, key, 6, chunk=4,
                                       openings=moves)
    for r in (result, compact):
        played = np.asarray(r.moves)
        assert played.shape == (T, 6)
        for g in range(6):
            game = [int(a) for a in played[:, g] if a >= 0]
            assert game[:2] in moves.tolist(), "every game starts from an opening of the set"
            assert game[:2] == [int(a) for a in played[:2, (g + 3) % 6]]  # swapped colours
            state = rules.from_moves(game)
            assert not bool(state.illegal) and bool(state.done)
            assert int(state.winner) == int(r.winner[g]) and int(r.length[g]) == len(game)
        assert len({tuple(played[:2, g]) for g in range(3)}) == 3  # 3 distinct openings
    # The same per-ply keys: the compact match plays the one-scan match's games.
    np.testing.assert_array_equal(np.asarray(compact.moves), np.asarray(result.moves))

    f = tmp_path / "o.txt"
    f.write_text(openings.format_set(moves, SIZE))
    config = tiny().replace(**{"selfplay.continuous": False, "openings.path": str(f)})
    nets = run.make_networks(config.net, board_size=config.game.size, features=config.features)
    variables = nets.init(jax.random.PRNGKey(0))
    traj, final, stats = jax.jit(make_selfplay(rules, nets, **sections(config)))(
        variables, jax.random.PRNGKey(2))
    assert traj.action.shape[0] == T - 2
    for b in range(config.selfplay.num_games):
        game = [int(a) for a in np.asarray(traj.action[:, b]) if a >= 0]
        assert any(np.array_equal(rules.from_moves(o + game).board, final.board[b])
                   for o in moves.tolist())
    ex = to_examples(traj, final, 0.9)
    assert int(np.asarray(ex.valid).sum()) == int(stats["moves"])


def test_checkpoints_from_before_the_slots_field_still_restore(tmp_path):
    """A run state saved as the 5-field NamedTuple of earlier versions (no slots)."""
    import collections

    import orbax.checkpoint as ocp

    config = tiny().replace(**{"selfplay.continuous": False, "replay.capacity": 16,
                               "train.min_replay": 16})
    comps = run.build(config)
    state = run.init_state(comps)
    assert state.slots == ()
    Old = collections.namedtuple("RunState", ["iteration", "key", "train", "best", "replay"])
    old = Old(*state[:5])
    with checkpoint._manager(tmp_path) as mngr:
        mngr.save(3, args=ocp.args.Composite(state=ocp.args.StandardSave(old),
                                             meta=ocp.args.JsonSave({"iteration": 3})))
        mngr.wait_until_finished()
    restored, meta, step = checkpoint.restore(tmp_path, state)
    assert step == 3 and meta == {"iteration": 3} and restored.slots == ()
    assert run.params_hash(restored) == run.params_hash(state)


@pytest.mark.long
def test_gating_every_and_in_chunks():
    """gating.every=2 gates at even iterations only; gating.chunk plays the match
    in chunks (arena.play_match_compact), a whole match of num_games games."""
    config = tiny(steps=T + 1).replace(**{  # every slot ends a game in the first iteration
        "selfplay.num_games": 4, "replay.capacity": 512, "train.batch_size": 8,
        "train.min_replay": 1, "train.steps_per_iteration": 1, "gating.num_games": 4,
        "gating.num_simulations": 2, "gating.every": 2, "gating.chunk": 4, "eval.every": 0})
    comps = run.build(config)
    state = run.init_state(comps)
    gated = []
    for _ in range(4):
        state, m = run.run_iteration(comps, state)
        assert m["train/trained"] == 1.0
        gated.append("gating/score" in m)
        if gated[-1]:
            points = m["gating/score"] * 4  # wins + draws / 2, out of 4 games
            assert 0 <= points <= 4 and points * 2 == int(points * 2)
    assert gated == [False, True, False, True]
