"""``search.packed``: a search tree's positions in two arrays hold every field
of ``gomoku.State`` exactly (its values and dtypes), on any batch shape, as jax
or numpy arrays (a searched tree's positions: tests/test_search.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from agz_jax.game.gomoku import Rules, State
from agz_jax.search.packed import Packed, pack, unpack


def random_states(rules: Rules, seed: int, count: int, plies: int) -> State:
    """``count`` states after up to ``plies`` random legal moves, with random
    ranks (values across every field's range: -1 actions, winners, done)."""
    rng = np.random.default_rng(seed)
    step = jax.jit(rules.step)
    states = []
    for _ in range(count):
        state = rules.init()._replace(rank=jnp.int32(rng.integers(0, 9)))
        for _ in range(rng.integers(0, plies + 1)):
            if bool(state.done):
                break
            empty = np.flatnonzero(np.asarray(state.board) == 0)
            state = step(state, jnp.int32(rng.choice(empty)))
        states.append(state)
    return jax.tree.map(lambda *x: jnp.stack(x), *states)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16), size=st.sampled_from([5, 7, 15]))
def test_pack_then_unpack_is_the_state_exactly(seed, size):
    rules = Rules(size)
    states = random_states(rules, seed, 4, size * size)
    packed = pack(states)
    assert len(jax.tree.leaves(packed)) == 2
    back = unpack(packed)
    for name, want in states._asdict().items():
        got = getattr(back, name)
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)
        # The packed form reads like a State, field by field, on the host too.
        host = jax.tree.map(np.asarray, packed)
        np.testing.assert_array_equal(getattr(host, name), np.asarray(want), err_msg=name)


def test_done_and_a_won_game_survive_the_packing():
    rules = Rules(5)
    state = rules.init()
    step = jax.jit(rules.step)
    for a in (0, 5, 1, 6, 2, 7, 3, 8, 4):  # black's five on the first row
        state = step(state, jnp.int32(a))
    assert bool(state.done) and int(state.winner) == 0
    back = unpack(pack(state))
    assert bool(back.done) and int(back.winner) == 0 and int(back.last_action) == 4


def test_any_batch_shape_and_a_state_passes_through():
    rules = Rules(7)
    states = random_states(rules, 3, 6, 20)
    grid = jax.tree.map(lambda x: x.reshape(2, 3, *x.shape[1:]), states)
    packed = pack(grid)
    assert packed.shorts.shape == (2, 3, 2 * 49 + 2) and packed.words.shape == (2, 3, 5)
    np.testing.assert_array_equal(np.asarray(packed.board), np.asarray(grid.board))
    assert unpack(states) is states
    assert isinstance(jax.tree.map(lambda x: x[0], packed), Packed)
