"""The engine's compiled programs (``agz_jax.play.engine``): one set a rule family.

Freestyle and standard share one set: the winning rule is a run-time flag,
``exact`` (bool[]: exactly five), through ``EitherRule``, so switching between
them compiles nothing. Renju, whose legal moves depend on black's forbidden
points, has a set of its own (``exact`` unused). Every function takes one
position (a batch of 1) and a tree of fixed capacity, so each compiles once.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import mctx

from agz_jax.config.sections import SearchConfig
from agz_jax.game import tactics
from agz_jax.game.gomoku import Rules
from agz_jax.nets.networks import Networks
from agz_jax.search import mctx_loop
from agz_jax.search import searcher as search


@dataclasses.dataclass(frozen=True, eq=False)
class EitherRule(Rules):
    """``Rules`` whose winning rule is a traced flag (``exact``: exactly five), so
    that one compilation serves both rules; built inside the jitted functions."""

    exact: object = None

    # The rule enters Rules only through these two methods.
    def _makes_five(self, same, me):
        standard = Rules(self.size, "standard")._makes_five(same, me)
        freestyle = Rules(self.size, "freestyle")._makes_five(same, me)
        return jnp.where(self.exact, standard, freestyle)

    def window_five_count(self, vals, me):
        standard = Rules(self.size, "standard").window_five_count(vals, me)
        freestyle = Rules(self.size, "freestyle").window_five_count(vals, me)
        return jnp.where(self.exact, standard, freestyle)


@dataclasses.dataclass
class Programs:
    """The jitted functions; ``exact`` (bool[]) picks the rule at run time."""

    start: object  # (variables, exact, key, state[1], allowed[1, A] (guard's), tree | None) -> tree
    chunk: object  # (variables, exact, key, tree, until) -> tree
    results: object  # tree -> (visits[A], value, q[A], action, prior[A])
    carry: object  # (tree, action) -> the subtree under the root's action
    threats: object  # (exact, board[A], stone) -> bool[A]: points that make a five for stone
    wins_on_board: object  # (exact, board[A]) -> bool[A]: stones on a winning line
    forbidden: object  # board[A] -> bool[A]: black's forbidden points (none but under renju)
    guard: object  # (exact, state[1]) -> bool[A]: tactics.search_moves with forced moves


def exact(rules: Rules) -> jax.Array:
    """The ``exact`` flag the programs take for ``rules``."""
    return jnp.bool_(rules.rule == "standard")


def build(nets: Networks, settings: SearchConfig, size: int, gamma: float, *,
          capacity: int, leaves: int, renju: bool, transpositions: bool = False) -> Programs:
    """The jitted functions of a search with ``settings`` over trees of
    ``capacity`` nodes, growing ``leaves`` leaves a step (0: one): for
    freestyle and standard (``renju`` False) or for renju; with
    ``transpositions``, each position of a tree evaluated once
    (``Searcher.begin``)."""

    def game(exact):
        return Rules(size, "renju") if renju else EitherRule(size, exact=exact)

    def searcher(exact):
        return search.Searcher(rules=game(exact), nets=nets, settings=settings, gamma=gamma)

    @jax.jit
    def start(variables, exact, key, states, allowed, tree):
        # ``allowed`` comes from ``guard`` (search_moves with forced moves on,
        # within the settings' own tiers), so the roots do not read the tactics
        # again: the program holds one copy of them fewer.
        return searcher(exact).begin(variables, key, states, capacity=capacity,
                                     moves=allowed, tree=tree, transpositions=transpositions)

    @functools.partial(jax.jit, donate_argnums=(3,))
    def chunk(variables, exact, key, tree, until):
        return searcher(exact).grow(variables, key, tree, until=until,
                                    num_simulations=capacity, leaves=leaves)

    @jax.jit
    def results(tree):
        out = searcher(False).result(tree)
        root = mctx.Tree.ROOT_INDEX
        q = tree.qvalues(jnp.full((1,), root, jnp.int32))[0]
        prior = jax.nn.softmax(tree.children_prior_logits[0, root])
        return (tree.children_visits[0, root], tree.node_values[0, root], q,
                out.action[0], prior)

    @jax.jit
    def carry(tree, action):
        return mctx_loop.reuse(tree, jnp.reshape(action, (1,)))

    @jax.jit
    def threats(exact, board, me):
        return game(exact).five_points(board, me)

    @jax.jit
    def guard(exact, states):
        # The tiers of tactics.search_moves, forced moves always on: a
        # five, else the blocks of the opponent's five, else an open four,
        # then the model's own answers to threats and four-threes.
        return tactics.search_moves(game(exact), states, True, settings.answer_threats,
                                    settings.answer_four_threes)[0]

    @jax.jit
    def wins_on_board(exact, board):
        rules = game(exact)
        return jax.vmap(lambda a: rules.is_win(board, a))(jnp.arange(rules.num_actions))

    @jax.jit
    def forbidden(board):
        return game(False).forbidden(board)

    return Programs(start, chunk, results, carry, threats, wins_on_board, forbidden, guard)
