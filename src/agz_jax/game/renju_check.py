"""Cross-check of ``agz_jax.game.renju`` against an independent referee.

The referee is the PyPI package ``renju`` (0.1.0, MIT; its ``check_forbid`` is
a port of the Piskvork judge's forbidden-move reader), installed with the
``dev`` extra. ``compare`` reads the same points of the same boards with both
and returns every disagreement; the boards come from three generators, each
a pure function of a seed:

  * ``random_games``: games of random moves near the stones (black never plays
    a point ``agz_jax.game.renju`` forbids), every position kept;
  * ``dense_boards``: a small square filled at random with black, white and
    empty points, where threes, fours and overlines cross;
  * ``line_boards``: black stones laid on the four lines through one point,
    with a few white stones: double threes, double fours, overlines, fake
    threes and four-threes through that point.

A point is read when it is empty and some black stone lies within 5 of it on
one of its lines (elsewhere black has nothing to make).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.game import renju
from agz_jax.game.gomoku import Rules
from agz_jax.game.lines import reach_table

GENERATORS = ("random_games", "dense_boards", "line_boards")


class RefereeMissing(RuntimeError):
    """The ``renju`` package is not installed."""


def referee():
    """The referee's ``get_foul_type(board, row, col)`` (0 none, 1 double
    three, 2 double four, 3 overline; board rows of 0/1 black/2 white)."""
    try:
        from renju.check_forbid import get_foul_type
    except ImportError as e:
        raise RefereeMissing(
            "the cross-check needs the referee package `renju`: run `make install` "
            "(it is in the dev extra) or `pip install renju==0.1.0`") from e
    return get_foul_type


def random_games(rng: np.random.Generator, size: int = 15) -> Iterator[np.ndarray]:
    """Positions of one game of random moves within 2 of the stones."""
    board = np.zeros(size * size, np.int8)
    colour = 1
    forbidden = jax.jit(renju.forbidden)
    for _ in range(size * size):
        near = _near(board, size, 2)
        if colour == 1:
            near &= ~np.asarray(forbidden(jnp.asarray(board)))
        options = np.flatnonzero(near & (board == 0))
        if options.size == 0:
            return
        board = board.copy()
        board[rng.choice(options)] = colour
        yield board
        if _has_five(board, size):
            return
        colour = -colour


def dense_boards(rng: np.random.Generator, size: int = 15) -> np.ndarray:
    """One board: a random square of side 5..9 filled with black, white and
    empty points at random densities."""
    board = np.zeros((size, size), np.int8)
    side = int(rng.integers(5, 10))
    r, c = rng.integers(0, size - side + 1, 2)
    p_black, p_white = rng.uniform(0.2, 0.5), rng.uniform(0.0, 0.3)
    cells = rng.choice([1, -1, 0], (side, side), p=[p_black, p_white, 1 - p_black - p_white])
    board[r:r + side, c:c + side] = cells
    return board.reshape(-1)


def line_boards(rng: np.random.Generator, size: int = 15) -> np.ndarray:
    """One board: 2 to 4 of the lines through a point each given 2 to 5 black
    stones within 5 of it, and a few white stones within 6."""
    board = np.zeros((size, size), np.int8)
    r0, c0 = rng.integers(0, size, 2)
    dirs = [(0, 1), (1, 0), (1, 1), (1, -1)]
    for d in rng.permutation(4)[: rng.integers(2, 5)]:
        dr, dc = dirs[d]
        offsets = [k for k in range(-5, 6) if k != 0]
        for k in rng.choice(offsets, rng.integers(2, 6), replace=False):
            r, c = r0 + k * dr, c0 + k * dc
            if 0 <= r < size and 0 <= c < size:
                board[r, c] = 1
    for _ in range(rng.integers(0, 5)):
        r, c = r0 + rng.integers(-6, 7), c0 + rng.integers(-6, 7)
        if 0 <= r < size and 0 <= c < size and board[r, c] == 0:
            board[r, c] = -1
    return board.reshape(-1)


def _near(board: np.ndarray, size: int, reach: int) -> np.ndarray:
    stones = (board != 0).reshape(size, size)
    if not stones.any():
        out = np.zeros((size, size), bool)
        out[size // 2, size // 2] = True
        return out.reshape(-1)
    padded = np.pad(stones, reach)
    out = np.zeros((size, size), bool)
    for dr in range(-reach, reach + 1):
        for dc in range(-reach, reach + 1):
            out |= padded[reach + dr:reach + dr + size, reach + dc:reach + dc + size]
    return out.reshape(-1)


def _has_five(board: np.ndarray, size: int) -> bool:
    b = board.reshape(size, size)
    for colour in (1, -1):
        s = b == colour
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            for r in range(size):
                for c in range(size):
                    if all(0 <= r + k * dr < size and 0 <= c + k * dc < size
                           and s[r + k * dr, c + k * dc] for k in range(5)):
                        return True
    return False


def points_to_read(board: np.ndarray, size: int) -> np.ndarray:
    """int[P]: the empty points with a black stone within 5 on one of their lines."""
    reach = reach_table(size)
    return np.flatnonzero((board == 0) & (reach[:, board == 1].any(axis=1)))


@dataclasses.dataclass
class Report:
    boards: int = 0
    points: int = 0
    forbidden: int = 0
    by_foul: dict = dataclasses.field(default_factory=lambda: {f: 0 for f in renju.FOULS[1:]})
    disagreements: list = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict:
        unexplained = [d for d in self.disagreements if not d["explained"]]
        return dict(boards=self.boards, points=self.points, forbidden=self.forbidden,
                    by_foul=self.by_foul, disagreements=len(self.disagreements),
                    explained=len(self.disagreements) - len(unexplained),
                    unexplained=len(unexplained),
                    explained_with_a_five_on_board=sum(
                        d["explained"] and d["black_has_a_five"] for d in self.disagreements),
                    examples=unexplained[:10] or self.disagreements[:3])


def boards(generator: str, seed: int, count: int, size: int = 15) -> Iterator[np.ndarray]:
    """``count`` boards of ``generator`` (one of ``GENERATORS``) from ``seed``."""
    rng = np.random.default_rng(seed)
    made = 0
    while made < count:
        if generator == "random_games":
            for board in random_games(rng, size):
                yield board
                made += 1
                if made == count:
                    return
        elif generator in ("dense_boards", "line_boards"):
            yield globals()[generator](rng, size)
            made += 1
        else:
            raise ValueError(f"generator must be one of {GENERATORS}, got {generator!r}")


def referee_verdicts(boards_: list[np.ndarray], size: int = 15) -> list[dict[int, int]]:
    """The referee's foul code of every point to read (``points_to_read``) of each board."""
    get_foul_type = referee()
    out = []
    for board in boards_:
        grid = np.where(board == 1, 1, np.where(board == -1, 2, 0)).reshape(size, size).tolist()
        out.append({int(p): get_foul_type(grid, *divmod(int(p), size))
                    for p in points_to_read(board, size)})
    return out


@functools.cache
def _reader(depth: int, candidates: int, judge: bool, jit: Callable = jax.jit):
    return jit(jax.vmap(lambda b: renju.forbidden(b, depth, candidates, judge)))


@functools.cache
def _black_fives(size: int):
    rules = Rules(size, "renju")
    return jax.jit(jax.vmap(lambda b: jnp.any(rules.five_points(b, jnp.int8(1)))))


def compare(boards_: list[np.ndarray], size: int = 15, depth: int = renju.DEPTH,
            candidates: int = renju.CANDIDATES, judge: bool = False,
            report: Report | None = None,
            verdicts: list[dict[int, int]] | None = None, jit: Callable = jax.jit) -> Report:
    """Read every point of every board with both; disagreements are kept as
    (board as text, point, ours, the referee's, and ``explained``: the
    difference goes when we read as the referee does, ``renju.forbidden``'s
    ``judge``).

    The referee does not count a three whose straight-four point also makes
    five; the rule text does (a three is false only when its straight-four
    point is forbidden, and a five never is). At the top level such a point
    exists only when black already has a five to play.

    ``jit`` compiles the reader of many boards (``jax.jit``; a caller may
    pass one with its own compiler options).
    """
    verdicts = referee_verdicts(boards_, size) if verdicts is None else verdicts
    report = report or Report()
    stacked = jnp.asarray(np.stack(boards_))
    read = {j: np.asarray(_reader(depth, candidates, j, jit)(stacked)) for j in {judge, True}}
    ours, judged = read[judge], read[True]
    fives = np.asarray(_black_fives(size)(stacked))
    for board, mine, as_judge, five, theirs_at in zip(boards_, ours, judged, fives, verdicts,
                                                       strict=True):
        report.boards += 1
        for p, theirs in theirs_at.items():
            report.points += 1
            report.forbidden += bool(theirs)
            if theirs:
                report.by_foul[renju.FOULS[theirs]] += 1
            if bool(theirs) != bool(mine[p]):
                report.disagreements.append(dict(
                    board=to_text(board, size), point=int(p), ours=bool(mine[p]),
                    referee=renju.FOULS[theirs], explained=bool(theirs) == bool(as_judge[p]),
                    black_has_a_five=bool(five)))
        extra = np.flatnonzero(mine & ~np.isin(np.arange(size * size), list(theirs_at)))
        for p in extra:  # we forbid a point with no black stone near: always wrong
            report.disagreements.append(dict(board=to_text(board, size), point=int(p),
                                             ours=True, referee="none", explained=False,
                                             black_has_a_five=bool(five)))
    return report


def from_text(text: str) -> np.ndarray:
    values = {".": 0, "X": 1, "O": -1}
    return np.array([values[c] for c in text.split()], np.int8)


def to_text(board: np.ndarray, size: int) -> str:
    chars = {0: ".", 1: "X", -1: "O"}
    return "\n".join(" ".join(chars[int(v)] for v in row) for row in board.reshape(size, size))
