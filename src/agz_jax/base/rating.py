"""Elo ratings of many players from many matches: a maximum-likelihood fit.

The model is Bradley-Terry on the logistic Elo scale: player i scores
p_ij = 1 / (1 + 10^((r_j - r_i) / 400)) per game against j. A draw counts as
half a win and half a loss, so the log-likelihood of all games is

    LL(r) = sum over pairs {i, j} of  S_ij log p_ij + S_ji log p_ji

with S_ij the points i scored against j (wins + draws / 2). LL is concave, and
it is invariant to adding a constant to every rating, so one player, the
*anchor*, is fixed at 0 (``random`` by default: the weakest fixed point of
every ladder). Newton's method with a backtracking line search finds the
maximum; the 95% intervals are r_i +- 1.96 se_i, se from the inverse of the
observed Fisher information (minus the Hessian of LL, the anchor's row and
column removed; for this model it does not depend on the outcomes).

The maximum exists only if no group of players has scored nothing against the
rest (no all-win or all-loss record, group or single): otherwise the group's
distance from the others grows without end as LL rises. Within a strongly
connected component of the graph "i scored against j" the ratings are
determined; between components they are not, and every match between two
components is one-sided (else they would be one component). So each such
match gets a weak prior: *one virtual draw added to it* (20-0 is rated as
20 wins and a draw, 400 log10(41) = 645 Elo). That joins every pair of players
who met into one component; a player with no chain of matches to the anchor
at all gets one virtual draw against the anchor. The fit is then finite, and
the distances across those matches are pulled together: the true ones are
larger, so the rating of a player outside the anchor's component
(``Rating.prior``) is a bound relative to the anchor (a lower bound above it,
an upper bound below). A virtual draw on each *player* instead would pull a
whole group of strong players towards a random anchor they all beat, by as
many draws as the group has members. ``score`` and ``games`` count real games
only.

Pure numpy, no JAX: the fit is small (players x players) and runs on the host.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

ELO_PER_NAT = 400.0 / math.log(10.0)  # Elo points per natural-log odds unit
Z95 = 1.959963984540054  # two-sided 95% normal quantile


class Match(NamedTuple):
    """A's results against B over ``wins + draws + losses`` games."""

    a: str
    b: str
    wins: int
    draws: int
    losses: int


class Rating(NamedTuple):
    player: str
    elo: float
    low: float  # 95% interval
    high: float
    se: float  # standard error of elo (0 for the anchor)
    games: int  # real games (no virtual draw)
    score: float  # (wins + draws / 2) / games over those games
    prior: bool  # rated with the virtual draw against the anchor (a bound)


class Fit(NamedTuple):
    ratings: list[Rating]  # best first
    anchor: str
    iterations: int  # Newton steps taken


def _points(matches: list[Match], players: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """S[i, j], the points i scored against j, and N[i, j], their games (symmetric)."""
    index = {p: i for i, p in enumerate(players)}
    n = len(players)
    S, N = np.zeros((n, n)), np.zeros((n, n))
    for m in matches:
        i, j = index[m.a], index[m.b]
        g = m.wins + m.draws + m.losses
        S[i, j] += m.wins + m.draws / 2
        S[j, i] += m.losses + m.draws / 2
        N[i, j] += g
        N[j, i] += g
    return S, N


def _reach(edges: np.ndarray, start: int) -> np.ndarray:
    """bool[n]: the nodes reachable from ``start`` along ``edges[i, j]``."""
    seen = np.zeros(len(edges), bool)
    seen[start] = True
    todo = [start]
    while todo:
        for j in np.flatnonzero(edges[todo.pop()] & ~seen):
            seen[j] = True
            todo.append(int(j))
    return seen


def log_likelihood(theta: np.ndarray, S: np.ndarray) -> float:
    """LL at ratings ``theta`` [n] in natural units (Elo / ELO_PER_NAT)."""
    d = theta[:, None] - theta[None, :]
    return float(-np.sum(S * np.logaddexp(0.0, -d)))  # S_ij log sigmoid(d_ij)


def _grad_hess(theta: np.ndarray, S: np.ndarray, N: np.ndarray):
    d = theta[:, None] - theta[None, :]
    p = 1.0 / (1.0 + np.exp(-d))
    grad = np.sum(S - N * p, axis=1)
    w = N * p * (1.0 - p)
    hess = w - np.diag(np.sum(w, axis=1))
    return grad, hess


def fit(matches: Iterable[Match], anchor: str | None = None, tol: float = 1e-10,
        max_iter: int = 200) -> Fit:
    """Maximum-likelihood Elo of every player in ``matches``.

    ``anchor`` is fixed at 0: by default ``random`` if it played, else the first
    player named in ``matches``. Every one-sided match between two strongly
    connected components gets one virtual draw (module docstring), so that all
    ratings are finite; ``Rating.prior`` marks the players it bounds.
    """
    matches = list(matches)
    if not matches:
        raise ValueError("no matches to rate")
    players: list[str] = []
    for m in matches:
        if min(m.wins, m.draws, m.losses) < 0 or m.wins + m.draws + m.losses == 0:
            raise ValueError(f"match {m.a} vs {m.b}: counts must be >= 0 and not all 0")
        if m.a == m.b:
            raise ValueError(f"match {m.a} vs itself")
        for p in (m.a, m.b):
            if p not in players:
                players.append(p)
    if anchor is None:
        anchor = "random" if "random" in players else players[0]
    if anchor not in players:
        raise ValueError(f"anchor {anchor!r} played no match")
    a = players.index(anchor)
    S, N = _points(matches, players)
    real_points, real_games = S.sum(axis=1), N.sum(axis=1)
    # The strongly connected components of "i scored against j": same[i, j]
    # when each reaches the other.
    reach = np.array([_reach(S > 0, i) for i in range(len(players))])
    same = reach & reach.T
    prior = ~same[a]  # no finite rating relative to the anchor
    # One virtual draw on every match between two components: exactly the
    # one-sided matches that keep components apart.
    across = (N > 0) & ~same
    alone = ~_reach(N > 0, a)  # no chain of matches to the anchor
    across[alone, a] = across[a, alone] = True
    S += 0.5 * across
    N += across

    free = np.arange(len(players)) != a
    theta = np.zeros(len(players))
    ll = log_likelihood(theta, S)
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (the count is reported)
        grad, hess = _grad_hess(theta, S, N)
        g = grad[free]
        if np.max(np.abs(g), initial=0.0) < tol:
            break
        step = np.zeros_like(theta)
        step[free] = np.linalg.solve(-hess[np.ix_(free, free)], g)
        t = 1.0
        while True:  # LL is concave: a short enough Newton step raises it
            new = theta + t * step
            new_ll = log_likelihood(new, S)
            if new_ll >= ll - 1e-12 or t < 1e-8:
                break
            t /= 2
        theta, ll = new, new_ll
    _, hess = _grad_hess(theta, S, N)
    cov = np.linalg.inv(-hess[np.ix_(free, free)])
    se = np.zeros(len(players))
    se[free] = np.sqrt(np.diag(cov)) * ELO_PER_NAT
    elo = theta * ELO_PER_NAT
    ratings = [
        Rating(p, float(elo[i]) + 0.0, float(elo[i] - Z95 * se[i]), float(elo[i] + Z95 * se[i]),
               float(se[i]), int(real_games[i]), float(real_points[i] / real_games[i]),
               bool(prior[i]))
        for i, p in enumerate(players)]
    ratings.sort(key=lambda r: (-r.elo, r.player))
    return Fit(ratings, anchor, it)
