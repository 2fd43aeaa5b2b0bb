"""Stage 1 of the curriculum: generated basic-rule positions (paper Section IV.B).

The paper teaches the nets the basic strategy first, from ~80,000 generated
positions: *attack* (the side to move has an open four; pi one-hot on a
winning point, z = 1) and *defence* (the side to move faces a four blocked on
one side; pi on the block, z = 0). This generator makes four kinds:

====  ===============  ========================================  ======  =====
kind  name             the side to move (A) ...                  pi on   z
====  ===============  ========================================  ======  =====
0     four attack      has a four (open four, four, split four)  W(A)    1
1     four defence     faces B's four (blocked or split)         W(B)    0
2     three attack     has an open three (consecutive or split)  D(A)    1
3     three defence    faces B's open three                      block   0
====  ===============  ========================================  ======  =====

A is the side to move and B the opponent. For a player P:

* ``W(P)``: the empty points where P makes a five at once (per the rule;
  'standard' needs exactly five; 'renju' exactly five for black, five or more
  for white).
* ``D(P)``: the empty points where P makes two or more winning points at once
  (an open four, or a double four). When neither side has a winning point,
  playing a point of ``D(A)`` wins by force in three plies, and these are
  exactly the moves that do.

Renju: black's forbidden points (``Rules.forbidden``: overline, double four,
double three) are no moves of black's, so not in black's ``D`` (a double four
is forbidden; so is an open four that is also a double three) and never a
black label point (a block black may not play is no block). Black's ``W``
points are never forbidden (an exact five wins). Every rule below reads ``W``
and ``D`` so, per colour; "after the block B has no ``D`` point" reads B's
forbidden points on the board after the block. White's ``D`` is still only
its open and double fours: a four whose five point black may not block is not
counted (nor labelled) as a win.

Label rules. Every position is checked *after* the noise is added, on the
whole board; a position that fails its kind's rule is resampled (see
``oversample``) and, if there are still too few, emitted with ``valid=False``:

* all kinds: no five (no run of five or more, either colour) on the board;
  ``#black == #white`` when black is to move, ``#black == #white + 1`` when
  white is; the opponent has at least one stone (it holds the last move).
* four attack: ``W(A)`` not empty. pi is spread over ``W(A)`` (every
  immediate win on the board, the noise's included). Always a correct win.
* four defence: ``W(A)`` empty (A cannot win first), ``W(B)`` is exactly one
  point (the label: every other move loses at once), ``D(A)`` empty (the block
  is not also a winning attack, so z = 0 is not an underestimate) and after
  the block B has no ``D`` point (the block holds for three plies; checked
  exactly when B's ``D`` points before the block are all on the template's
  points, and such positions only are kept; under renju this placement
  condition reads black's forbidden double-threat points too).
* three attack: ``W(A)`` and ``W(B)`` empty, ``D(A)`` not empty. pi is spread
  over ``D(A)``: every move that wins within three plies.
* three defence: ``W(A)``, ``W(B)`` and ``D(A)`` empty, ``D(B)`` not empty,
  every point of ``D(B)`` is one of the template's points (on the pattern's
  line) with two or more of its threats along that line. The label is every
  move ``m`` after which B has no ``D`` point: the ends of the three, also
  the gap of a split three, and the far point of a three that is open on one
  side only. (The two conditions on
  ``D(B)`` make the pattern's line the only place such moves can be, so the
  label is the complete set of these "direct blocks".) Counter-attacks with a
  four are not labelled, and nothing deeper than three plies is searched.

With ``policy='uniform'`` pi is uniform over the label points; with
``'one_hot'`` it is one-hot on one of them, drawn at random (the paper's
one-hot vectors; same expectation).

Placement: a pattern (a template along a line, possibly reversed) is put at a
random place in one of the four directions (horizontal, vertical, diagonal,
anti-diagonal), with its stones and required empty points on the board;
blocking stones and margins may fall off the edge, so edge-blocked fours occur.
Then the noise stones, both colours, on random empty points outside the pattern
and its margins (within ``noise_radius`` of the pattern if set), as many as
the stone counts need plus ``min_noise..max_noise`` more per colour; and the
whole position under a random one of the 8 symmetries (``agz_jax.game.symmetry``).
The opponent's last move (plane L) is one of the pattern's B stones in the
defence kinds (B has just made the threat) and a random B stone in the attack
kinds.

Everything is a pure JAX function of the key: ``generate`` is jittable with
static ``rules``, ``num_positions`` and ``cfg``, and vmapped over positions (in
chunks, ``jax.lax.map``). The kinds come in fixed numbers (the mix fractions
times ``num_positions``, rounded) and are shuffled together.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.base.checks import Section, integer, number, one_of, require, setting
from agz_jax.config.schema import FeaturesConfig
from agz_jax.curriculum.threat_maps import DIRECTIONS, threat_counts, threat_maps
from agz_jax.game import symmetry
from agz_jax.game.gomoku import Rules, State, played_at_from_last, stone
from agz_jax.nets import features as features_lib
from agz_jax.training.replay import Examples

KINDS = ("four_attack", "four_defence", "three_attack", "three_defence")
FOUR_ATTACK, FOUR_DEFENCE, THREE_ATTACK, THREE_DEFENCE = range(4)
COLOURS = ("both", "black", "white", "paper")
POLICIES = ("uniform", "one_hot")
FRACTION = number(0, 1)
OVERSAMPLE = number(1, 16)

# Templates along a line, one character a cell:
#   '.' free (noise may go there; may be off the board)
#   'a' a stone of the side to move (A), 'b' an opponent's (B) stone
#   '_' an empty point that must stay empty
#   'A' an A stone blocking the line, if on the board (off the board: the edge blocks)
#   '-' a margin: kept free of noise, may be off the board
# Each template is reversed at random. A template listed twice is drawn twice as often.
_TEMPLATES = {
    FOUR_ATTACK: ("-_aaaa_-", "-_aaaa_-", "-aaaa_-", "-aaa_a-", "-aa_aa-"),
    FOUR_DEFENCE: ("Abbbb_-", "Abbbb_-", "-bbb_b-", "-bb_bb-"),
    THREE_ATTACK: ("-_aaa_-", "-_aaa_-", "-_a_aa_-"),
    THREE_DEFENCE: ("-_bbb_-", "-_bbb_-", "-_b_bb_-"),
}
_CODES = {".": 0, "a": 1, "b": 2, "_": 3, "A": 4, "-": 5}
_LEN = 9  # cells per template line (templates are padded with '.')
_MARGIN = 4  # three-defence candidates: the template's cells and 4 more each side
_CHUNK = 256  # candidates per vmapped chunk (bounds memory; not a semantic knob)


@dataclasses.dataclass(frozen=True)
class BasicRulesConfig(Section):
    """How stage 1's positions are generated (paper IV.B); how many, and the
    training on them, are the run config's ``basic`` section. Errors name
    ``basic_rules.<field>``."""

    section = "basic_rules"
    min_noise: int = setting(0, integer(0))
    """Fewest noise stones per colour on top of those the stone counts need."""
    max_noise: int = setting(12, integer(0))
    """Most noise stones per colour: uniform in ``min_noise..max_noise``."""
    noise_radius: int = setting(0, integer(0))
    """0: noise anywhere on the board; r > 0: within Chebyshev distance r of the pattern."""
    four_attack: float = setting(0.3, FRACTION)
    """Fraction of four-attack positions (the four fractions sum to 1)."""
    four_defence: float = setting(0.3, FRACTION)
    """Fraction of four-defence positions."""
    three_attack: float = setting(0.2, FRACTION)
    """Fraction of three-attack positions."""
    three_defence: float = setting(0.2, FRACTION)
    """Fraction of three-defence positions."""
    colours: str = setting("both", one_of(COLOURS))
    """Colour of the side to move: 'both' (either, at random: both nets of Double
    Networks learn attack and defence), 'black', 'white', or 'paper' (attack
    with black, defence with white, as the paper describes)."""
    policy: str = setting("uniform", one_of(POLICIES))
    """pi over the label points: 'uniform' over all of them, or 'one_hot' on a
    random one."""
    oversample: float = setting(1.25, OVERSAMPLE)
    """Candidates generated per position wanted; the first valid ones are kept."""

    def cross_check(self):
        require(self.max_noise >= self.min_noise, "basic_rules.max_noise",
                f"must be an integer >= min_noise ({self.min_noise})", self.max_noise)
        total = sum(getattr(self, name) for name in KINDS)
        require(abs(total - 1) < 1e-6, "basic_rules.three_defence",
                f"and the other kind fractions ({', '.join(KINDS)}) must sum to 1 (sum {total})",
                self.three_defence)

    def counts(self, num_positions: int) -> tuple[int, ...]:
        """Positions of each kind: the fractions times ``num_positions``, rounded
        (largest remainders) so that they sum to ``num_positions``."""
        exact = [getattr(self, k) * num_positions for k in KINDS]
        out = [math.floor(x) for x in exact]
        order = sorted(range(len(KINDS)), key=lambda i: (out[i] - exact[i], i))
        for i in order[: num_positions - sum(out)]:
            out[i] += 1
        return tuple(out)


class Positions(NamedTuple):
    """Generated positions [M] and how they were made.

    examples: the training examples (obs int8[M,H,W,3], policy float32[M,A],
      z float32[M], to_play int32[M], valid bool[M]).
    states: the ``gomoku.State`` of each position (leading axis M).
    kind: int32[M], index into ``KINDS``.
    symmetry: int32[M], the symmetry applied last (0..7).
    direction: int32[M], the pattern's line on the final board: 0 horizontal,
      1 vertical, 2 diagonal (down-right), 3 anti-diagonal (down-left).
    """

    examples: Examples
    states: State
    kind: jax.Array
    symmetry: jax.Array
    direction: jax.Array


# --------------------------------------------------------------------------
# One candidate position, from one row of uniforms (one RNG call per batch:
# every jax.random call inlines a threefry hash, and they dominated compile time).
# --------------------------------------------------------------------------

# u[_U_*] scalars, then three blocks of A uniforms: noise order, last move, one-hot pick
_U_COLOUR, _U_TEMPLATE, _U_REVERSE, _U_DIRECTION, _U_ROW, _U_COL, _U_NOISE, _U_SYM = range(8)
_U_SCALARS = 8


def _num_uniforms(rules: Rules) -> int:
    return _U_SCALARS + 3 * rules.num_actions


def _randint(u, lo, hi):
    """An integer uniform in lo..hi (inclusive) from a uniform u in [0, 1)."""
    return jnp.minimum(lo + jnp.floor(u * (hi - lo + 1)).astype(jnp.int32), hi)


def _pick(u_block, mask):
    """A uniformly random True point of ``mask`` (index 0 if none)."""
    return jnp.argmax(jnp.where(mask, u_block, -1.0)).astype(jnp.int32)


@functools.cache
def _template_table() -> tuple[np.ndarray, np.ndarray]:
    """(int32[4, T, _LEN] codes, int32[4] templates per kind); rows padded with '.'."""
    most = max(len(v) for v in _TEMPLATES.values())
    table = np.zeros((len(KINDS), most, _LEN), np.int32)
    for kind, templates in _TEMPLATES.items():
        for i, t in enumerate(templates):
            table[kind, i] = [_CODES[ch] for ch in t.ljust(_LEN, ".")]
    return table, np.asarray([len(_TEMPLATES[k]) for k in range(len(KINDS))], np.int32)


class _Placed(NamedTuple):
    codes: jax.Array  # int32[_LEN] template codes (after the random reversal)
    d: jax.Array  # direction index
    r: jax.Array  # int32[_LEN] rows of the template's points (may be off the board)
    c: jax.Array  # int32[_LEN] columns
    cells: jax.Array  # int32[_LEN] points, A when off the board
    board: jax.Array  # int8[A] the pattern's stones
    reserved: jax.Array  # bool[A] no noise here
    fits: jax.Array  # bool[] the required points are on the board


def _place(rules: Rules, kind, u, colour) -> _Placed:
    """The template at a random place and direction (its required points on the board)."""
    size, a = rules.size, rules.num_actions
    table, num = (jnp.asarray(x) for x in _template_table())
    t = table[kind, _randint(u[_U_TEMPLATE], 0, num[kind] - 1)]
    t = jnp.where(u[_U_REVERSE] < 0.5, t[::-1], t)
    d = _randint(u[_U_DIRECTION], 0, 3)
    dr, dc = jnp.asarray(DIRECTIONS)[d]
    required = (t == 1) | (t == 2) | (t == 3)
    # required points are contiguous, lo..hi: the origins (point 0) keeping them on the board
    lo = jnp.argmax(required)
    hi = _LEN - 1 - jnp.argmax(required[::-1])

    def origins(step):
        first = jnp.where(step > 0, -lo, jnp.where(step < 0, hi, 0))
        last = jnp.where(step > 0, size - 1 - hi, jnp.where(step < 0, size - 1 + lo, size - 1))
        return first, last

    (r_first, r_last), (c_first, c_last) = origins(dr), origins(dc)
    fits = (r_first <= r_last) & (c_first <= c_last)
    i = jnp.arange(_LEN)
    r = _randint(u[_U_ROW], r_first, r_last) + i * dr
    c = _randint(u[_U_COL], c_first, c_last) + i * dc
    on_board = (r >= 0) & (r < size) & (c >= 0) & (c < size)
    cells = jnp.where(on_board, r * size + c, a)
    me = stone(colour)
    values = jnp.where((t == 1) | (t == 4), me, jnp.where(t == 2, -me, 0)).astype(jnp.int8)
    board = jnp.zeros(a + 1, jnp.int8).at[cells].set(values)[:a]
    reserved = jnp.zeros(a + 1, bool).at[cells].set(t != 0)[:a]
    return _Placed(t, d, r, c, cells, board, reserved, fits)


def _add_noise(rules: Rules, cfg: BasicRulesConfig, u, colour, placed: _Placed):
    """Noise stones of both colours on free points; the counts fit the side to move.

    Returns (board int8[A], enough bool[]: there were enough free points).
    """
    a = rules.num_actions
    board = placed.board
    me = stone(colour)
    n_me = jnp.sum(board == me)
    n_opp = jnp.sum(board == -me)
    extra = _randint(u[_U_NOISE], cfg.min_noise, cfg.max_noise)
    # black to move: #black == #white; white to move: #black == #white + 1
    total_me = jnp.maximum(n_me, n_opp - colour) + extra
    noise_me = total_me - n_me
    noise_opp = total_me + colour - n_opp
    free = (board == 0) & ~placed.reserved
    if cfg.noise_radius > 0:
        rows, cols = jnp.divmod(jnp.arange(a), rules.size)
        dist = jnp.maximum(jnp.abs(rows[:, None] - placed.r), jnp.abs(cols[:, None] - placed.c))
        required = (placed.codes == 1) | (placed.codes == 2) | (placed.codes == 3)
        dist = jnp.where(required[None, :], dist, 4 * rules.size)
        free = free & (jnp.min(dist, axis=1) <= cfg.noise_radius)
    # the free points in a random order (top_k of uniforms; a sort is 10x slower on CPU)
    most = min(2 * cfg.max_noise + _LEN, a)
    order_u = jnp.where(free, u[_U_SCALARS:_U_SCALARS + a], -1.0)
    order = jax.lax.top_k(order_u, most)[1]
    rank = jnp.where(order_u[order] >= 0, jnp.arange(most), most)  # not free: no stone
    add = jnp.where(rank < noise_me, me, jnp.where(rank < noise_me + noise_opp, -me, 0))
    board = board.at[order].add(add.astype(jnp.int8))
    return board, jnp.sum(free) >= noise_me + noise_opp


def _line_blocks(rules: Rules, board, me, counts_opp, placed: _Placed, standard):
    """bool[A]: the points m near the pattern on its line after which B (-me) has
    no double-threat point among the template's points.

    An A stone on the line changes, for the points on the line, only the
    windows along the line. So the line is cut out (4 points beyond the
    template each side for the candidates' windows, +1 for the 'standard'
    flanks) and B's threats along it recounted with each candidate m played,
    the other three directions' counts kept from ``counts_opp`` [4, H, W].
    Exact for "no D(B) point is left" when D(B) lies within the template.

    ``standard``: B's reading of a five (``threat_maps``; traced under renju).
    Under renju, when B is black, its points that are forbidden once m is
    played (``Rules.forbidden`` of the whole board after m) are no D points: a
    stone of A changes no run of B, so B's D points after m are among those
    before it, and only their forbidden status needs the board read again.
    """
    size, a = rules.size, rules.num_actions
    dr, dc = jnp.asarray(DIRECTIONS)[placed.d]
    j = jnp.arange(-_MARGIN - 1, _LEN + _MARGIN + 1)
    rr, cc = placed.r[0] + j * dr, placed.c[0] + j * dc
    on = (rr >= 0) & (rr < size) & (cc >= 0) & (cc < size)
    points = jnp.where(on, rr * size + cc, a)
    line = jnp.concatenate([board.astype(jnp.int32), jnp.int32([2])])[points]  # 2: off board
    flat = jnp.concatenate([counts_opp.reshape(4, a), jnp.zeros((4, 1), jnp.int32)], axis=1)
    others = flat.sum(0)[points] - jnp.take(flat, placed.d, axis=0)[points]
    template = (j >= 0) & (j < _LEN)
    cand = jnp.arange(1, line.shape[0] - 1)  # all but the two flank points

    def blocks(m):
        after = line.at[m].set(me)
        again = threat_counts(after[None, :], -me, standard, dirs=(0,))[0, 0]  # along
        left = template & (after == 0) & (others + again >= 2)
        if rules.rule == "renju":
            played = board.at[points[m]].set(me.astype(board.dtype), mode="drop")
            barred = jnp.concatenate([rules.forbidden(played, -me), jnp.zeros(1, bool)])
            left = left & ~barred[points]
        return ~jnp.any(left)

    good = (line[cand] == 0) & jax.vmap(blocks)(cand)
    return jnp.zeros(a, bool).at[jnp.where(good, points[cand], a)].set(True, mode="drop")


def _colour(cfg: BasicRulesConfig, kind, u) -> jax.Array:
    if cfg.colours == "both":
        return (u >= 0.5).astype(jnp.int32)
    if cfg.colours == "paper":
        return ((kind == FOUR_DEFENCE) | (kind == THREE_DEFENCE)).astype(jnp.int32)
    return jnp.int32(0 if cfg.colours == "black" else 1)


def _candidate(rules: Rules, cfg: BasicRulesConfig, kind, u):
    """One candidate of ``kind`` (int32[]) from uniforms u [_num_uniforms]:
    (State, policy float32[A], valid, symmetry, direction). The label rules are
    the module docstring's."""
    size, a = rules.size, rules.num_actions
    colour = _colour(cfg, kind, u[_U_COLOUR])
    placed = _place(rules, kind, u, colour)
    board, enough = _add_noise(rules, cfg, u, colour, placed)

    me = stone(colour).astype(jnp.int32)
    if rules.rule == "renju":  # exactly five for black, five or more for white
        exact, exact_axis = jnp.stack([me == 1, me == -1]), 0
    else:
        exact, exact_axis = rules.rule == "standard", None
    win, counts, five = jax.vmap(threat_maps, in_axes=(None, 0, exact_axis))(
        board.reshape(size, size), jnp.stack([me, -me]), exact)
    win = win.reshape(2, a)
    dbl = counts.sum(1).reshape(2, a) >= 2  # D, where W is empty
    win_me, win_opp, dbl_me, dbl_opp = win[0], win[1], dbl[0], dbl[1]
    any_ = jnp.any
    template = jnp.zeros(a + 1, bool).at[placed.cells].set(True)[:a]
    along = jnp.take(counts[1], placed.d, axis=0).reshape(a) >= 2
    blocks = _line_blocks(rules, board, me, counts[1], placed,
                          exact if exact_axis is None else exact[1])
    # where D(B) may lie: read on all of B's double-threat points (under renju
    # black's forbidden ones too: the cut-out's exactness needs them)
    opp_in_template = ~any_(dbl_opp & ~template)
    opp_along = ~any_(dbl_opp & ~along)
    if rules.rule == "renju":  # black's forbidden points: neither its D points nor its moves
        barred = rules.forbidden(board)  # black's (its W points are never among them)
        barred_me, barred_opp = barred & (me == 1), barred & (me == -1)
        dbl_me, dbl_opp = dbl_me & ~barred_me, dbl_opp & ~barred_opp
        blocks = blocks & ~barred_me  # so a four defence's block is a move A may play
    quiet = ~any_(win_me) & ~any_(win_opp)
    rules_ok = jnp.stack([
        any_(win_me),
        ~any_(win_me) & ~any_(dbl_me) & (jnp.sum(win_opp) == 1) & any_(win_opp & blocks)
        & opp_in_template,
        quiet & any_(dbl_me),
        quiet & ~any_(dbl_me) & any_(dbl_opp) & opp_in_template & opp_along
        & any_(blocks),
    ])[kind]
    label = jnp.stack([win_me, win_opp, dbl_me, blocks])[kind]

    if cfg.policy == "uniform":
        policy = label / jnp.maximum(jnp.sum(label), 1)
    else:
        pick = _pick(u[_U_SCALARS + 2 * a:], label)
        policy = jax.nn.one_hot(pick, a) * any_(label)
    policy = policy.astype(jnp.float32)

    defence = (kind == FOUR_DEFENCE) | (kind == THREE_DEFENCE)
    pattern_opp = jnp.zeros(a + 1, bool).at[placed.cells].set(placed.codes == 2)[:a]
    source = jnp.where(defence, pattern_opp, board == -me)  # B has just made the threat
    last = _pick(u[_U_SCALARS + a:_U_SCALARS + 2 * a], source)
    valid = placed.fits & enough & ~any_(five) & rules_ok & any_(source)

    g = _randint(u[_U_SYM], 0, symmetry.NUM_SYMMETRIES - 1)
    # point p of the board goes to point moved[p] of the transformed board
    moved = jnp.asarray(symmetry.permutations(size))[symmetry.inverse(g)]
    first = jnp.argmax((placed.codes == 1) | (placed.codes == 2) | (placed.codes == 3))
    p, q = moved[placed.cells[first]], moved[placed.cells[first + 1]]  # both required
    dr, dc = q // size - p // size, q % size - p % size
    direction = jnp.where(dr == 0, 0, jnp.where(dc == 0, 1, jnp.where(dr == dc, 2, 3)))

    num_moves = jnp.sum(board != 0).astype(jnp.int32)
    state = State(
        board=symmetry.transform_policy(board, g, size),
        to_play=colour,
        last_action=moved[last],
        num_moves=num_moves,
        winner=jnp.int32(-1),
        done=jnp.bool_(False),
        illegal=jnp.bool_(False),
        played_at=played_at_from_last(a, moved[last], num_moves),
        rank=jnp.int32(0),
    )
    policy = symmetry.transform_policy(policy, g, size)
    return state, policy, valid, g, direction.astype(jnp.int32)


def generate_positions(rules: Rules, key: jax.Array, num_positions: int,
                       cfg: BasicRulesConfig | None = None,
                       features: FeaturesConfig | None = None) -> Positions:
    """``num_positions`` basic-rule positions, their states and how they were made.

    Pure and deterministic in ``key``; jitted, with ``rules``, ``num_positions``,
    ``cfg`` and ``features`` static (``None`` is the default config; the
    observations are ``features.observe``'s, rank 0, and of the stones' ages only
    the last move's is known). Each kind gets
    ``oversample`` times its count in candidates and keeps its first valid
    ones; if too few are valid the rest have ``valid=False``. The kinds are
    then shuffled together.
    """
    return _generate(rules, key, num_positions, BasicRulesConfig() if cfg is None else cfg,
                     features_lib.DEFAULT if features is None else features)


@functools.partial(jax.jit, static_argnums=(0, 2, 3, 4))
def _generate(rules: Rules, key: jax.Array, num_positions: int,
              cfg: BasicRulesConfig, features: FeaturesConfig) -> Positions:
    wanted = cfg.counts(num_positions)
    per_kind = [math.ceil(n * cfg.oversample) for n in wanted]
    total = sum(per_kind)
    if total > _CHUNK:  # whole chunks: lax.map would compile a remainder batch too
        spare = math.ceil(total / _CHUNK) * _CHUNK - total
        busiest = int(np.argmax(wanted))
        per_kind[busiest] += spare
        total += spare
    kinds = np.repeat(np.arange(len(KINDS), dtype=np.int32), per_kind)
    # one uniform draw for everything (each jax.random call costs compile time)
    width = _num_uniforms(rules)
    u = jax.random.uniform(key, (total * width + num_positions,))
    shuffle = jnp.argsort(u[total * width:])
    u = u[:total * width].reshape(total, width)
    out = jax.lax.map(lambda x: _candidate(rules, cfg, x[0], x[1]), (jnp.asarray(kinds), u),
                      batch_size=min(_CHUNK, total))
    # per kind, its valid candidates first: keep the first `wanted` of each kind
    order = jnp.argsort(2 * jnp.asarray(kinds) + ~out[2], stable=True)
    starts = np.concatenate([[0], np.cumsum(per_kind)[:-1]])
    keep = jnp.concatenate([order[s:s + n] for s, n in zip(starts, wanted, strict=True)])
    keep = keep[shuffle]
    state, policy, valid, sym, direction = jax.tree.map(lambda x: x[keep], out)
    kind = jnp.asarray(kinds)[keep]
    z = jnp.where((kind == FOUR_ATTACK) | (kind == THREE_ATTACK), 1.0, 0.0).astype(jnp.float32)
    examples = Examples(
        obs=features_lib.observe_batch(features, rules, state).astype(jnp.int8),
        policy=policy,
        z=z,
        to_play=state.to_play,
        valid=valid,
    )
    return Positions(examples, state, kind, sym, direction)


def generate(rules: Rules, key: jax.Array, num_positions: int,
             cfg: BasicRulesConfig | None = None,
             features: FeaturesConfig | None = None) -> Examples:
    """Stage 1's training examples [num_positions] (see ``generate_positions``)."""
    return generate_positions(rules, key, num_positions, cfg, features).examples
