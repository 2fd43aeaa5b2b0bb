"""The 8 dihedral symmetries: a group, consistent between planes and policies,
and consistent with the rules (a transformed game is the transformed game)."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agz_jax.game.gomoku import Rules
from agz_jax.game.symmetry import (
    NUM_SYMMETRIES,
    inverse,
    permutations,
    random_symmetry,
    transform_planes,
    transform_point,
    transform_policy,
    transform_states,
    untransform_policy,
)

SIZES = (5, 6)  # odd and even: the centre is a point, or not
G = range(NUM_SYMMETRIES)


def compose(perm, g, h):
    """Index of the symmetry 'g then h' (a flat vector x -> x[perm[g]][perm[h]])."""
    p = perm[g][perm[h]]
    matches = [k for k in G if np.array_equal(perm[k], p)]
    assert len(matches) == 1, (g, h, matches)
    return matches[0]


@pytest.mark.parametrize("size", SIZES)
def test_eight_distinct_permutations_identity_first(size):
    perm = permutations(size)
    assert perm.shape == (8, size * size) and perm.dtype == np.int32
    for g in G:
        assert sorted(perm[g].tolist()) == list(range(size * size)), g
    assert len({tuple(p) for p in perm.tolist()}) == 8
    np.testing.assert_array_equal(perm[0], np.arange(size * size))


@pytest.mark.parametrize("size", SIZES)
def test_group_closure_inverse_and_shape_of_d4(size):
    perm = permutations(size)
    table = np.array([[compose(perm, g, h) for h in G] for g in G])
    # A group table is a Latin square with the identity (0) as neutral element.
    for k in G:
        assert sorted(table[k]) == list(G) and sorted(table[:, k]) == list(G)
        assert table[0, k] == k == table[k, 0]
    # D4: non-abelian, the rotations 0..3 a cyclic subgroup, 5 involutions.
    assert not np.array_equal(table, table.T)
    assert table[1, 1] == 2 and table[1, 2] == 3 and table[1, 3] == 0
    assert sum(table[g, g] == 0 for g in G if g) == 5
    for g in G:
        assert table[g, inverse(g)] == 0 == table[inverse(g), g]
        assert inverse(inverse(g)) == g


@pytest.mark.parametrize("size", SIZES)
def test_maps_are_the_documented_rotations_and_flips(size):
    """g = k quarter turns (np.rot90) then, for g >= 4, a left-right flip."""
    x = np.random.default_rng(0).normal(size=(size, size, 3)).astype(np.float32)
    for g in G:
        want = np.rot90(x, k=g % 4, axes=(0, 1))
        if g >= 4:
            want = want[:, ::-1]
        np.testing.assert_array_equal(transform_planes(x, g), want)
    # One quarter turn moves the top-right corner to the top-left.
    plane = np.zeros((size, size, 1), np.float32)
    plane[0, size - 1] = 1
    assert np.asarray(transform_planes(plane, 1))[0, 0, 0] == 1


@pytest.mark.parametrize("size", SIZES)
def test_inverse_undoes_every_map(size):
    x = jnp.asarray(np.random.default_rng(1).normal(size=(2, size, size, 3)), jnp.float32)
    p = jnp.asarray(np.random.default_rng(2).normal(size=(2, size * size)), jnp.float32)
    for g in G:
        np.testing.assert_array_equal(transform_planes(transform_planes(x, g), inverse(g)), x)
        np.testing.assert_array_equal(
            transform_policy(transform_policy(p, g, size), inverse(g), size), p)
        np.testing.assert_array_equal(transform_planes(transform_planes(x, inverse(g)), g), x)
    # Works on int arrays (and numpy ints) too.
    np.testing.assert_array_equal(inverse(jnp.arange(8)), [inverse(g) for g in G])
    assert int(inverse(np.int32(1))) == inverse(1) == 3


@pytest.mark.parametrize("size", SIZES)
def test_planes_and_policies_agree(size):
    """transform_planes of a one-hot plane == transform_policy of the one-hot policy,
    for every point and every g."""
    a = size * size
    eye = jnp.eye(a, dtype=jnp.float32)
    planes = eye.reshape(a, size, size, 1)
    for g in G:
        via_planes = transform_planes(planes, g).reshape(a, a)
        via_policy = transform_policy(eye, g, size)
        np.testing.assert_array_equal(via_planes, via_policy)


def test_policy_of_transformed_planes_for_an_equivariant_map():
    """The docstring's identity, for a trivially equivariant 'net' (logits = 2*X - Y)."""
    size = 6
    x = jnp.asarray(np.random.default_rng(3).normal(size=(4, size, size, 3)), jnp.float32)
    policy_of = lambda planes: (2 * planes[..., 0] - planes[..., 1]).reshape(
        *planes.shape[:-3], -1)
    for g in G:
        np.testing.assert_array_equal(
            policy_of(transform_planes(x, g)), transform_policy(policy_of(x), g, size))


def test_non_square_planes_are_rejected():
    with pytest.raises(ValueError, match="square"):
        transform_planes(jnp.zeros((5, 6, 3)), 1)


def test_batched_g_under_jit_and_vmap():
    size = 5
    rng = np.random.default_rng(4)
    x = rng.normal(size=(16, size, size, 3)).astype(np.float32)
    p = rng.normal(size=(16, size * size)).astype(np.float32)
    gs = rng.integers(0, 8, size=16).astype(np.int32)
    planes = jax.jit(jax.vmap(transform_planes))(x, gs)
    policy = jax.jit(jax.vmap(functools.partial(transform_policy, size=size)))(p, gs)
    back = jax.jit(jax.vmap(lambda y, g: transform_planes(y, inverse(g))))(planes, gs)
    traced = jax.jit(transform_planes)
    x, p, gs, planes, policy = map(np.asarray, (x, p, gs, planes, policy))
    for b in range(16):
        g = int(gs[b])
        np.testing.assert_array_equal(planes[b], transform_planes(x[b], g))
        np.testing.assert_array_equal(policy[b], transform_policy(p[b], g, size))
        np.testing.assert_array_equal(traced(x[b], gs[b]), planes[b])
    np.testing.assert_array_equal(back, x)


def test_random_symmetry():
    draw = jax.jit(random_symmetry, static_argnums=1)
    gs = draw(jax.random.key(0), (4000,))
    assert gs.dtype == jnp.int32 and gs.shape == (4000,)
    counts = np.bincount(np.asarray(gs), minlength=8)
    assert counts.shape == (8,) and counts.min() > 400
    np.testing.assert_array_equal(gs, draw(jax.random.key(0), (4000,)))
    assert not np.array_equal(gs, draw(jax.random.key(1), (4000,)))


# --------------------------------------------------------------------------
# The rules commute with the symmetries.

GAME_SIZE = 7


@functools.cache
def play_eight():
    """jit(vmap over 8 games of a scan of plies): int32[8, T] -> per ply obs,
    legal mask, winner, done."""
    rules = Rules(GAME_SIZE)

    def game(actions):
        def body(state, action):
            state = rules.step(state, action)
            return state, (rules.observe(state), rules.legal_mask(state), state.winner,
                           state.done)

        return jax.lax.scan(body, rules.init(), actions)[1]

    def transformed(views, g):
        obs, legal, winner, done = views
        return (jax.vmap(transform_planes, in_axes=(0, None))(obs, g),
                transform_policy(legal, g, GAME_SIZE), winner, done)

    def run(actions):
        views = jax.vmap(game)(actions)
        base = jax.tree.map(lambda v: v[0], views)  # game 0 is the untransformed one
        want = jax.vmap(transformed, in_axes=(None, 0))(base, jnp.arange(8))
        return views, want

    return jax.jit(run)


@settings(max_examples=25, deadline=None)
@given(order=st.permutations(range(GAME_SIZE * GAME_SIZE)),
       cut=st.integers(5, GAME_SIZE * GAME_SIZE))
def test_observation_of_transformed_game_is_transformed_observation(order, cut):
    """Play the game and its 8 images (moves mapped point by point); at every ply
    the observations and legal masks are the transformed ones, and the game
    outcome is the same."""
    a = GAME_SIZE * GAME_SIZE
    # Unused plies get an off-board action: a no-op that only sets ``illegal``.
    moves = np.full(a, -1, np.int32)
    moves[:cut] = order[:cut]
    perm = permutations(GAME_SIZE)
    # Point p of the original board lands on the point q with perm[g][q] == p.
    where = np.stack([np.argsort(perm[g]) for g in G])
    actions = np.stack([np.where(moves >= 0, where[g][np.maximum(moves, 0)], -1) for g in G])
    views, want = jax.device_get(play_eight()(actions))
    for got_v, want_v, name in zip(views, want, ["obs", "legal", "winner", "done"],
                                   strict=True):
        np.testing.assert_array_equal(got_v, want_v, err_msg=name)


def test_transformed_move_is_where_the_stone_lands():
    """Sanity check of the move mapping used above, on one stone."""
    size = 5
    perm = permutations(size)
    for g, p in itertools.product(G, range(size * size)):
        q = int(np.argsort(perm[g])[p])
        assert int(perm[inverse(g)][p]) == q
        onehot = np.zeros(size * size, np.float32)
        onehot[p] = 1
        assert int(np.argmax(transform_policy(onehot, g, size))) == q


# --------------------------------------------------------------------------
# Points, host vectors and positions in a symmetry's frame (the engine's trees).


@pytest.mark.parametrize("size", SIZES)
def test_a_point_mapped_and_mapped_back_is_itself(size):
    perm = permutations(size)
    for g, p in itertools.product(G, range(size * size)):
        q = transform_point(p, g, size)
        assert int(perm[g][q]) == p  # the frame holds the position's point perm[g][q] at q
        assert transform_point(q, inverse(g), size) == p
        onehot = np.zeros(size * size, np.float32)
        onehot[p] = 1
        assert int(np.argmax(transform_policy(onehot, g, size))) == q
    assert all(transform_point(-1, g, size) == -1 for g in G)


@pytest.mark.parametrize("size", SIZES)
def test_untransform_policy_undoes_transform_policy(size):
    x = np.random.default_rng(5).normal(size=(3, size * size)).astype(np.float32)
    for g in G:
        there = np.asarray(transform_policy(x, g, size))
        back = untransform_policy(there, g, size)
        assert back.dtype == x.dtype
        np.testing.assert_array_equal(back, x)
        np.testing.assert_array_equal(np.asarray(transform_policy(untransform_policy(x, g, size),
                                                                  g, size)), x)
        np.testing.assert_array_equal(untransform_policy(x[0], g, size),
                                      untransform_policy(x, g, size)[0])


def test_transformed_states_are_the_transformed_game():
    """A position in g's frame is the game played with every move mapped by g,
    and its board is transform_policy of the board, for all 8 symmetries;
    batched positions map row by row, and g == 0 changes nothing."""
    size = GAME_SIZE
    rules = Rules(size)
    step = jax.jit(lambda state, action: rules.step(state, action))
    moves = [24, 17, 3, 40, 25, 11]

    def played(actions):
        state = rules.init()
        for a in actions:
            state = step(state, jnp.int32(a))
        return state

    state = played(moves)
    assert transform_states(state, 0, size) is state
    for g in G:
        got = transform_states(state, g, size)
        want = played([transform_point(a, g, size) for a in moves])
        for field in state._fields:
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field),
                                          err_msg=f"{field}, g={g}")
        np.testing.assert_array_equal(got.board, transform_policy(state.board, g, size))
    start = transform_states(rules.init(), 3, size)  # no last move: -1 stays -1
    assert int(start.last_action) == -1
    batch = jax.tree.map(lambda *x: jnp.stack(x), state, played(moves[:3]))
    for g in G:
        got = transform_states(batch, g, size)
        for b in range(2):
            row = transform_states(jax.tree.map(lambda x, b=b: x[b], batch), g, size)
            for field in state._fields:
                np.testing.assert_array_equal(getattr(got, field)[b], getattr(row, field))
