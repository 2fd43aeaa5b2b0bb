"""Double Networks routed by colour (``agz_jax.nets.routing``): every position meets
its own net, whatever the mix of colours, under ``jit`` and ``vmap``, and each
branch costs what it should.

Most tests use a stand-in for the nets whose outputs name the net and the
position that made them, so that a position sent to the wrong net, or a result
put back at the wrong place, shows exactly; one test checks real nets against
both nets on every position (``routing.plain``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agz_jax.nets import routing
from tests.test_networks import random_obs, small_networks

ROUTED = True  # the routed path itself (tests/conftest.py plains it elsewhere)

NETS = {"id": jnp.asarray([0.0, 1.0])}
"""The stand-in's two "nets": net n's outputs carry n."""


def marked(variables, obs, to_play):
    """The stand-in net: logits [N, 2] = (its id, the position's number), value =
    its id + 10 x the position's colour, so a correct result has value 11 x colour."""
    del to_play
    n = obs.shape[0]
    logits = jnp.stack([jnp.broadcast_to(variables["id"], (n,)), obs[:, 0]], axis=-1)
    return logits, variables["id"] + 10.0 * obs[:, 1]


def inputs(to_play):
    """obs [B, 2] = (position number, colour) for ``to_play``."""
    to_play = np.asarray(to_play, np.int32)
    return np.stack([np.arange(len(to_play)), to_play], -1).astype(np.float32), to_play


def route(blocks: int):
    return jax.jit(lambda obs, tp: routing.by_colour(marked, NETS, obs, tp, blocks=blocks))


def check(out, to_play):
    logits, value = np.asarray(out[0]), np.asarray(out[1])
    np.testing.assert_array_equal(logits[:, 0], to_play)  # its own colour's net
    np.testing.assert_array_equal(logits[:, 1], np.arange(len(to_play)))  # back in place
    np.testing.assert_array_equal(value, 11.0 * to_play)


BRANCH = jax.jit(routing.branch, static_argnums=1)


def expected_branch(to_play, blocks: int) -> int:
    """Plain Python: one colour -> 0; else the first capacity that holds each
    block's larger colour -> 1 + its index; else both nets on everything."""
    to_play = list(to_play)
    if len(set(to_play)) == 1:
        return 0
    block = len(to_play) // blocks
    need = max(max(part.count(0), part.count(1))
               for part in (to_play[i * block:(i + 1) * block] for i in range(blocks)))
    caps = routing.capacities(block)
    return 1 + next((i for i, k in enumerate(caps) if need <= k), len(caps))


@pytest.mark.parametrize(("size", "blocks"), [
    (1, 1), (2, 1), pytest.param(7, 1, marks=pytest.mark.long),
    pytest.param(16, 1, marks=pytest.mark.long), (16, 4),
    pytest.param(64, 1, marks=pytest.mark.long)])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_every_position_meets_its_own_net(size, blocks, data):
    whites = data.draw(st.integers(0, size))
    order = data.draw(st.permutations(range(size)))
    to_play = np.zeros(size, np.int32)
    to_play[list(order)[:whites]] = 1
    obs, to_play = inputs(to_play)
    check(route(blocks)(obs, to_play), to_play)
    assert int(BRANCH(to_play, blocks)) == expected_branch(to_play, blocks)


def test_capacities_are_the_fractions_of_a_block_below_it():
    assert routing.capacities(64) == (36, 40, 48)
    assert routing.capacities(8) == (5, 6)
    assert routing.capacities(3) == (2,)
    assert routing.capacities(2) == ()  # 2 of 2 is the whole block
    assert routing.capacities(1) == ()
    for block in range(1, 200):
        caps = routing.capacities(block)
        assert all(math.ceil(block / 2) <= k < block for k in caps)


def net_batches(size: int) -> list[int]:
    """The batch sizes the stand-in nets are called with, over every branch of
    one routed call of ``size`` positions (recorded while it is traced)."""
    seen = []

    def recording(variables, obs, to_play):
        seen.append(obs.shape[0])
        return marked(variables, obs, to_play)

    obs, to_play = inputs(np.arange(size) % 2)
    jax.jit(lambda o, t: routing.by_colour(recording, NETS, o, t)).lower(obs, to_play)
    return seen


def test_each_branch_runs_the_nets_on_its_share_only():
    # one colour: one net on all 64; routed: each net on 36, 40 or 48; too
    # uneven for those: both nets on all 64.
    assert net_batches(64) == [64, 36, 36, 40, 40, 48, 48, 64, 64]
    assert net_batches(1) == [1, 1, 1]


def test_blocks_that_do_not_divide_the_batch_fall_back_to_one():
    obs, to_play = inputs([0, 1, 1, 0, 1, 0, 0])
    check(route(2)(obs, to_play), to_play)


def test_vmapped_over_positions_it_routes_the_flat_batch():
    to_play = np.asarray([[0, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0]], np.int32)
    obs = np.stack([inputs(row)[0] for row in to_play])
    f = jax.vmap(lambda o, t: routing.by_colour(marked, NETS, o, t))
    out = jax.jit(f)(obs, to_play)
    for row in range(3):
        check((out[0][row], out[1][row]), to_play[row])
    # One switch routes the 12 positions as one batch (vmap of a switch with a
    # batched index would have run every branch on the [3, 4] rows instead).
    text = str(jax.make_jaxpr(f)(obs, to_play))
    assert text.count("cond[") == 1 and "f32[12,2]" in text


def test_vmapped_nets_fall_back_to_both_nets_on_every_position():
    to_play = np.asarray([[0, 1, 1, 0], [1, 1, 1, 0]], np.int32)
    obs = np.stack([inputs(row)[0] for row in to_play])
    nets = {"id": jnp.asarray([[0.0, 1.0], [0.0, 1.0]])}
    f = jax.vmap(lambda v, o, t: routing.by_colour(marked, v, o, t))
    out = jax.jit(f)(nets, obs, to_play)
    for row in range(2):
        check((out[0][row], out[1][row]), to_play[row])
    assert "cond[" not in str(jax.make_jaxpr(f)(nets, obs, to_play))


@pytest.mark.parametrize("whites", [0, pytest.param(1, marks=pytest.mark.long), 3,
                                    pytest.param(5, marks=pytest.mark.long), 6])
def test_real_nets_routed_equal_both_nets_on_every_position(whites):
    nets, variables = small_networks(2)
    obs = random_obs(11, 6, 5)
    to_play = np.zeros(6, np.int32)
    to_play[np.random.default_rng(whites).permutation(6)[:whites]] = 1
    routed = jax.jit(nets.evaluate)(variables, obs, to_play)
    plain = jax.jit(lambda v, o, t: nets.evaluate(v, o, t, route=False))(variables, obs, to_play)
    for got, want in zip(routed, plain, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_inside_a_cond_vmapped_with_a_batched_predicate():
    # Such a cond broadcasts every operand, the nets' constants included.
    to_play = np.asarray([[0, 1, 1, 0], [1, 1, 1, 0]], np.int32)
    obs = np.stack([inputs(row)[0] for row in to_play])
    zero = np.zeros(1, np.float32)

    def with_a_constant(variables, obs, to_play):
        logits, value = marked(variables, obs, to_play)
        return logits, value + jnp.asarray(zero)[0]

    def f(p, o, t):
        return jax.lax.cond(p, lambda: routing.by_colour(with_a_constant, NETS, o, t),
                            lambda: (jnp.zeros((4, 2)), jnp.zeros(4)))

    out = jax.jit(jax.vmap(f))(np.asarray([True, True]), obs, to_play)
    for row in range(2):
        check((out[0][row], out[1][row]), to_play[row])


def per_net(variables):
    return routing.PerNet(jax.tree.map(lambda v, n=n: v[n], variables) for n in range(2))


@pytest.mark.parametrize(("size", "blocks"), [(1, 1), (2, 1), (7, 1), (16, 4)])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_each_nets_own_variables_route_as_the_stacked_ones(size, blocks, data):
    """``PerNet`` (``networks.split``: each net's variables, which a search's
    loop is given so that no weights are copied per evaluation) gives every
    position its own colour's net, as stacked variables do."""
    whites = data.draw(st.integers(0, size))
    to_play = np.asarray(data.draw(st.permutations([1] * whites + [0] * (size - whites))),
                         np.int32)
    obs, to_play = inputs(to_play)
    got = jax.jit(lambda obs, tp: routing.by_colour(marked, per_net(NETS), obs, tp,
                                                    blocks=blocks))(obs, to_play)
    check(got, to_play)


def test_real_nets_split_equal_the_stacked_ones(whites=2):
    from agz_jax.nets.networks import split, unstack

    nets, variables = small_networks(2)
    obs = random_obs(11, 6, 5)
    to_play = np.zeros(6, np.int32)
    to_play[np.random.default_rng(whites).permutation(6)[:whites]] = 1
    pieces = split(variables)
    assert isinstance(pieces, routing.PerNet) and len(pieces) == 2 and split(pieces) is pieces
    for got, want in zip(jax.tree.leaves(pieces[1]), jax.tree.leaves(unstack(variables, 1)),
                         strict=True):
        np.testing.assert_array_equal(got, want)
    stacked = jax.jit(nets.evaluate)(variables, obs, to_play)
    each = jax.jit(nets.evaluate)(pieces, obs, to_play)
    for got, want in zip(each, stacked, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    one = jax.jit(lambda v, o, t: nets.evaluate(v, o, t, dtype=jnp.bfloat16))(pieces, obs, to_play)
    assert one[0].dtype == jnp.float32 and one[0].shape == stacked[0].shape
