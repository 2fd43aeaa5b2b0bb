"""An analysis engine: a trained model and a position -> a move, a value and move
probabilities. The front ends (``agz_jax.brain``, ``agz_jax.web``) share it.

The search is PUCT (the paper's) on the model's nets, with the model's
``c_puct``, Q transform and Winning Value Decay, whatever algorithm the model was
trained with: Gumbel's sequential halving plans its root visits for a fixed
simulation count, which a search that stops when its time is up does not have.

Time: one tree of fixed capacity (``max_simulations``) is built in jitted
*chunks* of simulations (``mctx_loop.continue_tree``); between chunks the host
looks at the clock and stops when the next chunk would likely end after the
deadline. Every shape is fixed and the winning rule is a run-time flag, so the
jitted functions compile once (``warmup`` does that ahead of the first move).

Tactics: the engine always completes its own five when it can (no search), and
when the opponent threatens a five it searches only among the points that
block it. An untrained net therefore still never misses a win in one or a block
of a four, and neither does a trained one under time pressure.

Positions are ``gomoku.State`` (one game, no batch axis); actions are
``row * size + col``.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mctx
import numpy as np

from agz_jax import features, mctx_loop, search
from agz_jax.cache import enable_compilation_cache  # noqa: F401  (kept importable)
from agz_jax.gomoku import Rules, State, played_at_from_last, stone
from agz_jax.models import Model

DEFAULT_CHUNK = 16


class Analysis(NamedTuple):
    """The engine's answer for one position.

    action: the move (row * size + col). value: the root's backed-up value in
    [-1, 1] for the side to move. win_prob: (value + 1) / 2. policy: float[A],
    the root visit distribution (the prior where no search ran). prior: float[A],
    the net's move probabilities. q: float[A], each move's backed-up value for
    the side to move (decayed as in the search; NaN where no simulation went).
    simulations: run. elapsed: seconds.
    reason: 'search', 'win' (a five in one), 'block' (searched among the blocks
    of the opponent's five) or 'prior' (no time to search).
    """

    action: int
    value: float
    win_prob: float
    policy: np.ndarray
    prior: np.ndarray
    q: np.ndarray
    simulations: int
    elapsed: float
    reason: str


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


@dataclasses.dataclass(frozen=True, eq=False)
class _EitherRule(Rules):
    """``Rules`` whose winning rule is a traced flag (``exact``: exactly five), so
    that one compilation serves both rules; built inside the jitted functions."""

    exact: object = None

    # The rule enters Rules only through these two methods.
    def _makes_five(self, same):
        standard = Rules(self.size, "standard")._makes_five(same)
        freestyle = Rules(self.size, "freestyle")._makes_five(same)
        return jnp.where(self.exact, standard, freestyle)

    def window_five_count(self, vals, me):
        standard = Rules(self.size, "standard").window_five_count(vals, me)
        freestyle = Rules(self.size, "freestyle").window_five_count(vals, me)
        return jnp.where(self.exact, standard, freestyle)


@dataclasses.dataclass
class _Compiled:
    """The jitted functions; ``exact`` (bool[]) picks the rule at run time."""

    start: object  # (variables, exact, state[1], invalid[1, A]) -> (tree, prior[A])
    chunk: object  # (variables, exact, key, tree, until) -> tree
    results: object  # tree -> (visits[A], value, q[A])
    threats: object  # (exact, board[A], stone) -> bool[A]: points that make a five for stone
    wins_on_board: object  # (exact, board[A]) -> bool[A]: stones on a winning line


class Engine:
    """A model ready to analyse positions.

    Args:
      model: from ``agz_jax.models.load``.
      max_simulations: the tree's capacity; a search never runs more.
      chunk: simulations per jitted call (the clock is read between chunks).
      seed: PUCT's tie-break noise; the same seed and inputs give the same moves.
      rank: for a model with rank planes (``features.ranks``), the strength to
        play at; None keeps each position's own ``State.rank``. May be changed
        between moves (``engine.rank = 3``): it is an input, not a compile-time
        constant.
    """

    def __init__(self, model: Model, *, max_simulations: int = 1600,
                 chunk: int = DEFAULT_CHUNK, seed: int = 0, rank: int | None = None):
        if not isinstance(max_simulations, int) or max_simulations < 1:
            raise ValueError(f"max_simulations must be a positive integer, got {max_simulations!r}")
        if not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a positive integer, got {chunk!r}")
        self.model = model
        self.size = model.rules.size
        self.num_actions = model.rules.num_actions
        self.max_simulations = max_simulations
        self.chunk = min(chunk, max_simulations)
        self.rank = rank
        self._key = jax.random.PRNGKey(seed)
        self._calls = 0
        self._compiled: _Compiled | None = None
        self._lock = threading.Lock()
        self.search_cfg = model.config.search
        self.gamma = float(model.config.decay.gamma)
        self.variables = jax.device_put(model.variables)

    # -- compilation -----------------------------------------------------------------------

    def rules(self, rule: str | None = None) -> Rules:
        """The model's board size under ``rule`` (default: the model's own rule)."""
        return Rules(self.size, rule or self.model.rules.rule)

    def _fns(self, rules: Rules) -> _Compiled:
        if rules.size != self.size:
            raise ValueError(f"the model plays {self.size}x{self.size}, not "
                             f"{rules.size}x{rules.size}")
        with self._lock:
            if self._compiled is None:
                self._compiled = self._build()
            return self._compiled

    def _build(self) -> _Compiled:
        nets, cfg, size = self.model.nets, self.search_cfg, self.size
        qtransform = (search.raw_qvalues if cfg.qtransform == "raw"
                      else mctx.qtransform_by_parent_and_siblings)
        select = functools.partial(search.puct_action_selection, c_puct=cfg.c_puct,
                                   qtransform=qtransform)
        capacity = self.max_simulations

        @jax.jit
        def start(variables, exact, states, invalid):
            root = search.make_root_fn(_EitherRule(size, exact=exact), nets,
                                      cfg.forced_moves, cfg.answer_threats,
                                      cfg.answer_four_threes)(variables, states)
            root = root.replace(prior_logits=search.mask_logits(root.prior_logits, ~invalid))
            tree = mctx_loop.start_tree(root, capacity, invalid)
            return tree, jax.nn.softmax(root.prior_logits[0])

        @functools.partial(jax.jit, donate_argnums=(3,))
        def chunk(variables, exact, key, tree, until):
            recurrent_fn = search.make_recurrent_fn(_EitherRule(size, exact=exact), nets,
                                                    self.gamma, cfg.forced_moves,
                                                    cfg.answer_threats,
                                                    cfg.answer_four_threes,
                                                    threat_values=cfg.threat_values)
            return mctx_loop.continue_tree(
                variables, key, tree, recurrent_fn=recurrent_fn,
                root_action_selection_fn=functools.partial(select, depth=0),
                interior_action_selection_fn=select, until=until)

        @jax.jit
        def results(tree):
            root = mctx.Tree.ROOT_INDEX
            q = tree.qvalues(jnp.full((1,), root, jnp.int32))[0]
            return tree.children_visits[0, root], tree.node_values[0, root], q

        @jax.jit
        def threats(exact, board, me):
            return _EitherRule(size, exact=exact).five_points(board, me)

        @jax.jit
        def wins_on_board(exact, board):
            rules = _EitherRule(size, exact=exact)
            return jax.vmap(lambda a: rules.is_win(board, a))(jnp.arange(rules.num_actions))

        return _Compiled(start, chunk, results, threats, wins_on_board)

    def warmup(self, rules: Rules | None = None) -> float:
        """Compile everything a move needs (under either rule); the seconds it took.

        Runs the jitted functions once on the empty board without touching the
        engine's RNG stream, so warming up does not change the moves that follow.
        """
        rules = rules or self.rules()
        t0 = time.perf_counter()
        calls = self._calls
        empty = np.zeros(rules.num_actions, np.int8)
        self.check_board(rules, empty)
        self.analyse(rules, make_state(rules, empty, 0),
                     simulations=min(2 * self.chunk, self.max_simulations),
                     deadline=time.perf_counter() + 3600.0)
        self._calls = calls
        return time.perf_counter() - t0

    # -- positions -------------------------------------------------------------------------

    def check_board(self, rules: Rules, board) -> list[int]:
        """The stones of ``board`` (int8[A]) that lie on a winning line (empty if none)."""
        board = jnp.asarray(np.asarray(board, np.int8).reshape(rules.num_actions))
        wins = self._fns(rules).wins_on_board(_exact(rules), board)
        return [int(a) for a in np.flatnonzero(np.asarray(wins))]

    def immediate_fives(self, rules: Rules, state: State, colour: int) -> np.ndarray:
        """bool[A]: empty points where ``colour`` (0 black, 1 white) would make a five."""
        fns = self._fns(rules)
        me = stone(jnp.int32(colour))
        return np.asarray(fns.threats(_exact(rules), jnp.asarray(state.board), me))

    # -- search ----------------------------------------------------------------------------

    def analyse(self, rules: Rules, state: State, *, simulations: int | None = None,
                deadline: float | None = None) -> Analysis:
        """Choose a move for ``state``'s side to move.

        Args:
          rules: the game's rules (the model's size; the game's rule).
          state: an unfinished position with at least one empty point.
          simulations: at most this many (default and cap: ``max_simulations``).
          deadline: ``time.perf_counter()`` value to finish by; None for no limit.
            At least one chunk runs unless the deadline has passed already.
        """
        t0 = time.perf_counter()
        board = np.asarray(state.board)
        legal = board == 0
        if bool(state.done) or not legal.any():
            raise ValueError("the game is over: no move to choose")
        to_play = int(state.to_play)
        budget = self.max_simulations if simulations is None else int(simulations)
        budget = max(1, min(budget, self.max_simulations))
        fns = self._fns(rules)

        wins = self.immediate_fives(rules, state, to_play) & legal
        blocks = self.immediate_fives(rules, state, 1 - to_play) & legal
        allowed = legal
        if blocks.any() and not wins.any():
            allowed = blocks
        states = jax.tree.map(lambda x: jnp.asarray(x)[None], state)
        if self.rank is not None:
            states = features.with_rank(states, self.rank)
        exact = _exact(rules)
        tree, prior = fns.start(self.variables, exact, states, jnp.asarray(~allowed)[None])
        prior = np.asarray(prior, np.float64)

        if wins.any():
            action = int(np.argmax(np.where(wins, prior + 1.0, -1.0)))
            q = np.where(wins, 1.0, np.nan)
            return Analysis(action, 1.0, 1.0, wins / wins.sum(), prior, q, 0,
                            time.perf_counter() - t0, "win")

        done, last = 0, 0.0
        key = jax.random.fold_in(self._key, self._calls)
        self._calls += 1
        while done < budget:
            now = time.perf_counter()
            # The next chunk is predicted to cost what the last one did, with a
            # margin for noise; the first chunk also pays dispatch.
            if deadline is not None and (now >= deadline or (done and now + 1.5 * last > deadline)):
                break
            stop = min(done + self.chunk, budget)
            tree = fns.chunk(self.variables, exact, jax.random.fold_in(key, done), tree,
                             jnp.int32(stop))
            visits, value, q = fns.results(tree)
            visits = np.asarray(visits, np.float64)  # waits for the chunk
            last = time.perf_counter() - now
            done = stop

        if done == 0:
            policy = np.where(allowed, prior, 0.0)
            policy = policy / policy.sum() if policy.sum() > 0 else allowed / allowed.sum()
            action = int(np.argmax(np.where(allowed, prior + 1e-12, -1.0)))
            value = 0.0
            q = np.full(self.num_actions, np.nan)
            reason = "prior"
        else:
            visits = np.where(allowed, visits, 0.0)
            # Ties (few simulations) go to the higher prior.
            action = int(np.argmax(np.where(allowed, visits + 1e-3 * prior, -1.0)))
            policy = visits / max(visits.sum(), 1.0)
            value = float(value)
            q = np.where(visits > 0, np.asarray(q, np.float64), np.nan)
            reason = "block" if allowed is blocks else "search"
        if not legal[action]:  # the guards above make this unreachable
            raise AssertionError(f"engine chose an occupied point {action}")
        return Analysis(action, value, (value + 1.0) / 2.0, policy, prior, q, done,
                        time.perf_counter() - t0, reason)


def _exact(rules: Rules) -> jax.Array:
    return jnp.bool_(rules.rule == "standard")
