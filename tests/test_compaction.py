"""``compaction.map_where``: a row-wise function on the rows that need it only
gives ``jax.vmap``'s bits there and zeros elsewhere, for every count of needed
rows (each number of chunks of its loop), under ``jit``, ``vmap`` and ``scan``;
and it computes the function on the chunks the needed rows fill, and no more."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agz_jax.base import compaction
from agz_jax.game.gomoku import Rules, stone
from agz_jax.game.tactics import four_three_answers, four_three_points, threat_answers

TABLE = np.arange(7, dtype=np.int32) * 3
"""A constant the function reads, as the tactics read their tables."""


def row_fn(x, y):
    """A row-wise function of two arguments with a pytree output."""
    return {"sum": x * 2 + y[0], "table": jnp.asarray(TABLE)[jnp.abs(x[0]) % 7]}


def want(needed, x, y):
    out = jax.vmap(row_fn)(x, y)
    return {k: np.where(np.asarray(needed).reshape(-1, *([1] * (v.ndim - 1))), v, 0)
            for k, v in out.items()}


def assert_equal(got, expected):
    for k in expected:
        np.testing.assert_array_equal(np.asarray(got[k]), expected[k])


@pytest.mark.parametrize("size", [1, 3, pytest.param(16, marks=pytest.mark.long),
                                  pytest.param(64, marks=pytest.mark.long)])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_the_needed_rows_get_vmaps_bits_the_others_zeros(size, data):
    count = data.draw(st.integers(0, size))
    order = data.draw(st.permutations(range(size)))
    needed = np.zeros(size, bool)
    needed[list(order)[:count]] = True
    rng = np.random.default_rng(count)
    x = rng.integers(-50, 50, (size, 3)).astype(np.int32)
    y = rng.integers(-50, 50, (size, 2)).astype(np.int32)
    f = jax.jit(lambda n, a, b: compaction.map_where(row_fn, n, a, b))
    assert_equal(f(needed, x, y), want(needed, x, y))


def test_capacities_are_the_fractions_below_the_batch():
    fractions = (0.125, 0.25, 0.5)
    assert compaction.capacities(64, fractions) == (8, 16, 32)
    assert compaction.capacities(3, fractions) == (1, 2)
    assert compaction.capacities(1, fractions) == ()


def test_chunks_are_an_eighth_of_the_batch_at_least_one_row():
    assert compaction.chunk_size(64) == 8
    assert compaction.chunk_size(65) == 9
    assert compaction.chunk_size(4) == compaction.chunk_size(1) == 1


def test_the_function_is_traced_once_at_the_chunks_size():
    seen = []

    def recording(x):
        seen.append(x.shape)  # traced per row under vmap
        return x + 1

    x = np.zeros((64, 2), np.int32)
    text = str(jax.make_jaxpr(lambda n, a: compaction.map_where(recording, n, a))(
        np.ones(64, bool), x))
    assert len(seen) == 2  # eval_shape of one row, then the chunk's vmap
    assert "i32[8,2]" in text
    for rows in (16, 32):
        assert f"i32[{rows},2]" not in text


@pytest.mark.parametrize("count", [0, 1, 8, 9, 61])
def test_only_the_chunks_the_needed_rows_fill_are_computed(count):
    computed = []

    def counting(x):
        jax.debug.callback(lambda v: computed.append(np.size(v)), x[0])
        return x + 1

    needed = np.zeros(64, bool)
    needed[np.random.default_rng(count).permutation(64)[:count]] = True
    x = np.arange(128, dtype=np.int32).reshape(64, 2)
    got = jax.jit(lambda n, a: compaction.map_where(counting, n, a))(needed, x)
    jax.effects_barrier()
    np.testing.assert_array_equal(np.asarray(got), np.where(needed[:, None], x + 1, 0))
    assert sum(computed) == -(-count // 8) * 8  # whole chunks of 8 rows


@pytest.mark.parametrize("needed", [False, True])
def test_one_row_is_a_branch_not_a_loop(needed):
    """A batch of one row (a one-position search) takes a ``cond``: the function
    computed only where the row needs it, and no loop over chunks."""
    computed = []

    def counting(x):
        jax.debug.callback(lambda v: computed.append(np.size(v)), x[0])
        return x + 1

    x = np.array([[3, 4]], np.int32)
    f = lambda n, a: compaction.map_where(counting, n, a)  # noqa: E731
    text = str(jax.make_jaxpr(f)(np.array([needed]), x))
    assert "cond[" in text and "while[" not in text
    got = jax.jit(f)(np.array([needed]), x)
    jax.effects_barrier()
    np.testing.assert_array_equal(np.asarray(got), x + 1 if needed else 0 * x)
    assert sum(computed) == int(needed)


def test_vmapped_it_is_one_batch_of_all_rows():
    rng = np.random.default_rng(0)
    needed = rng.random((3, 8)) < 0.3
    x = rng.integers(-50, 50, (3, 8, 3)).astype(np.int32)
    y = rng.integers(-50, 50, (8, 2)).astype(np.int32)  # shared by the rows of the vmap
    f = jax.vmap(lambda n, a: compaction.map_where(row_fn, n, a, y))
    got = jax.jit(f)(needed, x)
    for s in range(3):
        assert_equal({k: v[s] for k, v in got.items()}, want(needed[s], x[s], y))
    text = str(jax.make_jaxpr(f)(needed, x))
    assert text.count("while[") == 1 and "bool[24]" in text  # one loop over 24 rows


def test_vmapped_inside_a_scan():
    needed = np.asarray([[True, False, False, True], [False, False, True, False]])
    x = np.arange(24, dtype=np.int32).reshape(2, 4, 3)
    y = np.ones((2, 4, 2), np.int32)

    def f(n, a, b):
        def body(c, _):
            out = compaction.map_where(row_fn, n, a + c, b)
            return c + out["sum"][0, 0] * 0, out

        return jax.lax.scan(body, 0, None, length=2)[1]

    got = jax.jit(jax.vmap(f))(needed, x, y)
    for s in range(2):
        assert_equal({k: v[s, 1] for k, v in got.items()}, want(needed[s], x[s], y[s]))


def random_boards(size: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Boards int8[n, size*size] with 6..40 stones, clustered in the centre so that
    threats are common, and the colour to move of each."""
    rng = np.random.default_rng(seed)
    boards = np.zeros((n, size * size), np.int8)
    centre = np.array([size // 2, size // 2])
    for i in range(n):
        k = rng.integers(6, 40)
        pts = np.clip(np.round(rng.normal(centre, 2.5, (k, 2))), 0, size - 1).astype(int)
        for j, (r, c) in enumerate(pts):
            boards[i, r * size + c] = 1 if j % 2 == 0 else -1
    return boards, (np.sum(boards != 0, axis=1) % 2).astype(np.int32)


def test_tactics_read_where_needed_equal_tactics_read_everywhere():
    rules = Rules(15)
    boards, to_play = random_boards(15, 64, 5)
    me = stone(jnp.asarray(to_play))
    five_points = jax.jit(jax.vmap(rules.new_five_points))  # one program for both colours
    mine, theirs = five_points(boards, me), five_points(boards, -me)
    threats = jax.jit(jax.vmap(lambda b, m, t: four_three_points(rules, b, -m, t)))(
        boards, me, theirs)
    cases = [
        (lambda b, m, mi, t: threat_answers(rules, b, m, mi, t),
         jnp.any(theirs >= 2, axis=-1), (boards, me, mine, theirs)),
        (lambda b, m, t: four_three_points(rules, b, -m, t),
         jnp.any(theirs >= 1, axis=-1), (boards, me, theirs)),
        (lambda b, m, mi, t: four_three_answers(rules, b, m, mi, t),
         jnp.any(threats, axis=-1), (boards, me, mine, threats)),
    ]
    for fn, needed, args in cases:
        assert 0 < int(jnp.sum(needed)) < 64  # some rows need it, some do not
        everywhere = jax.jit(jax.vmap(fn))(*args)
        got = jax.jit(lambda n, *a, fn=fn: compaction.map_where(fn, n, *a))(needed, *args)
        np.testing.assert_array_equal(np.asarray(got),
                                      np.where(np.asarray(needed)[:, None], everywhere, False))


def test_inside_a_cond_vmapped_with_a_batched_predicate():
    # Such a cond broadcasts every operand, the function's constants included
    # (``with_vmap_rule`` passes them as arguments; custom_vmap refuses them
    # batched), and then computes both branches.
    needed = np.asarray([[True, False, True], [False, True, False]])
    x = np.arange(18, dtype=np.int32).reshape(2, 3, 3)
    y = np.ones((2, 3, 2), np.int32)

    def f(p, n, a, b):
        return jax.lax.cond(p, lambda: compaction.map_where(row_fn, n, a, b),
                            lambda: {"sum": jnp.zeros((3, 3), jnp.int32),
                                     "table": jnp.zeros(3, jnp.int32)})

    got = jax.jit(jax.vmap(f))(np.asarray([True, True]), needed, x, y)
    for s in range(2):
        assert_equal({k: v[s] for k, v in got.items()}, want(needed[s], x[s], y[s]))


_FIRST_TRUE = {}


def _first_true_jitted(n: int, k: int):
    """One compiled ``first_true`` and ``top_k`` pair per (n, k)."""
    if (n, k) not in _FIRST_TRUE:
        _FIRST_TRUE[n, k] = jax.jit(lambda m: (
            compaction.first_true(m, k), jax.lax.top_k(m.astype(jnp.int32), k)[1]))
    return _FIRST_TRUE[n, k]


@pytest.mark.parametrize("n,k", [(1, 1), (5, 3), (81, 16), (225, 32), (361, 8)])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_first_true_is_top_k_of_the_mask(n, k, data):
    """The indices ``lax.top_k`` gives for a bool mask (True ones ascending,
    then False ones ascending), on masks from empty to full: the tactics'
    readings take the same points as with the sort they replaced."""
    bits = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    mask = jnp.asarray(bits)
    ours, sorted_ = _first_true_jitted(n, k)(mask)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(sorted_))
    true = [i for i, b in enumerate(bits) if b]
    assert np.asarray(ours).tolist() == (true + [i for i, b in enumerate(bits) if not b])[:k]


def test_first_true_vmapped_and_bad_shapes():
    masks = jax.random.bernoulli(jax.random.PRNGKey(0), 0.2, (6, 225))
    got = jax.vmap(lambda m: compaction.first_true(m, 12))(masks)
    want = jax.lax.top_k(masks.astype(jnp.int32), 12)[1]
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(ValueError, match="0 <= k <= n"):
        compaction.first_true(jnp.zeros(9, bool), 10)
