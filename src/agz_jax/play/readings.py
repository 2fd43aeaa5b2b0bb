"""The engine's host-side readings at the root of a move: wins by continuous
fours (``agz_jax.game.vcf``) and by continuous threats (``agz_jax.game.vct``),
each within its share of the move's time.

They run on the host once a move, around the jitted search (``engine.Engine``):
before it, the side to move's own win and the moves that stop the opponent's
win by fours; after it, with the VCT reading on, the most visited move after
which the opponent has no win by threats. Boards are int8[A], +1 black, -1
white; ``to_play`` 0 is black. Times are seconds of ``time.perf_counter``.
"""

from __future__ import annotations

import time

import numpy as np

from agz_jax.game import vcf, vct
from agz_jax.game.renju import foul_code

VCF_SHARE = 0.3
"""The share of a timed move's budget the VCF reading (``Engine(vcf=True)``)
may take; past it the move is searched without it."""
VCF_UNTIMED_S = 1.0
"""The VCF reading's time limit for a move without a deadline (under renju,
where each black four asks ``renju.foul_code``, a reading can otherwise run
for tens of seconds)."""

VCT_SHARE = 0.25
"""The share of a timed move's budget kept, with ``Engine(vct=True)``, for
the VCT reading after the search (``agz_jax.game.vct``): the most visited
moves are read in turn, and the first after which the opponent has no win by
continuous threats is played."""
VCT_UNTIMED_S = 1.0
"""The VCT readings' time limit for a move without a deadline."""
VCT_CANDIDATES = 6
"""The most visited moves the VCT reading reads after the search, at most."""


def forbidden_callback(rule: str):
    """The readers' ``is_forbidden`` callback under renju, else None."""
    if rule != "renju":
        return None

    def forbidden(cells, p):
        return foul_code(np.asarray(cells, np.int8), p) != 0
    return forbidden


def _colour(to_play: int) -> int:
    return 1 if to_play == 0 else -1


def read_fours(board: np.ndarray, to_play: int, size: int, rule: str, seconds: float,
               defend: bool = True) -> tuple[list[int] | None, np.ndarray | None]:
    """(line, defended): the side to move's VCF (``vcf.solve``) or None; and
    when it has none and the opponent has one, bool[A] of the moves that stop
    every opponent VCF (``vcf.defences``), None when there is no such threat,
    nothing stops it, or the reading ran out of its ``seconds``. ``defend``
    False: the own VCF only (facing a five, the block is the one defence)."""
    me, forbidden = _colour(to_play), forbidden_callback(rule)
    until = time.perf_counter() + seconds
    try:
        line = vcf.solve(board, me, size, rule, is_forbidden=forbidden, deadline=until)
        if line is not None or not defend:
            return line, None
        found = vcf.defences(board, me, size, rule, is_forbidden=forbidden, deadline=until)
    except vcf.OutOfTime:
        return None, None
    if found is None or not found[0]:
        return None, None
    defended = np.zeros(size * size, bool)
    defended[found[0]] = True
    return None, defended


def read_threats(board: np.ndarray, to_play: int, size: int, rule: str,
                 seconds: float) -> list[int] | None:
    """The side to move's VCT (``vct.solve``), or None: none found, or not
    within ``seconds``."""
    try:
        return vct.solve(board, _colour(to_play), size, rule,
                         is_forbidden=forbidden_callback(rule),
                         deadline=time.perf_counter() + seconds)
    except vct.OutOfTime:
        return None


def avoid_threats(board: np.ndarray, to_play: int, size: int, rule: str,
                  visits: np.ndarray, action: int, seconds: float) -> int:
    """The first of the ``VCT_CANDIDATES`` most visited moves (``action``
    first) after which the opponent has no VCT found; ``action`` when every
    one read has; when the ``seconds`` run out first, the move being read."""
    me, forbidden = _colour(to_play), forbidden_callback(rule)
    until = time.perf_counter() + seconds
    order = [action] + [int(a) for a in np.argsort(-visits, kind="stable")
                        if a != action and visits[a] > 0]
    after = np.array(board)
    for move in order[:VCT_CANDIDATES]:
        after[move] = me
        try:
            threat = vct.solve(after, -me, size, rule, is_forbidden=forbidden, deadline=until)
        except vct.OutOfTime:
            return move
        finally:
            after[move] = 0
        if threat is None:
            return move
    return action
