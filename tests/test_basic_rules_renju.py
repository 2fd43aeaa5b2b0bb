"""Stage 1's generated positions under renju, checked against the rules' own readers.

The generator reads threats with its own windows (``curriculum.threat_maps``)
and, under renju, exactly five for black, five or more for white, with black's
forbidden points masked. Here every valid position is read again with
``Rules(size, 'renju')``'s ``five_points`` / ``new_five_points`` and
``renju.forbidden`` on the whole board (each block played out on the board),
and the other rules' output is pinned: renju's branches must not change it.
"""

from __future__ import annotations

import hashlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference

from agz_jax.curriculum import basic_rules as br
from agz_jax.game import renju
from agz_jax.game.gomoku import Rules

SIZE = 15
N = 240
RULES = Rules(SIZE, "renju")
# dense noise near the pattern: black's forbidden points show up often
CFG = br.BasicRulesConfig(min_noise=6, max_noise=12, noise_radius=3, oversample=2.0)


def real_doubles(board, s):
    """bool[A]: D(s) by renju's reading: 2+ five points made at once, not forbidden."""
    barred = renju.forbidden(board) & (s == 1)
    return (RULES.new_five_points(board, s) >= 2) & ~barred


@jax.jit
@jax.vmap
def reading(board, colour):
    """The independent reading of one position (board int8[A], colour int32[])."""
    me = (1 - 2 * colour).astype(jnp.int32)
    a = board.shape[0]
    barred_me = renju.forbidden(board) & (me == 1)

    def after(m):  # A plays m: does B keep a D point?
        played = board.at[m].set(me.astype(board.dtype))
        return jnp.any(real_doubles(played, -me))

    return dict(
        win_me=RULES.five_points(board, me), win_opp=RULES.five_points(board, -me),
        dbl_me=real_doubles(board, me), dbl_opp=real_doubles(board, -me),
        barred_me=barred_me,
        barred_dbl=jnp.any(renju.forbidden(board) & (RULES.new_five_points(board, 1) >= 2)),
        blocks=(board == 0) & ~barred_me & ~jax.vmap(after)(jnp.arange(a)),
    )


@pytest.fixture(scope="module")
def positions():
    return br.generate_positions(RULES, jax.random.key(2), N, CFG)


@pytest.mark.long
def test_labels_by_renju_reading(positions):
    ex, st = positions.examples, positions.states
    valid = np.asarray(ex.valid)
    assert valid.mean() > 0.5
    kinds, colours = np.asarray(positions.kind)[valid], np.asarray(st.to_play)[valid]
    boards, policy = np.asarray(st.board)[valid], np.asarray(ex.policy)[valid]
    pad = -len(boards) % 64  # whole chunks of 64: one compile
    padded = [np.concatenate([x, x[:1].repeat(pad, 0)]) for x in (boards, colours)]
    chunks = [reading(jnp.asarray(padded[0][i:i + 64]), jnp.asarray(padded[1][i:i + 64]))
              for i in range(0, len(padded[0]), 64)]
    read = {k: np.concatenate([np.asarray(c[k]) for c in chunks])[:len(boards)] for k in chunks[0]}
    # black's forbidden points matter: some boards have a forbidden open four or double four
    assert read["barred_dbl"].sum() >= 5
    seen = set()
    for i in range(len(boards)):
        kind, colour, board = int(kinds[i]), int(colours[i]), boards[i]
        me = 1 - 2 * colour
        seen.add((kind, colour))
        # legal, and no five on the board by any reading (no run of five or more)
        assert (board == 1).sum() - (board == -1).sum() == colour
        grid = board.reshape(SIZE, SIZE).tolist()
        assert reference.longest_run(grid, 1) < 5 and reference.longest_run(grid, -1) < 5
        r = {k: v[i] for k, v in read.items()}
        marked = policy[i] > 0
        assert abs(policy[i].sum() - 1) < 1e-5
        assert not np.any(marked & r["barred_me"])  # A (black) may play every label point
        if kind == br.FOUR_ATTACK:
            expected = r["win_me"]
            assert expected.any()
        elif kind == br.FOUR_DEFENCE:
            assert not r["win_me"].any() and r["win_opp"].sum() == 1
            assert not r["dbl_me"].any()
            expected = r["win_opp"]
            assert np.all(r["blocks"][expected])  # the block holds for three plies
        elif kind == br.THREE_ATTACK:
            assert not r["win_me"].any() and not r["win_opp"].any()
            expected = r["dbl_me"]
            assert expected.any()
        else:
            assert not r["win_me"].any() and not r["win_opp"].any()
            assert not r["dbl_me"].any() and r["dbl_opp"].any()
            expected = r["blocks"]
            assert expected.any()
        np.testing.assert_array_equal(marked, expected, err_msg=f"position {i}, kind {kind}")
        if me == 1:
            assert not np.any(r["barred_me"] & r["win_me"])  # an exact five is never forbidden
    # every kind with either colour to move
    assert seen == {(k, c) for k in range(4) for c in (0, 1)}


def digest(positions) -> str:
    h = hashlib.sha256()
    for x in jax.tree.leaves(positions):
        h.update(np.asarray(x).tobytes())
    return h.hexdigest()


def test_other_rules_unchanged():
    """Freestyle and standard generation as before renju was read (pinned digests)."""
    cfg = br.BasicRulesConfig(colours="paper", policy="one_hot", noise_radius=3, max_noise=5,
                              oversample=1.5)
    free = br.generate_positions(Rules(9, "freestyle"), jax.random.key(3), 100)
    standard = br.generate_positions(Rules(9, "standard"), jax.random.key(3), 100, cfg)
    assert digest(free) == FREESTYLE_9
    assert digest(standard) == STANDARD_9


FREESTYLE_9 = "0ba0427e3875663186cc398a6a577e8b0c064fc1f418bc59643e0f8b6be30a29"
STANDARD_9 = "d62e70891fe4c8f30da4e1381335aada2c6298c054ccbcf55d78cb4305b0f74b"
