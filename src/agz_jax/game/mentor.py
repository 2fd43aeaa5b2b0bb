"""The rule-based mentor (paper IV.C): threat patterns and a shallow tree search, in JAX.

AlphaGomoku's second curriculum stage imitates "a rule-based tree search gomoku
AI". This is ours, written so that a batch of mentor games is one jitted,
vmapped computation (``mentor_player`` follows ``arena``'s player protocol).

**Patterns.** For every empty point ``c``, every line direction and each
colour, the 9 points centred on ``c`` are read through a neighbour table, and a
lookup table of the ``3**8`` possible neighbourhoods (empty / own / blocked by an
opponent stone or the edge) gives the threat the colour makes by playing ``c``
on that line. All threats are about fives *through c* (so the 9 points decide
them exactly):

====  ===========  =====================================================
class name         playing ``c`` ...
====  ===========  =====================================================
6     five         completes five or more in a row through ``c``
5     open four    leaves >= 2 points that would each complete a five
4     four         leaves exactly 1 such point
3     open three   leaves a point that would make an open four
2     three        leaves a point that would make a four
1     two          leaves a point that would make an open three
0     -            none of these
====  ===========  =====================================================

**Move value.** A colour's *attack* value of ``c`` adds the per-line weights of
its classes, plus a bonus for combinations that win on the next move (two fours,
a four and an open three: "four-three") or force (two open threes), plus the
count of its own stones within 4 points on the four lines. The value of ``c``
for the side to move is ``5 * attack(me) + 4 * attack(opponent)``: attack and
defence, attack first.

**Tactics first.** Candidate moves are the empty points within 2 of a stone
(the centre on an empty board), narrowed to the most urgent *tier* present:

====  ====================================================================
tier  candidates
====  ====================================================================
5     complete an own five
4     block the opponent's five (its four)
3     make an own open four
2     make an own double four or four-three
1     stop an open three: points where the opponent would make an open
      four, a double four or a four-three
0     every candidate
====  ====================================================================

so at every level the mentor never misses a five, a block of a four, an open
four, or the answer to an open three.

**Search.** Level 0 plays the best-valued candidate. Level ``L >= 1`` runs a
depth-``L`` negamax over the ``beam`` best candidates of each node (ordered by
tier, then value): the result alpha-beta would return with the same move
ordering, computed without pruning because a fixed-shape tree vectorises and
pruning does not. A move that completes a five ends its branch with a win;
leaves are scored by a static evaluation (immediate wins and losses, an
unstoppable open four; otherwise the classic five-point-window score, each
window held by one colour alone counting by its stones, plus a quarter of the
mover's best attack value for having the move), and wins and losses found deeper
count a little less,
so faster wins are preferred. Ties between equally valued root moves are
broken at random by the key.

Everything is int32, so the plain-Python reference in ``tests/reference_mentor.py``
must agree exactly (same values, same best moves). The mentor knows freestyle
patterns; under renju it reads them the same way but never plays black's
forbidden points nor takes them for black's threats (``agz_jax.game.renju``), and
``standard`` rules are refused.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.game.gomoku import Rules, State, stone
from agz_jax.game.lines import with_off_board

MAX_LEVEL = 3
DEFAULT_BEAM = (0, 10, 8, 5)  # per level (level 0 does not search)
NUM_CLASSES = 7
# Per-line weights of the classes 0..6 (five's weight never matters: tier 5 decides).
CLASS_WEIGHTS = (0, 20, 50, 1_000, 1_500, 20_000, 100_000)
COMBO_WIN = 20_000  # two fours, or a four and an open three, on different lines
COMBO_THREES = 8_000  # two open threes on different lines
WIN = 1 << 29  # a won position's value; far above any static value
WIN_SOFT = 1 << 27  # an open four the opponent cannot stop with a five
DECIDED = 1 << 26  # |value| above this is a win or loss found by search
NUM_TIERS = 6
_TIER_SCALE = 1 << 23  # value < 2**23, so tier * scale + value orders by tier first

_OFFSETS = (-4, -3, -2, -1, 1, 2, 3, 4)
_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))
EMPTY, OWN, BLOCKED = 0, 1, 2


# --------------------------------------------------------------------------- tables


def _run_through_centre(lines: np.ndarray) -> np.ndarray:
    """[N, 9] line states with the centre own -> length of the own run through index 4."""
    own = lines == OWN
    right = np.cumprod(own[:, 5:], axis=1).sum(1)
    left = np.cumprod(own[:, 3::-1], axis=1).sum(1)
    return 1 + left + right


def _winning_points(lines: np.ndarray) -> np.ndarray:
    """[N, 9] -> int[N]: empty points that would complete five or more through the centre."""
    count = np.zeros(len(lines), np.int64)
    for w in (0, 1, 2, 3, 5, 6, 7, 8):
        empty = lines[:, w] == EMPTY
        filled = lines.copy()
        filled[:, w] = OWN
        count += empty & (_run_through_centre(filled) >= 5)
    return count


@functools.cache
def pattern_table() -> np.ndarray:
    """int8[3**8]: the class of a neighbourhood (own stone on the centre).

    Index ``sum(state[i] * 3**i)`` over the 8 neighbours at offsets -4..-1, 1..4
    (``state``: 0 empty, 1 own, 2 blocked).
    """
    n = 3**8
    idx = np.arange(n)
    neigh = np.stack([(idx // 3**i) % 3 for i in range(8)], axis=1)
    lines = np.concatenate([neigh[:, :4], np.full((n, 1), OWN), neigh[:, 4:]], axis=1)

    def spread(values: np.ndarray, better) -> np.ndarray:
        """For each line, does some empty neighbour e make ``better(values[line + e])``?"""
        out = np.zeros(n, bool)
        for i in range(8):
            empty = neigh[:, i] == EMPTY
            out |= empty & better(values[np.where(empty, idx + 3**i, idx)])
        return out

    wins = _winning_points(lines)
    five = _run_through_centre(lines) >= 5
    makes_open_four = spread(wins, lambda w: w >= 2)
    makes_four = spread(wins, lambda w: w >= 1)
    open_three = ~five & (wins == 0) & makes_open_four
    makes_open_three = spread(open_three, lambda t: t)
    cls = np.zeros(n, np.int8)
    cls[makes_open_three] = 1
    cls[makes_four] = 2
    cls[makes_open_four] = 3
    cls[wins == 1] = 4
    cls[wins >= 2] = 5
    cls[five] = 6
    # Only the strongest class matters; the assignments above go weakest first.
    return cls


@functools.cache
def neighbour_table(size: int) -> np.ndarray:
    """int32[A, 4, 8]: the neighbours at offsets -4..-1, 1..4 of each point on each
    line; ``A`` (a padding slot, read as blocked) off the board."""
    a = size * size
    table = np.full((a, 4, 8), a, np.int32)
    for p in range(a):
        r, c = divmod(p, size)
        for d, (dr, dc) in enumerate(_DIRECTIONS):
            for i, o in enumerate(_OFFSETS):
                rr, cc = r + o * dr, c + o * dc
                if 0 <= rr < size and 0 <= cc < size:
                    table[p, d, i] = rr * size + cc
    return table


@functools.cache
def window_table(size: int) -> np.ndarray:
    """int32[W, 5]: every five-point window of the board (all four directions)."""
    out = []
    for r in range(size):
        for c in range(size):
            for dr, dc in _DIRECTIONS:
                rr, cc = r + 4 * dr, c + 4 * dc
                if 0 <= rr < size and 0 <= cc < size:
                    out.append([(r + k * dr) * size + c + k * dc for k in range(5)])
    return np.asarray(out, np.int32)


@functools.cache
def near_table(size: int, radius: int = 2) -> np.ndarray:
    """int32[A, (2r+1)**2 - 1]: the points within Chebyshev distance ``radius``
    (``A`` when off the board)."""
    a = size * size
    offsets = [(dr, dc) for dr in range(-radius, radius + 1)
               for dc in range(-radius, radius + 1) if (dr, dc) != (0, 0)]
    table = np.full((a, len(offsets)), a, np.int32)
    for p in range(a):
        r, c = divmod(p, size)
        for i, (dr, dc) in enumerate(offsets):
            if 0 <= r + dr < size and 0 <= c + dc < size:
                table[p, i] = (r + dr) * size + c + dc
    return table


# --------------------------------------------------------------------------- evaluation


def classes(rules: Rules, board: jax.Array, me: jax.Array):
    """Line classes of every point for the stone value ``me`` (+1/-1).

    Returns (cls int32[A, 4], own_near int32[A]): the class each line would get
    if ``me`` played the point (meaningless on occupied points), and the number
    of ``me`` stones within 4 points on the four lines.
    """
    table = jnp.asarray(neighbour_table(rules.size))
    padded = with_off_board(board)
    vals = padded[table]  # [A, 4, 8]
    state = jnp.where(vals == 0, EMPTY, jnp.where(vals == me, OWN, BLOCKED))
    powers = jnp.asarray(3 ** np.arange(8), jnp.int32)
    index = jnp.sum(state * powers, axis=-1)
    cls = jnp.asarray(pattern_table(), jnp.int32)[index]
    return cls, jnp.sum(state == OWN, axis=(-1, -2)).astype(jnp.int32)


def attack_value(cls: jax.Array, own_near: jax.Array) -> jax.Array:
    """int32[A]: a colour's value of playing each point, from its line classes."""
    weights = jnp.asarray(CLASS_WEIGHTS, jnp.int32)
    value = jnp.sum(weights[cls], axis=-1)
    fours = jnp.sum(cls >= 4, axis=-1)
    threes = jnp.sum(cls == 3, axis=-1)
    combo = jnp.where((fours >= 2) | ((fours >= 1) & (threes >= 1)), COMBO_WIN,
                      jnp.where(threes >= 2, COMBO_THREES, 0))
    return value + combo + own_near


def features(rules: Rules, board: jax.Array, to_play: jax.Array):
    """Everything the mentor knows about a position, from the side to move.

    Returns a dict of int32[A] arrays: ``tier``, ``value`` (see the module
    docstring), ``att_me``/``att_opp`` (attack values), ``five_me``/``five_opp``
    (the point completes a five), ``open_four_me``, ``candidate`` (bool: empty and
    near a stone, or the centre of an empty board).
    """
    me = stone(to_play)
    cls_me, near_me = classes(rules, board, me)
    cls_opp, near_opp = classes(rules, board, -me)
    empty = board == 0
    att_me = jnp.where(empty, attack_value(cls_me, near_me), 0)
    att_opp = jnp.where(empty, attack_value(cls_opp, near_opp), 0)
    best_me, best_opp = jnp.max(cls_me, -1), jnp.max(cls_opp, -1)
    five_me = empty & (best_me == 6)
    five_opp = empty & (best_opp == 6)
    open_four_me = empty & (best_me == 5)
    win_combo = lambda cls: (jnp.sum(cls >= 4, -1) >= 2) | (
        (jnp.sum(cls >= 4, -1) >= 1) & (jnp.sum(cls == 3, -1) >= 1))
    combo_me = empty & win_combo(cls_me)
    threat_opp = empty & ((best_opp == 5) | win_combo(cls_opp))
    # Renju: black's forbidden points are no moves of black's and no threats
    # of black's (an overline there is no five); none under the other rules.
    black = rules.forbidden(board)  # black's forbidden points (renju), read once
    mine, theirs = black & (me == 1), black & (me == -1)
    five_me, open_four_me, combo_me = five_me & ~mine, open_four_me & ~mine, combo_me & ~mine
    five_opp, threat_opp = five_opp & ~theirs, threat_opp & ~theirs
    tier = jnp.select([five_me, five_opp, open_four_me, combo_me, threat_opp],
                      [5, 4, 3, 2, 1], 0).astype(jnp.int32)

    stones = jnp.concatenate([board != 0, jnp.zeros(1, bool)])
    near = jnp.any(stones[jnp.asarray(near_table(rules.size))], axis=-1)
    centre = (rules.size // 2) * rules.size + rules.size // 2
    no_stones = ~jnp.any(board != 0)
    near = (near | (no_stones & (jnp.arange(rules.num_actions) == centre))) & ~mine
    return {
        "tier": tier,
        "value": 5 * att_me + 4 * att_opp,
        "att_me": att_me,
        "att_opp": att_opp,
        "five_me": five_me,
        "five_opp": five_opp,
        "open_four_me": open_four_me,
        "candidate": empty & near,
        "windows": window_score(rules, board, me),
    }


TIER_NAMES = {5: "complete a five", 4: "block a four", 3: "make an open four",
              2: "make a double four or four-three", 1: "stop an open three"}


def urgent_moves(rules: Rules, board: jax.Array, to_play: jax.Array):
    """(tier int32[], moves bool[A]): the most urgent tactic the mentor sees for
    the side to move (``TIER_NAMES``; 0 when there is none) and the points
    that carry it out (every candidate when the tier is 0)."""
    f = features(rules, board, to_play)
    tier = jnp.where(f["candidate"], f["tier"], -1)
    top = jnp.maximum(jnp.max(tier), 0)
    return top, f["candidate"] & (f["tier"] == top)


def candidate_order(f) -> tuple[jax.Array, jax.Array]:
    """(order key int32[A] with -1 for excluded points, urgent tier int32[]).

    Candidates are the points of the highest tier present (all candidates when
    that tier is 0); the key orders them by value.
    """
    tier = jnp.where(f["candidate"], f["tier"], -1)
    top = jnp.max(tier)
    allowed = f["candidate"] & (f["tier"] == jnp.maximum(top, 0))
    allowed = jnp.where(top > 0, allowed, f["candidate"])
    return jnp.where(allowed, f["value"], -1), top


TUPLE_MOVER = (0, 1, 10, 100, 1000)
TUPLE_OTHER = (0, 1, 10, 100, 1000)


def window_score(rules: Rules, board: jax.Array, me: jax.Array) -> jax.Array:
    """int32[]: the five-point windows held by ``me`` alone, weighted by stones,
    minus those held by the opponent alone (``me`` to move)."""
    vals = board[jnp.asarray(window_table(rules.size))]
    n_me = jnp.sum(vals == me, -1)
    n_opp = jnp.sum(vals == -me, -1)
    mine = jnp.where(n_opp == 0, jnp.asarray(TUPLE_MOVER, jnp.int32)[jnp.minimum(n_me, 4)], 0)
    theirs = jnp.where(n_me == 0, jnp.asarray(TUPLE_OTHER, jnp.int32)[jnp.minimum(n_opp, 4)], 0)
    return jnp.sum(mine) - jnp.sum(theirs)


def static_value(f) -> jax.Array:
    """int32[]: the position's value for the side to move, without search."""
    n_five_opp = jnp.sum(f["five_opp"])
    heuristic = f["windows"] + jnp.max(f["att_me"]) // 4  # the mover's tempo
    return jnp.select(
        [jnp.any(f["five_me"]), n_five_opp >= 2,
         jnp.any(f["open_four_me"]) & (n_five_opp == 0)],
        [WIN, -WIN, WIN_SOFT], heuristic).astype(jnp.int32)


def _back_up(child_value: jax.Array) -> jax.Array:
    """A child's value seen from its parent: negated, decided results one step weaker."""
    v = -child_value
    return jnp.where(v > DECIDED, v - 1, jnp.where(v < -DECIDED, v + 1, v))


def top_candidates(key_order: jax.Array, beam: int) -> tuple[jax.Array, jax.Array]:
    """The ``beam`` best points by key (ties: lower index first) and their validity."""
    order = jnp.argsort(-key_order, stable=True)[:beam]
    return order.astype(jnp.int32), key_order[order] >= 0


def negamax(rules: Rules, board: jax.Array, to_play: jax.Array, depth: int,
            beam: int) -> jax.Array:
    """int32[]: the depth-``depth`` value of a position for the side to move."""
    f = features(rules, board, to_play)
    if depth == 0:
        return static_value(f)
    _, values, _ = _children_values(rules, board, to_play, f, depth, beam)
    return values.max()


def _children_values(rules, board, to_play, f, depth, beam):
    key_order, _ = candidate_order(f)
    moves, valid = top_candidates(key_order, beam)
    me = stone(to_play)

    def child(move):
        b = board.at[move].set(me)
        return negamax(rules, b, 1 - to_play, depth - 1, beam)

    wins = f["five_me"][moves]
    values = jnp.where(wins, WIN, _back_up(jax.vmap(child)(moves)))
    values = jnp.where(valid, values, -2 * WIN)
    full = ~jnp.any(valid)  # no empty point left: a draw
    values = jnp.where(full & (jnp.arange(beam) == 0), 0, values)
    return moves, values, valid


@dataclasses.dataclass(frozen=True)
class Mentor:
    """A mentor of a given ``level`` (0..3) on ``rules``' board."""

    rules: Rules
    level: int = 2
    beam: int | None = None  # candidates searched per node (None: DEFAULT_BEAM[level])

    def __post_init__(self):
        if self.rules.rule not in ("freestyle", "renju"):
            raise ValueError(f"the mentor knows freestyle and renju, not "
                             f"rule {self.rules.rule!r}")
        if not isinstance(self.level, int) or not 0 <= self.level <= MAX_LEVEL:
            raise ValueError(f"mentor level must be an integer in 0..{MAX_LEVEL}, "
                             f"got {self.level!r}")
        if self.beam is not None and (not isinstance(self.beam, int) or self.beam < 1):
            raise ValueError(f"mentor beam must be a positive integer, got {self.beam!r}")

    @property
    def width(self) -> int:
        return self.beam if self.beam is not None else max(DEFAULT_BEAM[self.level], 1)

    def root(self, board: jax.Array, to_play: jax.Array):
        """(moves int32[k], values int32[k], valid bool[k]) of the root candidates.

        Level 0: the candidates by order key (value ``key``); level >= 1 the
        negamax values of the ``width`` best candidates.
        """
        f = features(self.rules, board, to_play)
        if self.level == 0:
            key_order, _ = candidate_order(f)
            moves, valid = top_candidates(key_order, self.rules.num_actions)
            values = jnp.where(valid, key_order[moves], -2 * WIN)
            return moves, values, valid
        return _children_values(self.rules, board, to_play, f, self.level, self.width)

    def choose(self, key: jax.Array, state: State) -> jax.Array:
        """int32[]: the mentor's move in one position (random among equal best)."""
        moves, values, valid = self.root(state.board, state.to_play)
        best = values == jnp.max(values)
        noise = jax.random.uniform(key, values.shape)
        pick = jnp.argmax(jnp.where(best & valid, noise, -1.0))
        # A full board or no candidate: the first point black (renju) may play.
        legal_any = jnp.argmax((state.board == 0)
                               & ~self.rules.forbidden(state.board, stone(state.to_play)))
        return jnp.where(jnp.any(valid), moves[pick], legal_any).astype(jnp.int32)

    def act(self, key: jax.Array, states: State) -> jax.Array:
        """arena's player protocol: a batch of states -> int32[G] moves."""
        keys = jax.random.split(key, states.board.shape[0])
        return jax.vmap(self.choose)(keys, states)


def mentor_player(rules: Rules, level: int, beam: int | None = None):
    """A mentor as an arena player (``act(key, states) -> actions``)."""
    return Mentor(rules, level, beam).act
