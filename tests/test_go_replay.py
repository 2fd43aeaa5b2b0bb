"""Planes made on the device from stored move sequences (``go.replay``,
``go.planes``, ``go.sampling``) against the host path (``go.sgf.replay`` of
each game, then ``go.features``, as ``go.dataset`` builds them), on random
legal games with captures, kos and passes; the sampler's draws, targets,
symmetries and fixed shapes."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agz_jax.game import symmetry
from agz_jax.go import planes as PL
from agz_jax.go import replay as RP
from agz_jax.go import sampling as SM
from agz_jax.go import sgf
from agz_jax.go.dataset import planes_of


@functools.cache
def random_games(size: int, games: int, plies: int, seed: int) -> tuple:
    """Random legal games (``go.replay.random_store``), one array each."""
    moves, offsets = RP.random_store(size, games, plies, seed, pass_p=0.04)
    return tuple(moves[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True))


def nine():
    """(games, moves, offsets, Store) of the 9x9 random games the tests share."""
    games = random_games(9, 8, 110, seed=1)
    moves = np.concatenate(games)
    offsets = np.concatenate([[0], np.cumsum([len(g) for g in games])])
    return games, moves, offsets, RP.store(moves, offsets, size=9)


def host_states(size: int, games, setup=None) -> tuple:
    """(the States before every ply of every game, concatenated; game; ply),
    from the empty board or the ``setup`` boards."""
    rules = sgf.replay_rules(size)
    states = []
    for k, g in enumerate(games):
        board = np.zeros(size * size, np.int8) if setup is None else setup[k]
        out = sgf.replay(rules, board, [(i % 2, int(a)) for i, a in enumerate(g)])
        assert not np.asarray(out.why)[:len(g)].any()
        n = len(g)
        states.append(jax.tree.map(lambda x, n=n: np.asarray(x)[:n], out.before))
    stacked = jax.tree.map(lambda *x: np.concatenate(x), *states)
    game = np.repeat(np.arange(len(games)), [len(g) for g in games])
    ply = np.concatenate([np.arange(len(g)) for g in games])
    return stacked, game, ply


def pick(states, moves, size: int, count: int, seed: int) -> np.ndarray:
    """Positions before a move on the board: every ko position, every one
    right after a pass, the rest at random (``count`` in all)."""
    on_board = moves < size * size
    ko = np.flatnonzero(on_board & (np.asarray(states.ko) >= 0))
    after_pass = np.flatnonzero(on_board & (np.asarray(states.last_action) == size * size))
    special = np.unique(np.concatenate([ko[:count // 4], after_pass[:count // 4]]))
    rest = np.setdiff1d(np.flatnonzero(on_board), special)
    rest = np.random.default_rng(seed).choice(rest, count - len(special), replace=False)
    return np.sort(np.concatenate([special, rest]))


def compare(size: int, games, count: int, modes, kos: bool = True) -> None:
    moves = np.concatenate(games)
    offsets = np.concatenate([[0], np.cumsum([len(g) for g in games])])
    states, game, ply = host_states(size, games)
    sel = pick(states, moves, size, count, seed=size)
    # the games do exercise captures, kos and passes
    assert (np.asarray(states.ko)[sel] >= 0).any() or not kos
    assert (np.asarray(states.last_action)[sel] == size * size).any()
    assert (np.asarray(states.board).astype(bool).sum(1)[1:]
            < np.asarray(states.board).astype(bool).sum(1)[:-1]).any()
    host = planes_of(sgf.replay_rules(size), jax.tree.map(lambda x: x[sel], states), 0,
                     batch=count)
    assert host[..., PL.LADDER_CHANNEL].any()  # some ladder moves to agree on
    s = RP.store(moves, offsets, size=size)
    length = RP.longest(offsets)
    if size == 9:  # the ladder table: the same plane, before every move
        table = SM.ladder_table(s, size, length, games=8, ladder="map")
        flat = offsets[game[sel]] + ply[sel]
        np.testing.assert_array_equal(
            np.asarray(PL.unpack(jnp.asarray(table[flat]), size * size)),
            host[..., PL.LADDER_CHANNEL].reshape(len(sel), -1).astype(bool))
    for mode in modes:
        fn = jax.jit(functools.partial(SM.examples_at, RP.replay_rules(size), length=length,
                                       ranks=0, ladder=mode))
        x, p, target = fn(s=s, game=jnp.asarray(game[sel]), ply=jnp.asarray(ply[sel])[:, None])
        np.testing.assert_array_equal(np.asarray(x), host, err_msg=f"ladder={mode}")
        np.testing.assert_array_equal(np.asarray(target), moves[sel])
        np.testing.assert_array_equal(np.asarray(p.to_play), np.asarray(states.to_play)[sel])


@pytest.mark.long
def test_planes_equal_the_host_path_9x9():
    compare(9, random_games(9, 8, 110, seed=1), 32, ("map",))


@pytest.mark.long
def test_planes_equal_the_host_path_19x19():
    compare(19, random_games(19, 2, 320, seed=2), 8, ("pool",), kos=False)


def test_store_counts_examples_not_passes():
    moves = np.array([3, 81, 5, 81, 81, 7], np.int16)  # 9x9: 81 is the pass
    s = RP.store(moves, [0, 2, 2, 5, 6], size=9)  # the second game is empty
    np.testing.assert_array_equal(np.asarray(s.examples), [0, 2, 5])
    np.testing.assert_array_equal(np.asarray(s.first), [0, 1, 1, 2, 3])
    assert RP.longest([0, 2, 2, 5, 6]) == 3
    with pytest.raises(ValueError):
        RP.store(moves, [0, 7])
    with pytest.raises(ValueError, match="no move on the board"):
        RP.store(np.array([81, 81], np.int16), [0, 2], size=9)
    part, at = RP.subset(moves, [0, 2, 2, 5, 6], [3, 0, 1])
    np.testing.assert_array_equal(part, [7, 3, 81])
    np.testing.assert_array_equal(at, [0, 1, 3, 3])


def test_draw_is_uniform_over_examples():
    games, moves, _, s = nine()
    game, ply = jax.jit(SM.draw, static_argnums=(2, 3))(jax.random.PRNGKey(0), s, 4000, 8)
    flat = np.asarray(s.offsets)[np.asarray(game)][:, None] + np.asarray(ply)
    assert (moves[flat] < 81).all()  # never a pass
    # each game's share of the draws is its share of the examples
    share = np.bincount(np.repeat(np.asarray(game), 8), minlength=8) / flat.size
    want = np.diff(np.asarray(s.first)) / len(s.examples)
    np.testing.assert_allclose(share, want, atol=0.02)
    # and within a game the plies are uniform: the mean ply is the examples' mean
    g0 = np.asarray(game) == 0
    plies0 = np.flatnonzero(moves[:len(games[0])] < 81)
    assert abs(np.asarray(ply)[g0].mean() - plies0.mean()) < 4


def test_sample_batch_jit_shapes_targets_and_symmetries():
    size = 9
    games, moves, offsets, s = nine()
    length = RP.longest(offsets)
    traces = []

    def counted(*args, **kwargs):
        traces.append(1)
        return SM.sample_batch(*args, **kwargs)

    kw = dict(batch_size=16, length=length, size=size, per_game=4, ladder="none")
    plain = jax.jit(functools.partial(counted, symmetries=False, **kw))
    turned = jax.jit(functools.partial(counted, symmetries=True, dtype=jnp.bfloat16, **kw))
    for seed in range(2):
        key = jax.random.PRNGKey(seed)
        a, b = plain(key, s), turned(key, s)
        assert a.planes.shape == (16, size, size, 28) and a.planes.dtype == jnp.float32
        assert b.planes.dtype == jnp.bfloat16 and a.target.dtype == jnp.int32
        game, ply = np.asarray(a.game), np.asarray(a.ply)
        np.testing.assert_array_equal(np.asarray(a.target), moves[offsets[game] + ply])
        np.testing.assert_array_equal(game, np.asarray(b.game))
        np.testing.assert_array_equal(np.asarray(a.to_play), ply % 2)
        # b is a under its symmetries: undo them
        g = np.asarray(b.symmetry)
        back = jax.vmap(symmetry.transform_planes)(b.planes.astype(jnp.float32),
                                                   symmetry.inverse(jnp.asarray(g)))
        np.testing.assert_array_equal(np.asarray(back), np.asarray(a.planes))
        perm = symmetry.permutations(size)[g]
        np.testing.assert_array_equal(perm[np.arange(16), np.asarray(b.target)],
                                      np.asarray(a.target))
    assert len(traces) == 2  # one trace per function, not per call


def test_first_plies_agree_with_the_reader():
    """Every (move, prey) pair ``first_plies`` decides is decided alike by
    ``go.ladder.read`` (both answers occur, and some pairs are left to it)."""
    from agz_jax.go import ladder

    size = 9
    games, moves, offsets, s = nine()

    @jax.jit
    def pairs(key):
        game, ply = SM.draw(key, s, 16, 8)
        before, hashes = RP.replay(RP.replay_rules(size),
                                   RP.game_moves(s, game, RP.longest(offsets)))
        p = PL.positions(before, hashes, jnp.repeat(jnp.arange(16), 8), ply.reshape(-1))
        legal = jax.vmap(functools.partial(PL.legality, size))(p)
        me = (1 - 2 * p.to_play).astype(jnp.int8)
        mv, prey, valid = jax.vmap(lambda b, c, m, lg: ladder.candidates(size, b, c, m, lg, 8))(
            p.board, p.chain, me, legal)
        who = jnp.repeat(jnp.arange(128), 8)
        mv, prey, valid = mv.reshape(-1), prey.reshape(-1), valid.reshape(-1)

        def both(w, m, q):
            b, c = p.board[w], p.chain[w]
            return (PL.first_plies(size, b, c, me[w], m, q, ladder.default_depth(size)),
                    ladder.read(size, b, c, me[w], m, q))

        quick, full = jax.lax.map(lambda x: both(*x), (who, mv, prey))
        return quick, full, valid

    quick, full, valid = (np.asarray(x) for x in pairs(jax.random.PRNGKey(3)))
    decided = valid & (quick >= 0)
    np.testing.assert_array_equal(quick[decided], full[decided].astype(np.int32))
    assert set(quick[valid]) == {-1, 0, 1} and full[decided].any()


@pytest.mark.long
def test_bench_replay_rows(capsys):
    from experiments.go import bench as go_bench

    assert go_bench.main(["--sizes", "5", "--games", "2", "--plies", "2", "--repeats", "1",
                          "--replay", "--replay-batch", "8", "--per-game", "4",
                          "--ladders", "none", "--host-positions", "0", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["impl"] for r in rows][-1] == "go.sampling per_game=4 ladder=none"
    assert rows[-1]["positions_per_s"] > 0


def test_lean_step_replays_as_rules_step():
    size = 9
    games, moves, offsets, s = nine()
    actions = RP.game_moves(s, jnp.arange(8), RP.longest(offsets))
    fn = jax.jit(RP.replay, static_argnums=(0,), static_argnames="step")
    lean, lean_hash = fn(RP.replay_rules(size), actions, step="lean")
    full, full_hash = fn(RP.replay_rules(size), actions, step="rules")
    for name in ("board", "chain", "to_play", "ko", "num_moves", "last_action", "played_at"):
        np.testing.assert_array_equal(getattr(lean, name), getattr(full, name), err_msg=name)
    np.testing.assert_array_equal(lean_hash, full_hash)
    assert not np.asarray(full.illegal).any()
    with pytest.raises(ValueError):
        RP.replay(RP.replay_rules(size), actions, step="fast")


def test_setup_stones_and_ranks():
    """Games from set-up boards (stones of unknown age) with the movers' ranks:
    the planes of every position equal the host path's (``ranks=9``)."""
    size, a = 9, 81
    rng = np.random.default_rng(5)
    setup = np.zeros((2, a), np.int8)
    setup[:, [20, 24]], setup[:, [56, 60]] = 1, -1  # two black, two white stones
    games = [rng.choice(np.setdiff1d(np.arange(a), [20, 24, 56, 60]), n, replace=False)
             .astype(np.int16) for n in (7, 9)]
    games[1][4] = a  # a pass
    rank = np.array([[3, 5], [8, -1]])
    s = RP.store(np.concatenate(games), [0, 7, 16], setup=setup, rank=rank)
    assert s.setup.shape == (2, a)  # the size is read from the set-up boards
    stacked, game, ply = host_states(size, games, setup)
    stacked = stacked._replace(rank=rank[game, ply % 2])  # the mover's
    keep = np.concatenate(games) < a
    host = planes_of(sgf.replay_rules(size), jax.tree.map(lambda x: x[keep], stacked), 9,
                     batch=32)
    fn = jax.jit(functools.partial(SM.examples_at, RP.replay_rules(size), length=9, ranks=9,
                                   ladder="map"))
    x, _, _ = fn(s=s, game=jnp.asarray(game[keep]), ply=jnp.asarray(ply[keep])[:, None])
    np.testing.assert_array_equal(np.asarray(x), host)
    assert host[..., 27:].any() and host[..., 18].any()  # ranks, and stones of unknown age


def test_ladder_table_is_looked_up():
    """With ``Store.ladder`` the ladder plane is the table's, not read (here
    with ``ladder="none"``: it would be zero); the table itself is checked
    against the host path in ``test_planes_equal_the_host_path_9x9``."""
    size = 9
    games, moves, offsets, s = nine()
    table = np.random.default_rng(0).integers(0, 2**32, (len(moves), 3), dtype=np.uint32)
    fn = jax.jit(functools.partial(SM.sample_batch, batch_size=32, length=RP.longest(offsets),
                                   size=size, per_game=8, symmetries=False, ladder="none"))
    b = fn(jax.random.PRNGKey(4), s._replace(ladder=jnp.asarray(table)))
    at = offsets[np.asarray(b.game)] + np.asarray(b.ply)
    want = np.asarray(PL.unpack(jnp.asarray(table[at]), size * size))
    np.testing.assert_array_equal(
        np.asarray(b.planes)[..., PL.LADDER_CHANNEL].reshape(32, -1), want)


def test_superko_legality_from_the_game_history():
    """``legality`` (the game's hashes sorted once, the ply of each) against
    ``Rules.legal_mask`` with positional superko, at every position of random
    5x5 games, where boards do recur."""
    size = 5
    moves, offsets = RP.random_store(size, 32, 100, seed=0, pass_p=0.05)
    s = RP.store(moves, offsets, size=size)
    length = RP.longest(offsets)
    rules = sgf.replay_rules(size)

    @jax.jit
    def both(game):
        before, hashes = RP.replay(RP.replay_rules(size), RP.game_moves(s, game, length))
        flat = jnp.tile(jnp.arange(length), game.shape[0])
        local = jnp.repeat(jnp.arange(game.shape[0]), length)
        p = PL.positions(before, hashes, local, flat)
        ours = jax.vmap(functools.partial(PL.legality, size))(p)
        simple = jax.vmap(lambda q: PL.after_move(size, q.board, q.chain,
                                                   (1 - 2 * q.to_play).astype(jnp.int8),
                                                   q.ko)[2])(p)
        return ours, simple

    ours, simple = (np.asarray(x) for x in both(jnp.arange(32)))
    states, game, ply = host_states(size, [moves[a:b] for a, b in
                                           zip(offsets[:-1], offsets[1:], strict=True)])
    want = np.asarray(jax.jit(jax.vmap(rules.legal_mask))(states))[:, :-1]
    at = game * length + ply
    np.testing.assert_array_equal(ours[at], want)
    assert (simple[at] & ~want).any()  # some moves only superko forbids
