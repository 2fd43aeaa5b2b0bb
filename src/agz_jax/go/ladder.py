"""Ladder reading: which moves capture an enemy chain in a ladder (Maddison et
al. 2015, Table 1, "ladder move": "whether a move at this point is a successful
ladder capture").

A *ladder capture* is a move of the side to move (the attacker) that puts an
enemy chain with two liberties (the prey) in atari such that the prey cannot
escape however it answers, the attacker always answering with another atari.
``read`` decides one (move, prey) pair by a depth-first AND/OR search, the way
GnuGo's ``simple_ladder`` reads:

* the defender (prey in atari, one liberty) tries every option: extending on
  the liberty, and capturing each attacker chain in atari next to the prey (at
  most ``MAX_OPTIONS - 1`` of them). An option that leaves the prey with 3 or
  more liberties escapes; one that leaves it 1 is captured next move; with 2
  the attacker moves;
* the attacker (prey with two liberties) tries an atari on each of them.
  A move that leaves the prey more than one liberty fails;
* the prey is captured when every defender option fails somewhere below.

It is jit- and vmap-able: an explicit stack of boards (``depth`` frames) in a
``lax.while_loop`` that does one node per iteration, ``steps`` iterations at
most. A search that runs out of depth or steps counts as an escape, so a
ladder move is never claimed without a proof. Ko is ignored inside the search
(a ladder fought through a ko is rare), suicide is not.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from agz_jax.go.board import (
    OFF_BOARD,
    analyse,
    chain_liberties,
    neighbour_table,
    padded,
    place,
)

MAX_OPTIONS = 4
"""Options per node: the attacker's two ataris, or the defender's extension and
up to three captures."""


def default_depth(size: int) -> int:
    """Stack frames (plies) of one reading: a ladder crossing the whole board
    takes about ``4 * size`` plies."""
    return 4 * size + 4


def default_steps(size: int) -> int:
    """Search nodes of one reading: a ladder's wrong turn dies in two plies, so
    about three nodes per ply of the ladder."""
    return 12 * size + 16


class _Search(NamedTuple):
    boards: jax.Array  # int8[D, A]
    chains: jax.Array  # int16[D, A]
    options: jax.Array  # int32[D, MAX_OPTIONS]
    count: jax.Array  # int32[D]
    next: jax.Array  # int32[D]
    depth: jax.Array  # int32[]: the top frame (even: the attacker to move)
    pending: jax.Array  # int32[]: -1, or the value (1 captured) of the top's last child
    result: jax.Array  # int32[]: -1 while searching, else 0 escaped / 1 captured
    steps: jax.Array  # int32[]


def prey_options(size: int, board, chain, libs, prey, attacker_to_move):
    """(int32[MAX_OPTIONS] options padded with ``A``, int32[] how many): the
    prey's liberties (the attacker's ataris, or the defender's extension) and,
    for the defender, the liberty of each attacker chain in atari touching the
    prey (captures). ``libs`` is ``chain_liberties`` of the board."""
    a = size * size
    nbr = jnp.asarray(neighbour_table(size))
    chain32 = chain.astype(jnp.int32)
    prey_stones = (chain32 == chain32[prey]) & (board != 0)
    touches_prey = jnp.any(padded(prey_stones, False)[nbr], axis=1)
    empty = board == 0
    liberties = empty & touches_prey
    enemy = (board == -board[prey]) & (chain32 >= 0)
    in_atari = enemy & touches_prey & (libs[jnp.where(chain32 >= 0, chain32, a)] == 1)
    marked = jnp.zeros(a + 1, bool).at[jnp.where(in_atari, chain32, a)].set(True).at[a].set(False)
    captures = empty & jnp.any(marked[padded(chain32, a)[nbr]], axis=1)
    wanted = jnp.where(attacker_to_move, liberties, liberties | captures)
    options = jnp.nonzero(wanted, size=MAX_OPTIONS, fill_value=a)[0].astype(jnp.int32)
    return options, jnp.minimum(jnp.sum(wanted), MAX_OPTIONS).astype(jnp.int32)


def read(size: int, board, chain, attacker, move, prey, depth: int | None = None,
         steps=None, active=True) -> jax.Array:
    """bool[]: ``attacker`` (+1/-1) playing ``move`` captures the chain through
    ``prey`` (a point of it) in a ladder. False when ``move`` is illegal or does
    not put the prey in atari, and when the reading is cut off (see module):
    ``depth`` (static) frames, ``steps`` (an int or int32[]) nodes. An inactive
    reading (``active`` False) does nothing and says no.

    The search starts from an attacker frame whose only option is ``move``.
    """
    a = size * size
    depth = default_depth(size) if depth is None else depth
    steps = default_steps(size) if steps is None else steps
    attacker = jnp.asarray(attacker, jnp.int8)
    move, prey = jnp.asarray(move, jnp.int32), jnp.asarray(prey, jnp.int32)
    first = jnp.full(MAX_OPTIONS, a, jnp.int32).at[0].set(move)
    s = _Search(
        boards=jnp.zeros((depth, a), jnp.int8).at[0].set(board),
        chains=jnp.zeros((depth, a), jnp.int16).at[0].set(chain),
        options=jnp.zeros((depth, MAX_OPTIONS), jnp.int32).at[0].set(first),
        count=jnp.zeros(depth, jnp.int32).at[0].set(1),
        next=jnp.zeros(depth, jnp.int32),
        depth=jnp.int32(0), pending=jnp.int32(-1),
        result=jnp.where(active & (board[prey] == -attacker), -1, 0).astype(jnp.int32),
        steps=jnp.int32(0))

    def body(s: _Search) -> _Search:
        d = s.depth
        attacking = d % 2 == 0
        mover = jnp.where(attacking, attacker, -attacker)
        # a pending child value decides the top frame when it is what its mover
        # wanted (a capture for the attacker, an escape for the defender) ...
        wanted = attacking.astype(jnp.int32)
        settle = s.pending == wanted
        # ... else the top frame tries its next option, or is exhausted
        i = s.next[d]
        exhaust = ~settle & (i >= s.count[d])
        trying = ~settle & ~exhaust
        m = s.options[d, jnp.minimum(i, MAX_OPTIONS - 1)]
        row = jax.tree.map(lambda x: x[0], analyse(
            size, s.boards[d], s.chains[d], mover, jnp.int32(-1), m[None], hashes=False))
        board, chain, _, _ = place(size, s.boards[d], s.chains[d], mover, m, row)
        libs = chain_liberties(size, board, chain)
        prey_libs = libs[chain[prey].astype(jnp.int32)]
        # the child's value when it needs no search (-1 when it does)
        if_attacked = jnp.where(row.legal & (prey_libs == 1), -1, 0)
        if_defended = jnp.where(~row.legal | (prey_libs == 1), 1,
                                jnp.where(prey_libs >= 3, 0, -1))
        static = jnp.where(attacking, if_attacked, if_defended)
        static = jnp.where((static < 0) & (d + 1 >= depth), 0, static)  # out of depth
        push = trying & (static < 0)
        options, count = prey_options(size, board, chain, libs, prey, ~attacking)
        # pop (settled or exhausted: an exhausted attacker frame failed, an
        # exhausted defender frame was captured), push, or record a leaf value
        pop = settle | exhaust
        value = jnp.where(settle, wanted, (~attacking).astype(jnp.int32))
        root = d == 0
        up = jnp.minimum(d + 1, depth - 1)

        def write(stack, item):
            return stack.at[up].set(jnp.where(push, item, stack[up]))

        nxt = write(s.next, 0).at[d].add(trying.astype(jnp.int32))
        return _Search(
            boards=write(s.boards, board), chains=write(s.chains, chain),
            options=write(s.options, options), count=write(s.count, count), next=nxt,
            depth=jnp.where(pop, jnp.maximum(d - 1, 0), jnp.where(push, up, d)),
            pending=jnp.where(pop, jnp.where(root, -1, value),
                              jnp.where(trying & ~push, static, -1)).astype(jnp.int32),
            result=jnp.where(pop & root, value, s.result).astype(jnp.int32),
            steps=s.steps + 1)

    s = jax.lax.while_loop(lambda s: (s.result < 0) & (s.steps < steps), body, s)
    return s.result == 1


def candidates(size: int, board, chain, attacker, legal, limit: int):
    """(moves int32[limit], preys int32[limit], valid bool[limit]): the first
    ``limit`` (legal move, enemy chain with two liberties next to it) pairs, in
    board order, one per chain and move."""
    a = size * size
    nbr = jnp.asarray(neighbour_table(size))
    ids = padded(chain.astype(jnp.int32), a)[nbr]  # [A, 4]
    libs = chain_liberties(size, board, chain)[ids]
    earlier = jnp.tril(jnp.ones((4, 4), bool), k=-1)
    first = ~jnp.any((ids[:, :, None] == ids[:, None, :]) & earlier, axis=-1)
    enemy = padded(board, 0)[nbr] == -attacker
    pairs = (enemy & (libs == 2) & first & legal[:, None]).reshape(-1)
    flat = jnp.nonzero(pairs, size=limit, fill_value=0)[0]
    valid = jnp.arange(limit) < jnp.sum(pairs)
    return (flat // 4).astype(jnp.int32), nbr.reshape(-1)[flat], valid


def ladder_moves(size: int, board, chain, attacker, legal, limit: int = 8,
                 depth: int | None = None, steps: int | None = None) -> jax.Array:
    """bool[A]: the legal moves of ``attacker`` that capture a chain in a ladder
    (``read`` of each of the first ``limit`` candidate pairs; later ones are
    not read and count as no ladder)."""
    moves, preys, valid = candidates(size, board, chain, attacker, legal, limit)
    reader = functools.partial(read, size, board, chain, attacker, depth=depth, steps=steps)
    works = jax.vmap(reader)(moves, preys, active=valid) & valid
    return jnp.zeros(size * size, bool).at[moves].max(works)


def doomed_extensions(size: int, board, chain, me, ko=-1, limit: int = 4, depth: int | None = None,
                      steps: int | None = None) -> jax.Array:
    """bool[A]: the points where a stone of ``me`` (+1/-1) extends one of its
    chains in atari (on that chain's last liberty) and the chain is caught all
    the same: after the stone it has one liberty, or two and the opponent
    captures it in a ladder by an atari on either (``read``). Extending there
    runs a ladder out to its end, which a net without the ladder plane does
    and loses the chain bigger (``go.gtp_engine``'s guard). The first
    ``limit`` such points in board order are read; a reading cut off says the
    chain escapes, so a point is never marked without a proof."""
    a = size * size
    me = jnp.asarray(me, jnp.int8)
    nbr = jnp.asarray(neighbour_table(size))
    libs = chain_liberties(size, board, chain)
    ids = padded(chain.astype(jnp.int32), a)[nbr]
    beside = (padded(board, OFF_BOARD)[nbr] == me) & (libs[ids] == 1)
    escape = (board == 0) & jnp.any(beside, axis=1)
    points = jnp.nonzero(escape, size=limit, fill_value=0)[0].astype(jnp.int32)
    valid = jnp.arange(limit) < jnp.sum(escape)

    def one(p, active):
        row = jax.tree.map(lambda x: x[0], analyse(size, board, chain, me, jnp.int32(ko),
                                                  p[None], hashes=False))
        after, after_chain, _, _ = place(size, board, chain, me, p, row)
        left = chain_liberties(size, after, after_chain)[after_chain[p].astype(jnp.int32)]
        around = padded(after_chain.astype(jnp.int32), a)[nbr] == after_chain[p]
        liberty = (after == 0) & jnp.any(around, axis=1)
        first, second = jnp.nonzero(liberty, size=2, fill_value=0)[0].astype(jnp.int32)
        reader = functools.partial(read, size, after, after_chain, -me, prey=p, depth=depth,
                                   steps=steps, active=active & row.legal & (left == 2))
        laddered = reader(first) | reader(second)
        return active & row.legal & ((left <= 1) | ((left == 2) & laddered))

    doomed = jax.vmap(one)(points, valid)
    return jnp.zeros(a, bool).at[points].max(doomed)
