"""The engine's trees of one position (``agz_jax.play.engine``), grown in chunks
against a clock.

The engine decides a move (fives, the readings, the tactical guard, merging
the trees' roots); this module grows its trees. ``Trees`` holds the engine's
T trees (``Engine(threads=T)``), tree ``i`` under the board's symmetry ``i``:
each one's random stream, its last tree and root position (for subtree reuse
and deepening), the thread pool that grows trees 1..T-1 beside tree 0, and
the growth itself: jitted chunks of simulations, the clock read between them,
stopping when even the smallest chunk would likely end after the deadline.

Under a deadline a chunk is sized to take a quarter of the time left (at
most a tenth of a second) at the rate the last chunk ran (``chunk_size``;
the engine's ``chunk`` is the least), so a search of a second runs about
twenty chunks a tree instead of hundreds: the host's work between chunks,
and the two trees' threads taking turns at Python between them, then cost
little. One compiled chunk serves every size (its end, ``until``, is
traced). Without a deadline the chunks are of the engine's size, so the
same budget grows the same tree.
"""

from __future__ import annotations

import collections
import concurrent.futures
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.game import symmetry
from agz_jax.game.gomoku import Rules, State
from agz_jax.play import programs
from agz_jax.search import mctx_loop
from agz_jax.search.transpositions import Transpositions

_fold_in = jax.jit(jax.random.fold_in)
"""``jax.random.fold_in`` as one compiled call (eagerly it is several)."""


SHARE = 0.25
"""Under a deadline, the share of the time left that the next chunk is sized
to take at the measured rate: a chunk overruns the deadline only if the tree
grows at under a quarter of the rate of the chunk before it (another process
taking the core, say)."""
LONGEST_S = 0.1
"""And at most this long, so that a slowdown early in a long move costs at
most a tenth of a second's chunk."""
CARRIES = 5
"""How many of the last carries' times the engine's estimate of a carry's
cost is the median of (``Trees.carry_s``)."""


def chunk_size(least: int, left: int, seconds_left: float | None,
               rate: float | None) -> int:
    """Simulations for a tree's next chunk: ``least`` (the engine's ``chunk``)
    without a deadline or before a rate is measured; under a deadline
    (``seconds_left``) the simulations that take ``SHARE`` of it, and at most
    ``LONGEST_S``, at ``rate`` (simulations/s), at least ``least``; never over
    ``left``, the visits the budget has left."""
    n = least
    if seconds_left is not None and rate:
        n = max(least, int(rate * min(seconds_left * SHARE, LONGEST_S)))
    return max(1, min(n, left))


class Start(NamedTuple):
    """One tree of a search, before it grows: its index (and the board symmetry
    it searches under), the tree, its random key, the visits it holds, and its
    root's prior in the position's frame."""

    lane: int
    tree: object
    key: jax.Array
    kept: int
    prior: np.ndarray


class Grown(NamedTuple):
    """One tree after it grew: its root statistics in the position's frame, the
    visits it holds (``done``) and held before (``kept``)."""

    lane: int
    tree: object
    visits: np.ndarray
    value: float
    q: np.ndarray
    action: int
    prior: np.ndarray
    done: int
    kept: int


class Last(NamedTuple):
    """A tree's last search: its tree and root position, in the tree's frame
    (for reuse and deepening)."""

    tree: object
    board: np.ndarray
    to_play: int
    rule: str
    last_action: int = -1
    rank: int = 0


class Trees:
    """The T trees an engine searches a position with.

    Args:
      threads: T, one tree a board symmetry (and a host thread).
      size: the board's size.
      chunk: simulations a jitted call grows a tree by between readings of the
        clock; under a deadline the least (``chunk_size``).
      variables: the nets' weights, on the device.
      seed: the trees' random stream.
      clock: seconds; deadlines are on it.
    """

    def __init__(self, *, threads: int, size: int, chunk: int, variables, seed: int,
                 clock: Callable[[], float]):
        self.threads, self.size, self.chunk = threads, size, chunk
        self.variables, self.clock = variables, clock
        self.key = jax.random.PRNGKey(seed)
        self.calls = 0  # searches so far: each one's keys are folded from it
        self.lasts: list[Last | None] = [None] * threads
        # Each lane's spent trees, whose buffers its next trees are written into
        # (``programs.build``): a lane holds at most two trees, last and spare,
        # and a move allocates none once the lane has had its two.
        self.spares: list[list] = [[] for _ in range(threads)]
        # What the last carries of a subtree took, on ``clock`` (any lane's).
        self.carries: collections.deque[float] = collections.deque(maxlen=CARRIES)
        self._pool = None  # the threads of trees 1..T-1, made at the first search

    @property
    def carry_s(self) -> float:
        """What a carry of a subtree takes: the median of the last ``CARRIES``
        (0 before the first), so that one slow carry (the other lane's chunk
        holding both cores, say) does not stop the carries that follow."""
        return float(np.median(self.carries)) if self.carries else 0.0

    def forget(self) -> None:
        """Drop the last trees: the next search starts fresh (their buffers kept
        as spares)."""
        for lane, last in enumerate(self.lasts):
            if last is not None:
                self._spend(lane, last.tree)
        self.lasts = [None] * self.threads

    def transposed(self) -> float:
        """Of the last search's first tree, the share of the nodes below the root
        that took an earlier node's evaluation (the table records only the
        evaluated ones): the evaluations transpositions saved (0 with nothing
        searched or transpositions off)."""
        last = self.lasts[0]
        if last is None or not isinstance(last.tree.extra_data, Transpositions):
            return 0.0
        held = np.asarray(last.tree.node_visits[0]) > 0
        codes = np.asarray(last.tree.extra_data.codes[0])[held][1:]
        return float(np.mean(~np.any(codes != 0, axis=-1))) if len(codes) else 0.0

    def begin(self, fns: programs.Programs, rules: Rules, states: State, allowed: np.ndarray,
              rank: int, keep: bool, carry: bool, lane: int) -> Start:
        """Tree ``lane``'s root, in the frame of the board's symmetry ``lane``:
        the last tree kept (``keep``), its subtree carried (``carry``: reuse with
        the time for it), or a fresh one."""
        key = jax.random.fold_in(self.key, self.calls)
        if lane:
            key = jax.random.fold_in(jax.random.fold_in(self.key, lane), self.calls)
        states = symmetry.transform_states(states, lane, self.size)
        state = jax.tree.map(lambda x: x[0], states)
        tree = self._kept(lane, rules, state, rank) if keep else None
        if tree is None:
            inside = jnp.asarray(allowed[symmetry.permutations(self.size)[lane]])[None]
            blank = lambda: fns.blank(self.variables, key, states, inside)  # noqa: E731
            base = self._carried(lane, rules, state, fns, blank) if carry else None
            fresh = base is None
            if fresh:  # a spent tree's buffers take the fresh one
                last, self.lasts[lane] = self.lasts[lane], None
                base = self._spare(lane, last.tree if last is not None else None, blank)
            tree = fns.start(self.variables, key, states, inside, base, np.bool_(fresh))
        visits, _, _, _, prior = fns.results(tree)
        return Start(lane, tree, key, int(np.asarray(visits).sum()),
                     symmetry.untransform_policy(np.asarray(prior, np.float64), lane, self.size))

    def grow_all(self, fns: programs.Programs, deadline: float | None, budgets: list[int],
                 first: Start, begin: Callable[[int], Start]) -> list[Grown]:
        """Every tree grown to its budget or the deadline: tree 0 from ``first``
        on this thread, the others from ``begin(lane)`` on the pool's."""
        if self.threads > 1:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self.threads - 1, thread_name_prefix="agz-tree")
            others = [self._pool.submit(lambda i: self.grow(fns, deadline, budgets[i],
                                                            begin(i)), i)
                      for i in range(1, self.threads)]
            grown = [self.grow(fns, deadline, budgets[0], first)] + [f.result() for f in others]
        else:
            grown = [self.grow(fns, deadline, budgets[0], first)]
        self.calls += 1
        return grown

    def grow(self, fns: programs.Programs, deadline: float | None, budget: int,
             start: Start) -> Grown:
        """Grow one tree in chunks (``chunk_size``) until it holds ``budget``
        visits or even the smallest chunk would likely end after ``deadline``."""
        tree, done, rate = start.tree, start.kept, None
        while done < budget:
            now = self.clock()
            left_s = None if deadline is None else deadline - now
            # The smallest chunk is predicted to run at the last chunk's rate, with a
            # margin for noise; the first chunk also pays dispatch.
            if left_s is not None and (left_s <= 0 or (
                    rate is not None and 1.5 * self.chunk / rate > left_s)):
                break
            stop = done + chunk_size(self.chunk, budget - done, left_s, rate)
            # Between chunks only jitted calls with numpy scalars: an eager
            # fold_in, a jnp scalar and the results read after every chunk
            # cost about 3 ms a chunk on a slow CPU (a third of a 16-simulation
            # chunk's time).
            key = _fold_in(start.key, np.uint32(done + 1))
            tree = fns.chunk(self.variables, key, tree, np.int32(stop))
            tree.node_visits.block_until_ready()  # the chunk's end
            rate = (stop - done) / max(self.clock() - now, 1e-9)
            done = stop
        visits, value, q, action, _ = (np.asarray(x) for x in fns.results(tree))
        lane, size = start.lane, self.size
        return Grown(lane, tree,
                     symmetry.untransform_policy(visits.astype(np.float64), lane, size),
                     float(value), symmetry.untransform_policy(q.astype(np.float64), lane, size),
                     int(symmetry.permutations(size)[lane][int(action)]), start.prior, done,
                     start.kept)

    def remember(self, grown: list[Grown], rules: Rules, state: State, rank: int) -> None:
        """Keep each tree and its root position, in its own frame, for the next search."""
        board = np.asarray(state.board)
        for t in grown:
            self.lasts[t.lane] = Last(
                t.tree, board[symmetry.permutations(self.size)[t.lane]], int(state.to_play),
                rules.rule, symmetry.transform_point(int(state.last_action), t.lane, self.size),
                rank)

    def _spare(self, lane: int, spent, blank: Callable[[], object]):
        """Buffers for lane ``lane``'s next tree, handed over: a spare, else
        ``spent`` (a tree it is done with, kept as a spare then), else new ones
        (``blank()``)."""
        if spent is not None:
            self._spend(lane, spent)
        return self.spares[lane].pop() if self.spares[lane] else blank()

    def _spend(self, lane: int, tree) -> None:
        """Keep ``tree``'s buffers as a spare of lane ``lane`` (at most two)."""
        if len(self.spares[lane]) < 2:
            self.spares[lane].append(tree)

    def _carried(self, lane: int, rules: Rules, state: State, fns: programs.Programs,
                 blank: Callable[[], object]):
        """Tree ``lane``'s last subtree at ``state`` (in that tree's frame), if
        ``state`` follows from its last root by one or two moves (ours, then the
        opponent's reply) that the tree holds; else None. The subtree is
        written into the lane's spare (``blank()`` if it has none), and the
        last tree becomes the spare."""
        last = self.lasts[lane]
        if last is None or last.rule != rules.rule:
            return None
        moves = moves_between(last.board, last.to_play, np.asarray(state.board),
                              int(state.to_play))
        if moves is None:
            return None
        line = np.full(2, -1, np.int32)
        line[:len(moves)] = moves
        spare = self._spare(lane, None, blank)
        t0 = self.clock()
        tree = fns.carry(last.tree, line, spare)
        self.lasts[lane] = None
        self._spend(lane, last.tree)
        nodes = int(mctx_loop.node_count(tree)[0])
        self.carries.append(self.clock() - t0)
        if nodes == 0 or not np.array_equal(np.asarray(tree.embeddings.board[0, 0]),
                                            np.asarray(state.board)):
            # Nothing under the line, or the same stones by another order (not
            # this tree's position): the subtree's buffers are spent.
            self._spend(lane, tree)
            return None
        return tree

    def _kept(self, lane: int, rules: Rules, state: State, rank: int):
        """Tree ``lane``'s last tree if its root is ``state`` (the same stones,
        side to move, last move, rule and rank, in that tree's frame), handed
        over (its buffers go to the next chunk); else None."""
        last = self.lasts[lane]
        if (last is None or last.rule != rules.rule
                or last.to_play != int(state.to_play) or last.rank != rank
                or last.last_action != int(state.last_action)
                or not np.array_equal(last.board, np.asarray(state.board))):
            return None
        self.lasts[lane] = None
        return last.tree


def moves_between(board, to_play: int, new_board, new_to_play: int) -> list[int] | None:
    """The moves (one, or ours then the opponent's) that lead from ``board`` with
    ``to_play`` to move to ``new_board``, or None if no such sequence does."""
    before, after = np.asarray(board), np.asarray(new_board)
    if np.any((before != 0) & (after != before)):
        return None
    added = np.flatnonzero(after != before)
    colour = lambda p: 0 if after[p] == 1 else 1  # noqa: E731  (+1 black, -1 white)
    if len(added) == 1 and colour(added[0]) == to_play and new_to_play == 1 - to_play:
        return [int(added[0])]
    if len(added) == 2 and new_to_play == to_play:
        mine = [int(p) for p in added if colour(p) == to_play]
        theirs = [int(p) for p in added if colour(p) != to_play]
        if len(mine) == 1 and len(theirs) == 1:
            return [mine[0], theirs[0]]
    return None
