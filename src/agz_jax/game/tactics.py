"""Gomoku tactics read from the stones: the moves a search may take, and the
wins the stones force.

``search_moves`` restricts a position's moves to the forced ones
(``SearchConfig.forced_moves``, ``answer_threats``, ``answer_four_threes``);
``threat_value`` values a position by the win its stones force
(``SearchConfig.threat_values``). Both are pure functions of the board, built
on ``agz_jax.game.gomoku``'s line readers (``five_points``, ``new_five_points``),
and run inside the search at every node. The mentor (``agz_jax.game.mentor``) and
the basic-rules stage (``agz_jax.curriculum.basic_rules``) read threats their
own way, by pattern counts over windows, to label positions rather than to
restrict a search; the tests check the two readings against each other where
they overlap (``tests/test_tactics.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.base import compaction
from agz_jax.game.gomoku import Rules, State, stone
from agz_jax.game.lines import line_window_table, reach_table, with_off_board

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
    if theirs is None:  # under renju a black point it may not play is no threat
        theirs = jnp.where(rules.forbidden(board, -me), 0, rules.new_five_points(board, -me))
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
    t = compaction.first_true(threats, n_t)
    p = compaction.first_true(candidates, n_p)
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
                      fours: jax.Array | None = None,
                      black_forbidden: jax.Array | None = None) -> jax.Array:
    """bool[A]: the empty points where a stone ``who`` makes a four-three
    (``four_three_lines``).

    Only four points can be, so only the first ``FOUR_POINTS_CHECKED`` points
    of ``fours`` (``rules.new_five_points`` of ``who``, when the caller has
    it) are read; a position with more loses the four-threes among the rest.
    ``black_forbidden``: ``rules.forbidden(board)``, when the caller has it.
    Under renju black's forbidden points are none (a four-four-three is a
    double four, a four-three-three a double three).
    """
    fours = rules.new_five_points(board, who) if fours is None else fours
    n = min(FOUR_POINTS_CHECKED, board.shape[0])
    q = compaction.first_true(fours >= 1, n)
    window = jnp.asarray(line_window_table(rules.size, 9))[q]  # [n, 4, 19]
    padded = with_off_board(board)
    hit = (fours[q] >= 1) & four_three_lines(rules, padded[window], who)
    black = rules.forbidden(board) if black_forbidden is None else black_forbidden
    return (jnp.zeros(board.shape, bool).at[q].max(hit) & (board == 0)
            & ~(black & (who == 1)))


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

    Under renju black's forbidden points make none of kinds 3 to 5. The
    opponent, who has no five point, cannot answer a four but by its
    block, so kinds 1, 3 and 5 up to the block are forced; they are exact but
    for one case: a forced block that makes the opponent a four of its own
    after the four of a four-three (kinds 4 and 5), which is not read.
    """
    mine = rules.new_five_points(board, me)
    wins = jnp.any(rules.five_points(board, me))
    blocks = jnp.any(rules.five_points(board, -me))
    doubles = jnp.any((mine >= 2) & ~rules.forbidden(board, me))
    four_threes = jnp.any(four_three_points(rules, board, me, mine))

    n = min(FOURS_READ, board.shape[0])
    f = compaction.first_true(mine == 1, n)
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
    open_after = (mine_after >= 2) & ~jax.vmap(rules.forbidden, (0, None))(after_block, me)
    wins_after = jnp.any(open_after, axis=-1) | jnp.any(
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
    """bool[B, A]: the moves a search may take from each position (``_search_moves``
    says which).

    With forced moves, a jitted function of its own: inside a larger program
    it is a call that jax traces once per rules, options and shapes in a
    process and lowers once per program (a search reads the tactics at its
    roots and at every expansion), where it was otherwise traced anew at each
    call. XLA inlines the call, so the program computes the same. The reading
    limits of this module (``ANSWER_CANDIDATES`` and the rest) are part of its
    key, so that a change to them is traced anew. Rules that carry a traced
    value (the engine's rule flag) are read inline.
    """
    if forced and not any(isinstance(v, jax.core.Tracer) for v in vars(rules).values()):
        return _search_moves_jit(rules, states, forced, answer_threats, answer_four_threes,
                                 _limits())
    return _search_moves(rules, states, forced, answer_threats, answer_four_threes)


def _limits() -> tuple[int, ...]:
    """The module's reading limits, as they are now (tests change them)."""
    return (ANSWER_CANDIDATES, THREATS_CHECKED, FOUR_POINTS_CHECKED, FOUR_THREES_CHECKED,
            FOURS_READ)


@functools.partial(jax.jit, static_argnums=(0, 2, 3, 4, 5))
def _search_moves_jit(rules, states, forced, answer_threats, answer_four_threes, limits):
    del limits  # the cache key only: the body reads the module's limits as it traces
    return _search_moves(rules, states, forced, answer_threats, answer_four_threes)


def _search_moves(rules: Rules, states: State, forced: bool = False,
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

    Under renju, the opponent's threats on black's forbidden points are none,
    and the legal mask keeps black's own moves off them.

    Kinds 1-4 never change a position's game value, so the search stays sound
    while it reads forcing lines deeply. Kind 5 nearly never does: any other
    move loses in six plies (the four-three; the forced block of its four;
    the open four) unless that block happens to make the mover a four,
    which this rule does not read.
    """
    black = rules.forbidden_rows(states.board)  # read once: the mask and the threats
    legal = jax.vmap(rules.legal_mask)(states, black)
    if not forced:
        return legal
    board, me = states.board, stone(states.to_play)
    windows = jax.vmap(rules.line_windows)(board)  # gathered once, read for both colours
    wins, blocks, mine = jax.vmap(lambda b, m, w: (
        rules.five_points(b, m, w), rules.five_points(b, -m, w),
        rules.new_five_points(b, m, w)))(board, me, windows)
    wins, blocks, doubles = wins & legal, blocks & legal, (mine >= 2) & legal
    kinds, moves = [wins, blocks, doubles], [wins, blocks, doubles]
    # The answers are read only where the threat they answer is on the board
    # (compaction.map_where: the same bits as reading them everywhere).
    if answer_threats:
        theirs = jax.vmap(rules.new_five_points)(board, -me, windows)
        # Under renju a black point it may not play is no threat.
        theirs = jnp.where(black & (-me == 1)[:, None], 0, theirs)
        facing = jnp.any(theirs >= 2, axis=-1)
        answers = compaction.map_where(
            lambda b, m, mi, th: threat_answers(rules, b, m, mi, th),
            facing, board, me, mine, theirs) & legal
        kinds.append(answers & facing[:, None])
        moves.append(answers)
    if answer_four_threes:
        threats = compaction.map_where(
            lambda b, m, th, f: four_three_points(rules, b, -m, th, f),
            jnp.any(theirs >= 1, axis=-1), board, me, theirs, black)
        facing = jnp.any(threats, axis=-1)
        answers = compaction.map_where(
            lambda b, m, mi, t: four_three_answers(rules, b, m, mi, t),
            facing, board, me, mine, threats) & legal
        # Facing both kinds of threat: the answers to both, when there are any.
        both = moves[-1] & answers
        moves[-1] = jnp.where((jnp.any(both, axis=-1) & facing)[:, None], both, moves[-1])
        kinds.append(answers & facing[:, None])
        moves.append(answers)
    out = legal
    for kind, move in reversed(list(zip(kinds, moves, strict=True))):  # the first kind present
        out = jnp.where(jnp.any(kind, axis=-1, keepdims=True), move, out)
    return out
