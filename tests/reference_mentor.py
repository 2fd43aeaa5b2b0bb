"""The mentor's evaluation and search in plain Python: the oracle for ``agz_jax.game.mentor``.

Written the direct way: the line through a point is walked on the board (no
neighbour table, no lookup table), a line's class is found by trying the empty
points one by one, the search recurses over Python lists. Only the constants
(weights, tiers, win values) are shared with the JAX version; they are data,
not logic. Colours: 0 black (+1), 1 white (-1); points ``row * size + col``.
"""

from __future__ import annotations

import functools

from agz_jax.game import mentor as _mentor  # for the window weights, read at call time
from agz_jax.game.mentor import (
    CLASS_WEIGHTS,
    COMBO_THREES,
    COMBO_WIN,
    DECIDED,
    WIN,
    WIN_SOFT,
)

DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


def _five_through_centre(line):
    """line: tuple of 9 in {'.', 'o' own, 'x' blocked}, centre (index 4) own."""
    n = 1
    i = 3
    while i >= 0 and line[i] == "o":
        n, i = n + 1, i - 1
    i = 5
    while i <= 8 and line[i] == "o":
        n, i = n + 1, i + 1
    return n >= 5


def _put(line, i):
    return line[:i] + ("o",) + line[i + 1:]


def _empties(line):
    return [i for i in range(9) if i != 4 and line[i] == "."]


def _wins(line):
    return sum(_five_through_centre(_put(line, w)) for w in _empties(line))


def _is_open_three(line):
    return (not _five_through_centre(line) and _wins(line) == 0
            and any(_wins(_put(line, e)) >= 2 for e in _empties(line)))


@functools.cache
def line_class(line):
    """The class (0..6) of a 9-point line with own stone on the centre."""
    if _five_through_centre(line):
        return 6
    w = _wins(line)
    if w >= 2:
        return 5
    if w == 1:
        return 4
    after = [_put(line, e) for e in _empties(line)]
    if any(_wins(x) >= 2 for x in after):
        return 3
    if any(_wins(x) >= 1 for x in after):
        return 2
    if any(_is_open_three(x) for x in after):
        return 1
    return 0


def read_line(board, size, p, direction, me):
    """The 9 points centred on p along a direction, from ``me``'s side, centre own."""
    r, c = divmod(p, size)
    dr, dc = direction
    out = []
    for o in range(-4, 5):
        rr, cc = r + o * dr, c + o * dc
        if o == 0:
            out.append("o")
        elif not (0 <= rr < size and 0 <= cc < size):
            out.append("x")
        else:
            v = board[rr * size + cc]
            out.append("." if v == 0 else "o" if v == me else "x")
    return tuple(out)


def attack(board, size, p, me):
    """(attack value, classes of the 4 lines) of ``me`` playing the empty point p."""
    lines = [read_line(board, size, p, d, me) for d in DIRECTIONS]
    cls = [line_class(ln) for ln in lines]
    value = sum(CLASS_WEIGHTS[k] for k in cls)
    fours = sum(k >= 4 for k in cls)
    threes = sum(k == 3 for k in cls)
    if fours >= 2 or (fours >= 1 and threes >= 1):
        value += COMBO_WIN
    elif threes >= 2:
        value += COMBO_THREES
    value += sum(ln.count("o") - 1 for ln in lines)  # own stones, not the centre
    return value, cls


def _win_combo(cls):
    fours = sum(k >= 4 for k in cls)
    return fours >= 2 or (fours >= 1 and any(k == 3 for k in cls))


def features(board, size, to_play):
    """Per point: dicts of tier, value, att_me, att_opp, five_me, five_opp,
    open_four_me, candidate (see agz_jax.game.mentor.features)."""
    me = 1 if to_play == 0 else -1
    n = size * size
    f = {k: [0] * n for k in ("tier", "value", "att_me", "att_opp")}
    for k in ("five_me", "five_opp", "open_four_me", "candidate"):
        f[k] = [False] * n
    has_stone = any(v != 0 for v in board)
    centre = (size // 2) * size + size // 2
    for p in range(n):
        if board[p] != 0:
            continue
        a_me, c_me = attack(board, size, p, me)
        a_opp, c_opp = attack(board, size, p, -me)
        f["att_me"][p], f["att_opp"][p] = a_me, a_opp
        f["value"][p] = 5 * a_me + 4 * a_opp
        f["five_me"][p] = max(c_me) == 6
        f["five_opp"][p] = max(c_opp) == 6
        f["open_four_me"][p] = max(c_me) == 5
        if f["five_me"][p]:
            tier = 5
        elif f["five_opp"][p]:
            tier = 4
        elif f["open_four_me"][p]:
            tier = 3
        elif _win_combo(c_me):
            tier = 2
        elif max(c_opp) == 5 or _win_combo(c_opp):
            tier = 1
        else:
            tier = 0
        f["tier"][p] = tier
        r, c = divmod(p, size)
        near = any(board[rr * size + cc] != 0
                   for rr in range(max(r - 2, 0), min(r + 3, size))
                   for cc in range(max(c - 2, 0), min(c + 3, size)))
        f["candidate"][p] = near or (not has_stone and p == centre)
    f["windows"] = window_score(board, size, me)
    return f


def ordered_candidates(f):
    """Candidate points, most urgent tier only (all if none is urgent), by value
    descending then index ascending; with their order keys."""
    cands = [p for p, ok in enumerate(f["candidate"]) if ok]
    top = max((f["tier"][p] for p in cands), default=0)
    if top > 0:
        cands = [p for p in cands if f["tier"][p] == top]
    cands.sort(key=lambda p: (-f["value"][p], p))
    return cands


def static_value(f):
    n_five_opp = sum(f["five_opp"])
    if any(f["five_me"]):
        return WIN
    if n_five_opp >= 2:
        return -WIN
    if any(f["open_four_me"]) and n_five_opp == 0:
        return WIN_SOFT
    return f["windows"] + max(f["att_me"]) // 4


def window_score(board, size, me):
    """Five-point windows held by ``me`` alone (weighted by stones) minus the
    opponent's, walking every window of every line."""
    total = 0
    for r in range(size):
        for c in range(size):
            for dr, dc in DIRECTIONS:
                if not (0 <= r + 4 * dr < size and 0 <= c + 4 * dc < size):
                    continue
                vals = [board[(r + k * dr) * size + c + k * dc] for k in range(5)]
                mine, theirs = vals.count(me), vals.count(-me)
                if theirs == 0:
                    total += _mentor.TUPLE_MOVER[min(mine, 4)]
                if mine == 0:
                    total -= _mentor.TUPLE_OTHER[min(theirs, 4)]
    return total


def back_up(v):
    v = -v
    if v > DECIDED:
        return v - 1
    if v < -DECIDED:
        return v + 1
    return v


def root_values(board, size, to_play, depth, beam):
    """[(move, value)] of the ``beam`` best root candidates searched to ``depth``."""
    f = features(board, size, to_play)
    cands = ordered_candidates(f)[:beam]
    me = 1 if to_play == 0 else -1
    out = []
    for m in cands:
        if f["five_me"][m]:
            out.append((m, WIN))
            continue
        child = list(board)
        child[m] = me
        out.append((m, back_up(negamax(child, size, 1 - to_play, depth - 1, beam))))
    return out


def negamax(board, size, to_play, depth, beam):
    if depth == 0:
        return static_value(features(board, size, to_play))
    values = root_values(board, size, to_play, depth, beam)
    return max((v for _, v in values), default=0)


def best_moves(board, size, to_play, level, beam):
    """The set of moves the mentor may choose (it picks one of them at random)."""
    if level == 0:
        f = features(board, size, to_play)
        cands = ordered_candidates(f)
        if not cands:
            return set()
        top = max(f["value"][p] for p in cands)
        return {p for p in cands if f["value"][p] == top}
    values = root_values(board, size, to_play, level, beam)
    if not values:
        return set()
    top = max(v for _, v in values)
    return {m for m, v in values if v == top}
