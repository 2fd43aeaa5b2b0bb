"""Tree search on mctx: PUCT and Gumbel, Winning Value Decay, move policies.

Value convention (mctx's): a node's value is from the perspective of the side
to move there; an edge carries ``reward`` for the side that moved and a
``discount`` applied to the child's value, so mctx's backward computes, per
edge, ``parent_return = reward + discount * child_return``.

Winning Value Decay (paper III.C) is ``winning_value_decay`` below, the one
place where backups are defined:

* an ordinary edge has ``reward = 0`` and ``discount = -gamma``: the value
  changes sign (the other side moves) and shrinks by ``gamma`` per ply;
* the edge of a winning move has ``reward = +1`` and ``discount = 0``: the mover
  has won; the finished position itself is worth ``-1`` to its side to move (a
  loss), ``0`` for a draw. Node values thus equal the decayed z labels of
  ``selfplay``: ``+1`` one ply before a win, ``-gamma`` two plies before, ...;
* a finished game is absorbing: any edge out of it has ``discount = 0`` and a
  ``reward`` equal to its own value, so extra visits leave it unchanged.

``gamma = 1`` is plain AlphaZero (discount -1).

Illegal moves are masked at every node: ``recurrent_fn`` gives them the lowest
finite logit (prior exactly 0) and the PUCT selection below never picks an
action that is illegal in the node's position. Gumbel's interior selection picks argmax of
``pi' - N/(1+sum N)``, which is strictly positive for some legal action and 0
for a zero-prior one, so it never picks an illegal move either (tested).

The search loop is ``search_tree``: ``mctx.search`` with mctx's own simulate
and expand steps but a backward pass written for the batch (``batched_backward``),
which gives the same trees bit for bit without copying the whole tree on every
step up a path; ``gumbel_policy`` is ``mctx.gumbel_muzero_policy`` on it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import mctx
import numpy as np
from mctx._src import action_selection as mctx_selection
from mctx._src import qtransforms as mctx_qtransforms
from mctx._src import search as mctx_search
from mctx._src import seq_halving as mctx_seq_halving

from agz_jax.config import SearchConfig, SelfPlayConfig
from agz_jax.gomoku import Rules, State, line_window_table, reach_table, stone, with_off_board
from agz_jax.networks import Networks, cast_params

Evaluate = Callable[[object, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


class Backup(NamedTuple):
    reward: jax.Array
    discount: jax.Array
    value: jax.Array


def winning_value_decay(parent: State, child: State, net_value: jax.Array,
                        gamma: float) -> Backup:
    """Winning Value Decay: (reward, discount, value) of the edge parent -> child.

    Args:
      parent, child: batched states ``[B]`` before and after the move.
      net_value: float32[B], the net's value of ``child`` for its side to move.
      gamma: decay per ply, in (0, 1].
    """
    # Value of a finished position for its side to move: a decided game was
    # won by the previous mover.
    parent_final = jnp.where(parent.winner >= 0, -1.0, 0.0)
    child_final = jnp.where(child.winner >= 0, -1.0, 0.0)
    finished_now = child.done & ~parent.done

    reward = jnp.where(parent.done, parent_final, jnp.where(finished_now, -child_final, 0.0))
    discount = jnp.where(child.done, 0.0, -gamma)
    value = jnp.where(child.done, child_final, net_value)
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    return Backup(f32(reward), f32(jnp.broadcast_to(discount, reward.shape)), f32(value))


def mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Give illegal actions the lowest finite logit (prior exactly 0).

    A position with no legal move (a finished game) keeps uniform logits: its
    children are absorbing copies of it.
    """
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    any_legal = jnp.any(legal, axis=-1, keepdims=True)
    masked = jnp.where(legal, logits, jnp.finfo(logits.dtype).min)
    return jnp.where(any_legal, masked, jnp.zeros_like(logits))


ANSWER_CANDIDATES = 32
"""Points checked exactly as answers to the opponent's open-four threats."""
THREATS_CHECKED = 8
"""Threat points they are checked against; with more, no answer is checked."""


def threat_answers(rules: Rules, board: jax.Array, me: jax.Array,
                   mine: jax.Array | None = None, theirs: jax.Array | None = None
                   ) -> jax.Array:
    """bool[A]: the moves of ``me`` that do not lose at once to the opponent's
    open-four threats (its points of ``new_five_points >= 2``).

    ``mine``/``theirs``: ``rules.new_five_points`` of ``me`` and of the
    opponent on ``board``, when the caller has them.

    They are ``me``'s fours (a five point the opponent must block first) and
    the points after which the opponent has no such threat left. Any other
    move loses: the opponent makes two five points, and ``me`` has no five to
    play first. A stone changes a point's ``new_five_points`` only within 5 of
    it on a line (``reach_table``), so an answer lies within reach of every
    threat; the first ``ANSWER_CANDIDATES`` such points are checked by
    re-reading the threats' lines with the stone on them, any further ones
    (and all of them when there are more than ``THREATS_CHECKED`` threats)
    are allowed unchecked.
    """
    mine = rules.new_five_points(board, me) if mine is None else mine
    theirs = rules.new_five_points(board, -me) if theirs is None else theirs
    return _checked_answers(
        rules, board, me, mine, theirs >= 2, 5, THREATS_CHECKED,
        lambda lines: rules.window_five_count(lines, -me) >= 2)


def _checked_answers(rules: Rules, board: jax.Array, me: jax.Array, mine: jax.Array,
                     threats: jax.Array, half: int, threats_checked: int,
                     remains: Callable[[jax.Array], jax.Array]) -> jax.Array:
    """``me``'s fours, and the empty points within ``half`` of every threat on
    its lines after which none ``remains`` (``remains(lines)``: bool[P, T] of
    the threats' lines int[P, T, 4, 2 * half + 1] with a stone of ``me`` on
    each candidate). The first ``ANSWER_CANDIDATES`` candidates are checked
    against the first ``threats_checked`` threats (none with more threats);
    the others are allowed unchecked."""
    empty = board == 0
    n_threats = jnp.sum(threats)
    reach = jnp.asarray(reach_table(rules.size, half), jnp.int32)
    candidates = empty & ((threats.astype(jnp.int32) @ reach) == n_threats)

    n_t = min(threats_checked, board.shape[0])
    n_p = min(ANSWER_CANDIDATES, board.shape[0])
    _, t = jax.lax.top_k(threats.astype(jnp.int32), n_t)
    _, p = jax.lax.top_k(candidates.astype(jnp.int32), n_p)
    windows = jnp.asarray(line_window_table(rules.size, half))[t]  # [n_t, 4, 2 * half + 1]
    padded = with_off_board(board)
    lines = jnp.where(windows == p[:, None, None, None], me.astype(board.dtype),
                      padded[windows])  # [n_p, n_t, 4, 2 * half + 1]: the lines after p
    gone = ~remains(lines) | (p[:, None] == t[None, :]) | ~threats[t][None, :]
    checked = candidates[p] & (n_threats <= n_t)
    none = jnp.zeros_like(candidates)
    answers = none.at[p].set(checked & jnp.all(gone, axis=-1))
    unchecked = candidates & ~none.at[p].set(checked)
    return (mine >= 1) | answers | unchecked


_R_OFFSETS = np.array([-4, -3, -2, -1, 1, 2, 3, 4])
"""Where, on a line through a stone, a point it helps make an open four can lie."""
_R_WINDOWS = 9 + _R_OFFSETS[:, None] + np.arange(-5, 6)[None, :]
"""[8, 11]: those points' 11-point windows inside the stone's 19-point line."""


def four_three_lines(rules: Rules, lines: jax.Array, who: jax.Array) -> jax.Array:
    """bool[...]: does a stone ``who`` at the centre of ``lines`` int[..., 4, 19]
    (``line_window_table(size, 9)``; the centre is read as ``who``) make a
    four-three: a four on one line (a five point there) and, on another line,
    an empty point within 4 where a second stone ``who`` would make two five
    points on that line (an open four)?"""
    lines = lines.at[..., 9].set(who.astype(lines.dtype))
    fours = rules.line_five_count(lines[..., 4:15], who) >= 1  # [..., 4]
    after = lines[..., _R_WINDOWS]  # [..., 4, 8, 11]: the line around each point R
    opens = (rules.line_five_count(after, who) >= 2) & (lines[..., 9 + _R_OFFSETS] == 0)
    threes = jnp.any(opens, axis=-1)  # [..., 4]
    fours_elsewhere = jnp.sum(fours, axis=-1, keepdims=True) - fours
    return jnp.any(threes & (fours_elsewhere >= 1), axis=-1)


FOUR_POINTS_CHECKED = 16
"""Four points read for four-threes; any further ones are taken for none."""
FOUR_THREES_CHECKED = 4
"""Four-three points an answer is checked against; with more, none is checked."""


def four_three_points(rules: Rules, board: jax.Array, who: jax.Array,
                      fours: jax.Array | None = None) -> jax.Array:
    """bool[A]: the empty points where a stone ``who`` makes a four-three
    (``four_three_lines``).

    Only four points can be, so only the first ``FOUR_POINTS_CHECKED`` points
    of ``fours`` (``rules.new_five_points`` of ``who``, when the caller has
    it) are read; a position with more loses the four-threes among the rest.
    """
    fours = rules.new_five_points(board, who) if fours is None else fours
    n = min(FOUR_POINTS_CHECKED, board.shape[0])
    _, q = jax.lax.top_k((fours >= 1).astype(jnp.int32), n)
    window = jnp.asarray(line_window_table(rules.size, 9))[q]  # [n, 4, 19]
    padded = with_off_board(board)
    hit = (fours[q] >= 1) & four_three_lines(rules, padded[window], who)
    return jnp.zeros(board.shape, bool).at[q].max(hit) & (board == 0)


def four_three_answers(rules: Rules, board: jax.Array, me: jax.Array, mine: jax.Array,
                       threats: jax.Array) -> jax.Array:
    """bool[A]: the moves of ``me`` that answer the opponent's four-three points
    ``threats`` (``four_three_points``): ``me``'s fours (``mine``:
    ``rules.new_five_points`` of ``me``) and the points after which the
    opponent has none left.

    A stone of ``me`` never makes the opponent a new four-three, and changes a
    point's four-three only within 9 of it on one of its lines, so an answer
    lies within that reach of every threat. As in ``threat_answers``, the
    first ``ANSWER_CANDIDATES`` such points are checked against the first
    ``FOUR_THREES_CHECKED`` threats; any further ones are allowed unchecked.
    """
    return _checked_answers(rules, board, me, mine, threats, 9, FOUR_THREES_CHECKED,
                            lambda lines: four_three_lines(rules, lines, -me))


FOURS_READ = 8
"""Fours of the side to move read for a four, its block, then a four-three
(``threat_value``); any further ones are not read."""


def threat_value(rules: Rules, board: jax.Array, me: jax.Array, gamma: float
                 ) -> tuple[jax.Array, jax.Array]:
    """(bool[], float32[]): whether the side to move, ``me``, has a forced win
    read from the stones alone, and its value (Winning Value Decay's, for
    ``me``: ``gamma ** (plies to the five - 1)``).

    In order, the first that holds:

    1. ``me`` has a five point: ``1`` (a win now);
    2. the opponent has a five point: nothing read (``me`` must block it);
    3. ``me`` has an open-four or double-four point: ``gamma ** 2``;
    4. ``me`` has a four-three point (``four_three_points``): ``gamma ** 4``
       (the four-three, the forced block, the open four, any move, the five);
    5. ``me`` has a four (one of the first ``FOURS_READ`` points where a
       stone makes exactly one five point) whose forced block gives the
       opponent no five point and leaves ``me`` an open-four, double-four or
       four-three point: ``gamma ** 6``.

    The opponent, who has no five point, cannot answer a four but by its
    block, so kinds 1, 3 and 5 up to the block are forced; they are exact but
    for one case: a forced block that makes the opponent a four of its own
    after the four of a four-three (kinds 4 and 5), which is not read.
    """
    mine = rules.new_five_points(board, me)
    wins = jnp.any(rules.five_points(board, me))
    blocks = jnp.any(rules.five_points(board, -me))
    doubles = jnp.any(mine >= 2)
    four_threes = jnp.any(four_three_points(rules, board, me, mine))

    n = min(FOURS_READ, board.shape[0])
    _, f = jax.lax.top_k((mine == 1).astype(jnp.int32), n)
    rows = jnp.arange(n)
    after_four = jnp.broadcast_to(board, (n, *board.shape)).at[rows, f].set(
        me.astype(board.dtype))
    block = jnp.argmax(jax.vmap(rules.five_points, (0, None))(after_four, me), axis=-1)
    # What the block makes the opponent: its stone's five points on its lines.
    window = jnp.asarray(line_window_table(rules.size))[block]  # [n, 4, 11]
    padded = jax.vmap(with_off_board)(after_four)
    lines = jnp.take_along_axis(padded, window.reshape(n, -1), axis=-1).reshape(window.shape)
    counters = rules.window_five_count(lines, -me) >= 1
    after_block = after_four.at[rows, block].set(-me.astype(board.dtype))
    mine_after = jax.vmap(rules.new_five_points, (0, None))(after_block, me)
    wins_after = jnp.any(mine_after >= 2, axis=-1) | jnp.any(
        jax.vmap(lambda b, m: four_three_points(rules, b, me, m))(after_block, mine_after),
        axis=-1)
    four_wins = jnp.any((mine[f] == 1) & ~counters & wins_after)

    kinds = [wins, blocks, doubles, four_threes, four_wins]
    values = [1.0, jnp.nan, gamma ** 2, gamma ** 4, gamma ** 6]
    value = jnp.select(kinds, [jnp.float32(v) for v in values], jnp.float32(jnp.nan))
    return ~jnp.isnan(value), jnp.nan_to_num(value)


def search_moves(rules: Rules, states: State, forced: bool = False,
                 answer_threats: bool = False, answer_four_threes: bool = False
                 ) -> jax.Array:
    """bool[B, A]: the moves a search may take from each position.

    The legal moves; with ``forced`` (``SearchConfig.forced_moves``) only the
    first kind present of:

    1. the mover's fives (a win now);
    2. the points that block the opponent's fives (any other move loses);
    3. the mover's moves that make two five points at once, an open four or a
       double four (a win in three plies: neither side has a five point, so
       the opponent can block only one, and a four it makes instead is
       answered by the mover's five);
    4. with ``answer_threats`` too (``SearchConfig.answer_threats``), when the
       opponent can make an open four or a double four: the mover's fours and
       the moves that leave the opponent no such move (``threat_answers``);
       any other move loses in four plies.
    5. with ``answer_four_threes`` too (``SearchConfig.answer_four_threes``),
       when the opponent has a four-three point (``four_three_points``): the
       mover's fours and the moves that leave it none (``four_three_answers``).
       Facing an open-four point as well, kind 4 keeps only the moves that
       answer both, if there are any.

    Kinds 1-4 never change a position's game value, so the search stays sound
    while it reads forcing lines deeply. Kind 5 nearly never does: any other
    move loses in six plies (the four-three; the forced block of its four;
    the open four) unless that block happens to make the mover a four,
    which this rule does not read.
    """
    legal = jax.vmap(rules.legal_mask)(states)
    if not forced:
        return legal

    def restrict(state: State, legal: jax.Array) -> jax.Array:
        me = stone(state.to_play)
        wins = rules.five_points(state.board, me) & legal
        blocks = rules.five_points(state.board, -me) & legal
        mine = rules.new_five_points(state.board, me)
        doubles = (mine >= 2) & legal
        kinds, moves = [jnp.any(wins), jnp.any(blocks), jnp.any(doubles)], [wins, blocks, doubles]
        if answer_threats:
            theirs = rules.new_five_points(state.board, -me)
            answers = threat_answers(rules, state.board, me, mine, theirs) & legal
            kinds.append(jnp.any(answers) & jnp.any(theirs >= 2))
            moves.append(answers)
        if answer_four_threes:
            threats = four_three_points(rules, state.board, -me, theirs)
            answers43 = four_three_answers(rules, state.board, me, mine, threats) & legal
            # Facing both kinds of threat: the answers to both, when there are any.
            both = moves[-1] & answers43
            moves[-1] = jnp.where(jnp.any(both) & jnp.any(threats), both, moves[-1])
            kinds.append(jnp.any(answers43) & jnp.any(threats))
            moves.append(answers43)
        return jnp.select(kinds, moves, legal)

    return jax.vmap(restrict)(states, legal)


def make_root_fn(rules: Rules, nets: Networks, forced: bool = False,
                 answer_threats: bool = False, answer_four_threes: bool = False,
                 dtype: str = "float32"):
    """mctx's ``root_fn``: evaluate the roots with the nets, computing in
    ``dtype`` (``SearchConfig.dtype``; logits and values come back float32),
    and mask their priors to ``search_moves``."""
    def root_fn(variables, states: State, legal: jax.Array | None = None) -> mctx.RootFnOutput:
        """``legal``: the roots' ``search_moves`` when the caller has them."""
        obs = nets.observe(rules, states)
        logits, value = nets.evaluate(variables, obs, states.to_play, dtype=dtype)
        if legal is None:
            legal = search_moves(rules, states, forced, answer_threats, answer_four_threes)
        return mctx.RootFnOutput(
            prior_logits=mask_logits(logits, legal), value=value, embedding=states
        )

    return root_fn


def make_recurrent_fn(rules: Rules, nets: Networks, gamma: float, forced: bool = False,
                      answer_threats: bool = False, answer_four_threes: bool = False,
                      threat_values: bool = False, dtype: str = "float32"):
    """mctx's ``recurrent_fn``: play ``action``, evaluate the child with the
    nets (computing in ``dtype``, as ``make_root_fn``), restrict its moves
    (``search_moves``). With ``threat_values`` (``SearchConfig.threat_values``)
    a child whose side to move has a win read from the stones
    (``threat_value``) takes that win's value instead of the net's."""
    def recurrent_fn(variables, key, action, states: State):
        del key
        children = jax.vmap(rules.step)(states, action)
        obs = nets.observe(rules, children)
        logits, value = nets.evaluate(variables, obs, children.to_play, dtype=dtype)
        if threat_values:
            known, read = jax.vmap(lambda b, p: threat_value(rules, b, stone(p), gamma))(
                children.board, children.to_play)
            value = jnp.where(known & ~children.done, read, value)
        legal = search_moves(rules, children, forced, answer_threats, answer_four_threes)
        backup = winning_value_decay(states, children, value, gamma)
        out = mctx.RecurrentFnOutput(
            reward=backup.reward,
            discount=backup.discount,
            prior_logits=mask_logits(logits, legal),
            value=backup.value,
        )
        return out, children

    return recurrent_fn


def raw_qvalues(tree: mctx.Tree, node_index) -> jax.Array:
    """The paper's Q: mean backed-up value in [-1, 1]; 0 for unvisited children."""
    q = tree.qvalues(node_index)
    return jnp.where(tree.children_visits[node_index] > 0, q, 0.0)


def puct_action_selection(key, tree: mctx.Tree, node_index, depth, *, c_puct: float,
                          qtransform) -> jax.Array:
    """argmax_a Q(s,a) + c_puct P(s,a) sqrt(N(s)) / (1 + N(s,a)) over legal a of prior > 0.

    N(s) counts the node's own expansion visit (mctx's convention), i.e.
    ``1 + sum_b N(s,b)``, so the very first selection at a node follows the
    prior instead of tie-break noise. An action is excluded if its prior is 0
    (``recurrent_fn`` masks illegal moves that way) or if it is illegal in the
    node's own position (the tree's embedding): a second, independent guard.
    A finished position (no legal move) may take any action: its children are
    absorbing copies of it.
    """
    visits = tree.children_visits[node_index]
    prior = jax.nn.softmax(tree.children_prior_logits[node_index])
    u = c_puct * prior * jnp.sqrt(tree.node_visits[node_index]) / (visits + 1)
    score = qtransform(tree, node_index) + u
    score = score + 1e-7 * jax.random.uniform(key, score.shape)
    board = tree.embeddings.board[node_index]
    legal = (board == 0) & ~tree.embeddings.done[node_index]
    invalid = (prior <= 0) | (~legal & jnp.any(legal))
    invalid = invalid | (tree.root_invalid_actions * (depth == 0) > 0)
    return jnp.argmax(jnp.where(invalid, -jnp.inf, score)).astype(jnp.int32)


def add_dirichlet_noise(key: jax.Array, prior_logits: jax.Array, legal: jax.Array,
                        fraction: float, alpha: float) -> jax.Array:
    """AlphaZero's root noise: P = (1 - fraction) p + fraction eta, eta ~ Dir(alpha)
    over the legal moves.

    Args: prior_logits float32[B, A] (illegal moves already masked), legal bool[B, A].
    Returns: the noisy prior as masked logits, float32[B, A].
    """
    probs = jax.nn.softmax(prior_logits)
    noise = jax.random.dirichlet(key, jnp.full(probs.shape[-1:], alpha), probs.shape[:1])
    # Dir(alpha) over all points restricted to the legal ones and renormalised
    # is Dir(alpha) over the legal ones; without the renormalisation the noise
    # that fell on occupied points would be masked away, and the effective
    # fraction would shrink as the board fills.
    noise = jnp.where(legal, noise, 0.0)
    noise = noise / jnp.maximum(noise.sum(-1, keepdims=True), jnp.finfo(noise.dtype).tiny)
    probs = (1 - fraction) * probs + fraction * noise
    noisy = jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))
    return mask_logits(noisy, legal)


def batched_backward(tree: mctx.Tree, leaf_index: jax.Array) -> mctx.Tree:
    """mctx's ``backward``, written for the batch: the same trees, bit for bit.

    mctx's is ``jax.vmap`` of a ``lax.while_loop`` carrying one tree; under
    vmap the batched predicate turns into a ``select`` over every carried tree
    array ``[B, N, A]`` on every step up the path. Here one loop runs while any
    row is below its root, and each step scatters only the ``B`` path entries;
    a row already at its root gets an out-of-range batch index, so its update
    is dropped. The arithmetic is mctx's, in mctx's order.

    Args:
      tree: the batched tree ``[B, ...]``.
      leaf_index: int32[B], the node of each row to back up from.
    """
    batch_size = tree.node_visits.shape[0]
    batch_range = jnp.arange(batch_size)
    root = mctx.Tree.ROOT_INDEX

    def cond_fun(loop_state):
        _, _, index = loop_state
        return jnp.any(index != root)

    def body_fun(loop_state):
        tree, leaf_value, index = loop_state
        active = index != root
        rows = jnp.where(active, batch_range, batch_size)  # out of range: dropped
        parent = tree.parents[batch_range, index]
        action = tree.action_from_parent[batch_range, index]
        count = tree.node_visits[batch_range, parent]
        reward = tree.children_rewards[batch_range, parent, action]
        new_leaf_value = (reward + tree.children_discounts[batch_range, parent, action]
                          * leaf_value)
        parent_value = (tree.node_values[batch_range, parent] * count
                        + new_leaf_value) / (count + 1.0)
        children_values = tree.node_values[batch_range, index]
        children_counts = tree.children_visits[batch_range, parent, action] + 1
        tree = tree.replace(
            node_values=tree.node_values.at[rows, parent].set(parent_value, mode="drop"),
            node_visits=tree.node_visits.at[rows, parent].set(count + 1, mode="drop"),
            children_values=tree.children_values.at[rows, parent, action].set(
                children_values, mode="drop"),
            children_visits=tree.children_visits.at[rows, parent, action].set(
                children_counts, mode="drop"))
        return (tree, jnp.where(active, new_leaf_value, leaf_value),
                jnp.where(active, parent, index))

    leaf_index = jnp.asarray(leaf_index, jnp.int32)
    loop_state = (tree, tree.node_values[batch_range, leaf_index], leaf_index)
    tree, _, _ = jax.lax.while_loop(cond_fun, body_fun, loop_state)
    return tree


def _simulation(params, recurrent_fn, action_selection_fn, max_depth: int):
    """One simulation ``sim`` as a ``fori_loop`` body over ``(rng_key, tree)``:
    select a leaf, expand it into node ``sim + 1``, back up."""

    def body_fun(sim, loop_state):
        rng_key, tree = loop_state
        batch_size = tree.node_visits.shape[0]
        batch_range = jnp.arange(batch_size)
        rng_key, simulate_key, expand_key = jax.random.split(rng_key, 3)
        simulate_keys = jax.random.split(simulate_key, batch_size)
        parent_index, action = mctx_search.simulate(
            simulate_keys, tree, action_selection_fn, max_depth)
        # A node first expanded on simulation `sim` has index `sim + 1`.
        next_node_index = tree.children_index[batch_range, parent_index, action]
        next_node_index = jnp.where(next_node_index == mctx.Tree.UNVISITED,
                                    sim + 1, next_node_index)
        tree = mctx_search.expand(params, expand_key, tree, recurrent_fn, parent_index,
                                  action, next_node_index)
        tree = batched_backward(tree, next_node_index)
        return rng_key, tree

    return body_fun


def search_tree(
    params,
    rng_key: jax.Array,
    *,
    root: mctx.RootFnOutput,
    recurrent_fn,
    root_action_selection_fn,
    interior_action_selection_fn,
    num_simulations: int,
    invalid_actions: jax.Array | None = None,
    extra_data=None,
) -> mctx.Tree:
    """``mctx.search`` (no ``max_depth``) with ``batched_backward``.

    mctx's own ``instantiate_tree_from_root``, ``simulate`` and ``expand``, the
    same RNG splitting: the same tree, bit for bit (tested).
    """
    tree = start_tree(root, num_simulations, invalid_actions, extra_data)
    return continue_tree(
        params, rng_key, tree, recurrent_fn=recurrent_fn,
        root_action_selection_fn=root_action_selection_fn,
        interior_action_selection_fn=interior_action_selection_fn,
        start=0, stop=num_simulations)


def start_tree(root: mctx.RootFnOutput, capacity: int, invalid_actions: jax.Array | None = None,
               extra_data=None) -> mctx.Tree:
    """An mctx tree holding only ``root``, with room for ``capacity`` simulations."""
    if invalid_actions is None:
        invalid_actions = jnp.zeros_like(root.prior_logits)
    return mctx_search.instantiate_tree_from_root(
        root, capacity, root_invalid_actions=invalid_actions, extra_data=extra_data)


def continue_tree(
    params,
    rng_key: jax.Array,
    tree: mctx.Tree,
    *,
    recurrent_fn,
    root_action_selection_fn,
    interior_action_selection_fn,
    start,
    stop,
) -> mctx.Tree:
    """Run simulations ``start .. stop - 1`` on a tree made by ``start_tree``.

    A search can thus run in chunks (``0..k``, ``k..2k``, ...) and stop when
    time runs out: simulation ``sim`` expands node ``sim + 1``, so ``start``
    must be the number of simulations already run and ``stop`` at most the
    tree's capacity. ``start``/``stop`` may be traced (one compilation serves
    every chunk). The chunks' RNG keys are the caller's: ``0..n`` in one call
    gives the same tree as ``search_tree`` with the same key.
    """
    action_selection_fn = mctx_selection.switching_action_selection_wrapper(
        root_action_selection_fn=root_action_selection_fn,
        interior_action_selection_fn=interior_action_selection_fn)
    max_depth = tree.children_visits.shape[1] - 1
    body_fun = _simulation(params, recurrent_fn, action_selection_fn, max_depth)
    _, tree = jax.lax.fori_loop(start, stop, body_fun, (rng_key, tree))
    return tree


def gumbel_policy(
    params,
    rng_key: jax.Array,
    root: mctx.RootFnOutput,
    recurrent_fn,
    num_simulations: int,
    invalid_actions: jax.Array,
    *,
    qtransform=mctx_qtransforms.qtransform_completed_by_mix_value,
    max_num_considered_actions: int = 16,
    gumbel_scale: float = 1.0,
) -> mctx.PolicyOutput:
    """``mctx.gumbel_muzero_policy`` (no ``max_depth``) on ``search_tree``: the
    same action, action weights and tree (tested)."""
    chex.assert_equal_shape([root.prior_logits, invalid_actions])
    root = root.replace(prior_logits=mask_logits(root.prior_logits, ~invalid_actions))
    rng_key, gumbel_rng = jax.random.split(rng_key)
    gumbel = gumbel_scale * jax.random.gumbel(
        gumbel_rng, shape=root.prior_logits.shape, dtype=root.prior_logits.dtype)
    tree = search_tree(
        params, rng_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=functools.partial(
            mctx_selection.gumbel_muzero_root_action_selection,
            num_simulations=num_simulations,
            max_num_considered_actions=max_num_considered_actions,
            qtransform=qtransform),
        interior_action_selection_fn=functools.partial(
            mctx_selection.gumbel_muzero_interior_action_selection, qtransform=qtransform),
        num_simulations=num_simulations,
        invalid_actions=invalid_actions,
        extra_data=mctx_selection.GumbelMuZeroExtraData(root_gumbel=gumbel))
    summary = tree.summary()
    # The most visited actions' best "gumbel + logits + completed q" is played.
    considered_visit = jnp.max(summary.visit_counts, axis=-1, keepdims=True)
    completed_qvalues = jax.vmap(qtransform, in_axes=[0, None])(tree, tree.ROOT_INDEX)
    to_argmax = mctx_seq_halving.score_considered(
        considered_visit, gumbel, root.prior_logits, completed_qvalues, summary.visit_counts)
    action = mctx_selection.masked_argmax(to_argmax, invalid_actions)
    action_weights = jax.nn.softmax(
        mask_logits(root.prior_logits + completed_qvalues, ~invalid_actions))
    return mctx.PolicyOutput(action=action, action_weights=action_weights, search_tree=tree)


def run_search(
    cfg: SearchConfig,
    rules: Rules,
    nets: Networks,
    gamma: float,
    variables,
    key: jax.Array,
    states: State,
    *,
    num_simulations: int | None = None,
    explore: bool = False,
) -> mctx.PolicyOutput:
    """Search from a batch of positions ``[B]``.

    Returns mctx's ``PolicyOutput``: ``action_weights`` float32[B, A] is the
    training target (visit distribution for PUCT, the improved policy for
    Gumbel) and ``search_tree`` the tree. ``explore`` adds root Dirichlet noise
    (PUCT) or Gumbel noise (Gumbel), as in self-play. The nets compute in
    ``cfg.dtype``; the tree and the outputs are float32 either way.
    """
    n_sims = cfg.num_simulations if num_simulations is None else num_simulations
    forced = (cfg.forced_moves, cfg.answer_threats, cfg.answer_four_threes)
    if cfg.dtype != "float32":
        # Cast once here: the recurrent function's own cast is then a no-op
        # inside the simulation loop.
        variables = cast_params(variables, cfg.dtype)
    legal = search_moves(rules, states, *forced)
    root = make_root_fn(rules, nets, *forced, dtype=cfg.dtype)(variables, states, legal)
    recurrent_fn = make_recurrent_fn(rules, nets, gamma, *forced,
                                     threat_values=cfg.threat_values, dtype=cfg.dtype)
    # Finished roots search anyway (their result is ignored) with every action
    # "valid" so that nothing divides by zero.
    invalid = ~legal & jnp.any(legal, axis=-1, keepdims=True)
    chex.assert_equal_shape([root.prior_logits, invalid])

    if cfg.algorithm == "gumbel":
        return gumbel_policy(
            params=variables,
            rng_key=key,
            root=root,
            recurrent_fn=recurrent_fn,
            num_simulations=n_sims,
            invalid_actions=invalid,
            max_num_considered_actions=cfg.max_considered_actions,
            gumbel_scale=1.0 if explore else 0.0,
        )

    noise_key, search_key = jax.random.split(key)
    if explore and cfg.dirichlet_fraction > 0:
        root = root.replace(prior_logits=add_dirichlet_noise(
            noise_key, root.prior_logits, ~invalid, cfg.dirichlet_fraction,
            cfg.dirichlet_alpha))

    qtransform = raw_qvalues if cfg.qtransform == "raw" else mctx.qtransform_by_parent_and_siblings
    select = functools.partial(puct_action_selection, c_puct=cfg.c_puct, qtransform=qtransform)
    tree = search_tree(
        params=variables,
        rng_key=search_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=functools.partial(select, depth=0),
        interior_action_selection_fn=select,
        num_simulations=n_sims,
        invalid_actions=invalid,
    )
    visits = tree.summary().visit_counts.astype(jnp.float32)
    weights = visits / jnp.maximum(visits.sum(-1, keepdims=True), 1.0)
    return mctx.PolicyOutput(action=jnp.argmax(visits, -1).astype(jnp.int32),
                             action_weights=weights, search_tree=tree)


def temperature(cfg: SelfPlayConfig, move_number: jax.Array) -> jax.Array:
    """tau by move number; 0 means argmax.

    semi_stochastic (paper): tau = tau_base ** (move // 2), argmax once tau < tau_min.
    """
    move_number = jnp.asarray(move_number)
    if cfg.move_policy == "deterministic":
        return jnp.zeros(move_number.shape, jnp.float32)
    if cfg.move_policy == "stochastic":
        return jnp.ones(move_number.shape, jnp.float32)
    tau = jnp.power(jnp.float32(cfg.tau_base), (move_number // 2).astype(jnp.float32))
    return jnp.where(tau < cfg.tau_min, 0.0, tau)


def select_move(key: jax.Array, visits: jax.Array, legal: jax.Array,
                tau: jax.Array) -> jax.Array:
    """Sample a move with pi ~ N^(1/tau) among legal moves; argmax where tau == 0.

    Args: visits float32[B, A], legal bool[B, A], tau float32[B].
    Returns: int32[B].
    """
    visits = jnp.where(legal, visits, 0.0)
    greedy = jnp.argmax(jnp.where(legal, visits + 1e-6, -1.0), axis=-1)
    safe_tau = jnp.maximum(tau, 1e-3)[:, None]
    logits = jnp.where(visits > 0, jnp.log(jnp.maximum(visits, 1e-30)) / safe_tau, -jnp.inf)
    # A position whose legal moves got no visits (1-simulation corner cases)
    # falls back to uniform over legal moves.
    logits = jnp.where(jnp.any(visits > 0, -1, keepdims=True), logits,
                       jnp.where(legal, 0.0, -jnp.inf))
    sampled = jax.random.categorical(key, logits, axis=-1)
    return jnp.where(tau > 0, sampled, greedy).astype(jnp.int32)
