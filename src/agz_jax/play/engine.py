"""An analysis engine: a trained model and a position -> a move, a value and move
probabilities. The front ends (``agz_jax.play.brain``, ``agz_jax.play.web``) share it.

The search is the model's own (``search.Searcher`` with the model's search
settings: algorithm, c_puct or Gumbel's considered moves, forced moves, Winning
Value Decay), with its simulation count as the default budget; ``algorithm``
and ``reuse`` may be overridden. Gumbel's sequential halving is scheduled for
the full budget (``max_simulations``), so a Gumbel search cut short by the
clock has visited its considered moves unevenly; PUCT has no such schedule.

Reuse (``search.reuse``, PUCT): after a search the engine keeps its tree; when
the next position follows from that root by the engine's move and the
opponent's reply (or by one move, in analysis), the subtree under them is the
next search's tree and its visits count towards the budget. Carrying a full
tree costs about a few chunks' time, so a timed move whose time left is under
twice what the last carry took starts from a fresh root instead.

Deepening (``analyse(..., keep=True)``, either algorithm): the search goes on
growing the last search's tree when it is of the same position, so that an
analysis can run in short calls, each one's answer showing the tree so far,
until the tree is full or the position changes (the web board). Gumbel's
schedule is the capacity's either way: calls that deepen one tree are one
search in chunks. (The engine keeps its last tree whatever the settings; only
reuse and deepening read it.)

Time: one tree of fixed capacity (``max_simulations``) is built in jitted
*chunks* of simulations (``mctx_loop.continue_tree``; the trees and their
growth are ``agz_jax.play.trees``); between chunks the host
looks at the clock (``clock``, ``time.perf_counter`` unless a test injects
another), sizes the next chunk to a quarter of the time left (at most
0.1 s) at the rate the last one ran (``chunk`` simulations the least; fixed
chunks of ``chunk`` without a deadline) and stops when even the smallest
would likely end after the deadline.
Every shape is fixed, so the jitted functions (``agz_jax.play.programs``)
compile once for each rule a game is played under (``warmup(rules)`` does
that ahead of the first move): the rule is a constant of its programs, which
search faster than programs that take it as a run-time flag.

Capacity: the tree's capacity is its size, not a cost per simulation (the loop
never copies the tree, ``mctx_loop``), so a time-limited player takes a tree of
``PLAY_CAPACITY`` nodes, independent of the model's training simulation count,
and lets the clock end its searches.

Leaves (``leaves=K``, PUCT): the tree grows K leaves a step, selected under
virtual loss and evaluated in one batched net call
(``mctx_loop.parallel_steps``). On a CPU the net is about as fast per position
at batch 1 as at 64, so it gains little there (``make bench``'s position
section measures it); an accelerator is where batching pays.

Threads (``threads=T``, PUCT): root parallelism. T trees of the same root
grow at once, one a host thread (XLA runs each call on the thread that makes
it, and a one-position search keeps about one core busy), and their root
statistics are summed. Tree ``i`` searches the position under the board's
symmetry ``i`` (``agz_jax.game.symmetry``; tree 0 the position as it is): the rules
are symmetric and the nets are not quite, so the trees differ, and the merged
root averages the nets over T symmetries. Each tree keeps its own subtree for
reuse and deepening. Without a deadline the budget is split evenly, so a
search is as reproducible with T trees as with one.

Tactics: the root's moves are ``tactics.search_moves``'s with forced moves on
whatever the model's settings (its answers to threats and four-threes as the
model says): the engine completes its own five when it can (no search), and
when the opponent threatens a five it searches only among the points that
block it. An untrained net therefore still never misses a win in one or a block
of a four, and neither does a trained one under time pressure. Then the VCF
reading (``agz_jax.game.vcf``): its own win by fours is played, the opponent's is
stopped when a move can.

Positions are ``gomoku.State`` (one game, no batch axis); actions are
``row * size + col``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.game import symmetry
from agz_jax.game.gomoku import Rules, State, played_at_from_last, stone
from agz_jax.nets import features
from agz_jax.nets.models import Model
from agz_jax.play import programs, readings, trees
from agz_jax.play.flags import PLAY_CAPACITY  # noqa: F401  (the front ends' default tree)
from agz_jax.play.readings import VCF_SHARE, VCF_UNTIMED_S, VCT_SHARE, VCT_UNTIMED_S

DEFAULT_CHUNK = 16

PLAY_C_PUCT = 1.5
"""PUCT's exploration constant for time-limited play (``pbrain-agz``, the web
board), where the model's own ``search.c_puct`` (5 for the shipped models) is
for self-play's exploration. Chosen by measurement against Rapfi at 1 s a
move (docs/outside.md, "The play-time c_puct"): a lower constant reads the
likelier lines deeper (against ``rapfi:10000``, 1.5 scored
0.66 over 80 games, 1 0.575 over 40, 2.5 0.55 and 5 0.37 over 80)."""


class Analysis(NamedTuple):
    """The engine's answer for one position.

    action: the move (row * size + col). value: the root's backed-up value in
    [-1, 1] for the side to move. win_prob: (value + 1) / 2. policy: float[A],
    the root visit distribution (the prior where no search ran). prior: float[A],
    the net's move probabilities. q: float[A], each move's backed-up value for
    the side to move (decayed as in the search; NaN where no simulation went).
    visits: float[A], the root's visit counts (carried ones included).
    simulations: run by this search. carried: the root's visits carried over from
    the last search (``search.reuse``). elapsed: seconds.
    reason: 'search', 'win' (a five in one), 'vcf' (the first four of a win by
    continuous fours, no search), 'vct' (the first threat of a win by
    continuous threats, no search), 'block' (searched among the blocks of the
    opponent's five), 'defend' (searched among the moves that stop the
    opponent's VCF), 'avoid' (searched, and the most visited move left
    because the VCT reading found the opponent a win after it) or 'prior'
    (no time to search).
    """

    action: int
    value: float
    win_prob: float
    policy: np.ndarray
    prior: np.ndarray
    q: np.ndarray
    visits: np.ndarray
    simulations: int
    carried: int
    elapsed: float
    reason: str


def default_threads(algorithm: str = "puct") -> int:
    """The front ends' default tree count: 2 for PUCT on a machine with 2 or more
    cores (a one-position search keeps about one busy), else 1."""
    return min(2, os.cpu_count() or 1) if algorithm == "puct" else 1


def winning_line(rules: Rules, board, action: int) -> list[int]:
    """The points of the winning line through ``action`` (empty if none), per the rule.

    Host-side helper for display; ``board`` is int8[A].
    """
    board = np.asarray(board).reshape(rules.size, rules.size)
    row, col = divmod(int(action), rules.size)
    me = board[row, col]
    if me == 0:
        return []
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        line = [(row, col)]
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < rules.size and 0 <= c < rules.size and board[r, c] == me:
                line.append((r, c))
                r, c = r + sign * dr, c + sign * dc
        if len(line) == 5 or (len(line) > 5 and rules.rule == "freestyle"):
            return sorted(r * rules.size + c for r, c in line)
    return []


def make_state(rules: Rules, board, to_play: int, last_action: int = -1,
               rank: int = 0) -> State:
    """A ``State`` for a position given as a board (int8[A], +1 black, -1 white).

    The caller vouches that the position is unfinished (see ``Engine.check_board``).
    Of the stones' ages only the last move's is known (``played_at_from_last``);
    ``rank`` is the strength the side to move is asked to play at (rank planes).
    """
    board = np.asarray(board, np.int8).reshape(rules.num_actions)
    num_moves = int(np.count_nonzero(board))
    return State(
        board=jnp.asarray(board),
        to_play=jnp.int32(to_play),
        last_action=jnp.int32(last_action),
        num_moves=jnp.int32(num_moves),
        winner=jnp.int32(-1),
        done=jnp.bool_(False),
        illegal=jnp.bool_(False),
        played_at=played_at_from_last(rules.num_actions, last_action, num_moves),
        rank=jnp.int32(rank),
    )


class Engine:
    """A model ready to analyse positions.

    Args:
      model: from ``agz_jax.nets.models.load``.
      max_simulations: the tree's capacity; a search never runs more. Default:
        the model's own ``search.num_simulations``.
      chunk: simulations per jitted call (the clock is read between chunks).
      seed: the searches' random stream; the same seed and inputs give the same moves.
      rank: for a model with rank planes (``features.ranks``), the strength to
        play at; None keeps each position's own ``State.rank``. May be changed
        between moves (``engine.rank = 3``): it is an input, not a compile-time
        constant.
      algorithm, reuse, c_puct: override the model's ``search.algorithm``,
        ``search.reuse`` and ``search.c_puct`` (None keeps the model's).
      fpu: PUCT: value an unvisited child at its node's value less ``fpu``
        (``search.qtransform='parent'``, ``search.fpu_reduction``); None keeps
        the model's ``search.qtransform``.
        Everything else about the search (forced moves, gamma, ...) is the
        model's own.
      clock: seconds, the clock that ``analyse``'s deadlines are on (default
        ``time.perf_counter``; a test may pass a fake one).
      leaves: K >= 1 grows the tree K leaves a step, evaluated in one net call
        with virtual loss (``mctx_loop.parallel_steps``; PUCT only); 0, one
        leaf at a time.
      threat_values: override the model's ``search.threat_values`` (a leaf
        whose stones force a win within six plies is valued by that win,
        ``tactics.threat_value``); None keeps the model's.
      vcf: read victories by continuous fours at the root (``agz_jax.game.vcf``):
        play one's own, and search only among the moves that stop the
        opponent's (when any does).
      vct: read victories by continuous threats (fours and threes,
        ``agz_jax.game.vct``): before the search, play one's own; after it,
        play the most visited move after which the opponent has none found
        (of the ``readings.VCT_CANDIDATES`` most visited; ``VCT_SHARE`` of a
        timed move is kept for it).
      threads: T >= 1 trees of the root searched at once, one a host thread,
        tree ``i`` under the board's symmetry ``i`` (root parallelism; PUCT
        only); their root visits are summed.
      transpositions: evaluate each position of a tree once: a node reached
        by another order of the same moves takes the first one's prior and
        value (``Searcher.begin``). The same search, fewer net calls; on where
        it is exact (nets that do not read the order of the moves,
        ``features.history`` 0) and with one leaf a step.
    """

    def __init__(self, model: Model, *, max_simulations: int | None = None,
                 chunk: int = DEFAULT_CHUNK, seed: int = 0, rank: int | None = None,
                 algorithm: str | None = None, reuse: bool | None = None,
                 c_puct: float | None = None, clock: Callable[[], float] = time.perf_counter,
                 leaves: int = 0, fpu: float | None = None, vcf: bool = True,
                 threat_values: bool | None = None, threads: int = 1, vct: bool = False,
                 transpositions: bool = True):
        settings = model.config.search
        overrides = {k: v for k, v in (("algorithm", algorithm), ("reuse", reuse),
                                       ("c_puct", c_puct), ("threat_values", threat_values))
                     if v is not None}
        if fpu is not None:  # first-play urgency: PUCT's unvisited children (qtransform parent)
            overrides.update(qtransform="parent", fpu_reduction=fpu)
        if overrides.get("algorithm") == "gumbel" and "reuse" not in overrides:
            overrides["reuse"] = False
        self.search_cfg = dataclasses.replace(settings, **overrides)  # ConfigError if bad
        if max_simulations is None:
            max_simulations = self.search_cfg.num_simulations
        if not isinstance(max_simulations, int) or max_simulations < 1:
            raise ValueError(f"max_simulations must be a positive integer, got {max_simulations!r}")
        if not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
        if not isinstance(leaves, int) or leaves < 0:
            raise ValueError(f"leaves must be a non-negative integer, got {leaves!r}")
        if not isinstance(threads, int) or not 1 <= threads <= symmetry.NUM_SYMMETRIES:
            raise ValueError(f"threads must be an integer from 1 to {symmetry.NUM_SYMMETRIES} "
                             f"(one tree a board symmetry), got {threads!r}")
        if threads > 1 and self.search_cfg.algorithm != "puct":
            raise ValueError("threads (root parallelism) is for PUCT: Gumbel's sequential "
                             "halving has no meaning for summed visit counts")
        if leaves and self.search_cfg.algorithm != "puct":
            raise ValueError("leaves (leaf parallelism) is for PUCT: virtual visits would "
                             "disturb Gumbel's sequential halving")
        self.model = model
        self.size = model.rules.size
        self.num_actions = model.rules.num_actions
        self.max_simulations = max_simulations
        self.leaves = leaves
        self.chunk = min(max(chunk, leaves), max_simulations)
        self.rank = rank
        self._compiled: dict[str, programs.Programs] = {}  # by rule
        self._lock = threading.Lock()
        self.threads = threads
        self.gamma = float(model.config.decay.gamma)
        self.variables = jax.device_put(model.variables)
        self.clock = clock
        self.vcf = bool(vcf)
        self.vct = bool(vct)
        # Exact where the nets do not read the order of the moves; one leaf a step.
        self.transpositions = (bool(transpositions) and not leaves
                               and not model.nets.features.history)
        self.trees = trees.Trees(threads=threads, size=self.size, chunk=self.chunk,
                                 variables=self.variables, seed=seed, clock=clock)

    @property
    def reuse(self) -> bool:
        return self.search_cfg.reuse

    def describe(self) -> str:
        """The search in a few words (for ``ABOUT`` and the web page)."""
        s = self.search_cfg
        what = (f"puct search (c_puct {s.c_puct:g}"
                + (f", first-play urgency: parent's value - {s.fpu_reduction:g})"
                   if s.qtransform == "parent" else ")") if s.algorithm == "puct"
                else f"gumbel search ({s.max_considered_actions} considered moves)")
        return (f"{what}, up to {self.max_simulations} simulations a move"
                f"{f' in each of {self.threads} trees' if self.threads > 1 else ''}"
                f"{f', {self.leaves} leaves a step' if self.leaves else ''}"
                f"{', subtree reuse' if s.reuse else ''}")

    # -- compilation -----------------------------------------------------------------------

    def rules(self, rule: str | None = None) -> Rules:
        """The model's board size under ``rule`` (default: the model's own rule)."""
        return Rules(self.size, rule or self.model.rules.rule)

    def _fns(self, rules: Rules) -> programs.Programs:
        if rules.size != self.size:
            raise ValueError(f"the model plays {self.size}x{self.size}, not "
                             f"{rules.size}x{rules.size}")
        with self._lock:
            if rules.rule not in self._compiled:
                self._compiled[rules.rule] = programs.build(
                    self.model.nets, self.search_cfg, self.size, self.gamma,
                    capacity=self.max_simulations, leaves=self.leaves, rule=rules.rule,
                    transpositions=self.transpositions)
            return self._compiled[rules.rule]

    def warmup(self, rules: Rules | None = None) -> float:
        """Compile everything a move under ``rules`` needs (default: the model's
        own rule; each rule has programs of its own); the seconds it took.

        Runs the jitted functions once on the empty board without touching the
        engine's RNG stream or its carried tree, so warming up does not change
        the moves that follow.
        """
        rules = rules or self.rules()
        t0 = time.perf_counter()
        calls, lasts, carries = self.trees.calls, self.trees.lasts, list(self.trees.carries)
        empty = np.zeros(rules.num_actions, np.int8)
        self.check_board(rules, empty)
        state = make_state(rules, empty, 0)
        sims = min(2 * self.chunk, self.max_simulations) * self.threads
        self.trees.lasts = [None] * self.threads  # kept aside, not spent: restored below
        first = self.analyse(rules, state, simulations=sims)
        if self.reuse:  # the carried-tree path compiles too: after the move searched
            self.analyse(rules, _after(rules, state, [first.action]), simulations=sims)
        # Warming up allocated each lane's two trees: they stay as its spares, so
        # that the game's first carry does not pay for new buffers.
        self.trees.forget()
        self.trees.calls, self.trees.lasts = calls, lasts
        self.trees.carries.clear()  # the warm-up's carry timed its compilation too
        self.trees.carries.extend(carries)
        return time.perf_counter() - t0

    def transposed(self) -> float:
        """Of the last search's first tree, the share of its nodes below the root
        whose evaluation transpositions saved (``Trees.transposed``)."""
        return self.trees.transposed()

    @property
    def carry_seconds(self) -> float:
        """What the last carry of a subtree to a new root took, on ``clock``
        (0 before the first): the engine carries only when a move's time left
        is at least twice this."""
        return self.trees.carry_s

    def forget(self) -> None:
        """Drop the carried trees (a new game, a take-back): the next search starts fresh."""
        self.trees.forget()

    # -- positions -------------------------------------------------------------------------

    def check_board(self, rules: Rules, board) -> list[int]:
        """The stones of ``board`` (int8[A]) that lie on a winning line (empty if none)."""
        board = jnp.asarray(np.asarray(board, np.int8).reshape(rules.num_actions))
        wins = self._fns(rules).wins_on_board(board)
        return [int(a) for a in np.flatnonzero(np.asarray(wins))]

    def forbidden(self, rules: Rules, board) -> np.ndarray:
        """bool[A]: the empty points black may not play on ``board`` (int8[A])
        under ``rules`` (none but under renju)."""
        if rules.rule != "renju":
            return np.zeros(rules.num_actions, bool)
        board = jnp.asarray(np.asarray(board, np.int8).reshape(rules.num_actions))
        return np.asarray(self._fns(rules).forbidden(board))

    def immediate_fives(self, rules: Rules, state: State, colour: int) -> np.ndarray:
        """bool[A]: empty points where ``colour`` (0 black, 1 white) would make a five."""
        fns = self._fns(rules)
        me = stone(jnp.int32(colour))
        return np.asarray(fns.threats(jnp.asarray(state.board), me))

    # -- search ----------------------------------------------------------------------------

    def analyse(self, rules: Rules, state: State, *, simulations: int | None = None,
                deadline: float | None = None, keep: bool = False) -> Analysis:
        """Choose a move for ``state``'s side to move.

        Args:
          rules: the game's rules (the model's size; the game's rule).
          state: an unfinished position with at least one empty point.
          simulations: at most this many (default: ``max_simulations`` a tree),
            split evenly over the trees (``threads``; the first ones take the
            remainder), each tree's share at most ``max_simulations``; with reuse
            or ``keep``, the visits carried over from the last search count.
          deadline: ``clock()`` value to finish by; None for no limit. At least
            one chunk runs unless the deadline has passed already.
          keep: deepen: if the last search was of this very position (with
            ``keep`` or not), go on growing its tree (its visits are
            ``carried``) instead of starting afresh.
        """
        t0 = self.clock()
        board = np.asarray(state.board)
        legal = board == 0
        if int(state.to_play) == 0:  # black: not on a forbidden point (renju)
            legal &= ~self.forbidden(rules, board)
        if bool(state.done) or not legal.any():
            raise ValueError("the game is over: no move to choose")
        to_play = int(state.to_play)
        total = self.max_simulations * self.threads if simulations is None else int(simulations)
        total = max(1, total)  # each tree's share, at most its capacity:
        budgets = [min(total // self.threads + (i < total % self.threads), self.max_simulations)
                   for i in range(self.threads)]
        fns = self._fns(rules)

        wins = self.immediate_fives(rules, state, to_play) & legal
        blocks = self.immediate_fives(rules, state, 1 - to_play) & legal
        states = jax.tree.map(lambda x: jnp.asarray(x)[None], state)
        if self.rank is not None:
            states = features.with_rank(states, self.rank)
        allowed = np.asarray(fns.guard(states)) & legal
        if not allowed.any():  # unreachable: the tiers keep legal moves
            allowed = legal
        line = defended = None
        # The readings' shares of the move: of the time left on the engine's clock.
        share = VCF_UNTIMED_S if deadline is None else VCF_SHARE * max(0.0, deadline - t0)
        if self.vcf and not wins.any():
            line, defended = readings.read_fours(board, to_play, self.size, rules.rule, share,
                                                 defend=not blocks.any())
            if defended is not None and (allowed & defended).any():
                allowed = allowed & defended
            else:
                defended = None
        rank = int(states.rank[0])
        # A subtree is carried only when the move has time for it: carrying a
        # full tree costs about what a few chunks do, and a move squeezed by the
        # clock is better served by a fresh root than by overrunning its budget.
        carry = self.reuse and (deadline is None or deadline - t0 >= 2.0 * self.carry_seconds)
        begin = functools.partial(self.trees.begin, fns, rules, states, allowed, rank, keep,
                                  carry)
        first = begin(0)

        if wins.any():
            action = int(np.argmax(np.where(wins, first.prior + 1.0, -1.0)))
            self.forget()
            return Analysis(action, 1.0, 1.0, wins / wins.sum(), first.prior,
                            np.where(wins, 1.0, np.nan), np.zeros(self.num_actions), 0, 0,
                            self.clock() - t0, "win")

        reason = "vcf"
        if self.vct and line is None and not blocks.any() and not wins.any():
            line = readings.read_threats(board, to_play, self.size, rules.rule,
                                         VCT_UNTIMED_S if deadline is None else share / 2)
            reason = "vct"
        if line is not None:  # our own VCF (or VCT): its first move, no search needed
            action = line[0]
            self.forget()
            policy = np.zeros(self.num_actions)
            policy[action] = 1.0
            value = self.gamma ** (len(line) - 1)
            return Analysis(action, value, (value + 1.0) / 2.0, policy, first.prior,
                            np.where(policy > 0, value, np.nan), np.zeros(self.num_actions),
                            0, 0, self.clock() - t0, reason)

        search_deadline = deadline
        if self.vct and deadline is not None:  # the reading after the search has its share
            search_deadline = deadline - VCT_SHARE * max(0.0, deadline - t0)
        grown = self.trees.grow_all(fns, search_deadline, budgets, first, begin)
        prior = np.mean([t.prior for t in grown], axis=0)
        visits = np.where(allowed, np.sum([t.visits for t in grown], axis=0), 0.0)
        done = sum(t.done for t in grown)
        kept = sum(t.kept for t in grown)

        if visits.sum() == 0:
            policy = np.where(allowed, prior, 0.0)
            policy = policy / policy.sum() if policy.sum() > 0 else allowed / allowed.sum()
            action = int(np.argmax(np.where(allowed, prior + 1e-12, -1.0)))
            value, reason = 0.0, "prior"
            q = np.full(self.num_actions, np.nan)
            self.forget()
        else:
            if len(grown) == 1:  # the search's own choice (Searcher.result)
                action, value, q = grown[0].action, grown[0].value, grown[0].q
            else:  # the most visited move, ties to the higher prior (Searcher.result's rule)
                most = np.where(allowed, visits, -1.0)
                action = int(np.argmax(np.where(most == most.max(), prior, -1.0)))
                # A root's value is the mean of its own evaluation and its visits'.
                weight = np.array([t.visits.sum() + 1.0 for t in grown])
                value = float(np.dot(weight, [t.value for t in grown]) / weight.sum())
                q = np.sum([t.visits * np.nan_to_num(t.q) for t in grown], axis=0)
                q = q / np.maximum(visits, 1.0)
            policy = visits / visits.sum()
            q = np.where(visits > 0, q, np.nan)
            reason = ("defend" if defended is not None else
                      "block" if blocks.any() and not wins.any() else "search")
            if self.vct:
                left = (VCT_UNTIMED_S if deadline is None
                        else max(0.0, deadline - self.clock()))
                safe = readings.avoid_threats(board, to_play, self.size, rules.rule, visits,
                                              action, left)
                if safe != action:
                    action, reason = safe, "avoid"
            self.trees.remember(grown, rules, state, rank)
        if not legal[action]:  # the guards above make this unreachable
            raise AssertionError(f"engine chose an occupied or forbidden point {action}")
        return Analysis(action, value, (value + 1.0) / 2.0, policy, prior, q, visits,
                        done - kept, kept, self.clock() - t0, reason)


def _after(rules: Rules, state: State, moves: list[int]) -> State:
    for move in moves:
        state = rules.step(state, jnp.int32(move))
    return state
