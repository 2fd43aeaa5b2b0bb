"""The engine's compiled programs (``agz_jax.play.engine``): one set a rule.

Each set is compiled for its rule (freestyle, standard or renju): the rule is
a constant of the programs, not a run-time flag. A flag that chose between
freestyle and standard let one set serve both, but made the search slower:
on a 2-core Zen 4 the programs of one rule searched 1.11 and 1.10 times the
simulations a second of the flag's with two trees (a game's opening and the
bench's position, medians of 8 alternating searches of 4,096 simulations;
docs/performance.md). So each rule a game is played under compiles a set
of its own, once (``Engine.warmup(rules)`` ahead of the first move;
``pbrain-agz`` compiles freestyle and standard at ``START``). Every
function takes one position (a batch of 1) and a tree of fixed capacity, so
each compiles once.
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


@dataclasses.dataclass
class Programs:
    """The jitted functions of one rule."""

    blank: object  # (variables, key, state[1], allowed[1, A]) -> an empty tree's buffers
    start: object  # (variables, key, state[1], allowed[1, A] (guard's), base, fresh) -> tree
    chunk: object  # (variables, key, tree, until) -> tree
    results: object  # tree -> (visits[A], value, q[A], action, prior[A])
    carry: object  # (tree, line[2], spent) -> the subtree at the end of the root's line
    threats: object  # (board[A], stone) -> bool[A]: points that make a five for stone
    wins_on_board: object  # board[A] -> bool[A]: stones on a winning line
    forbidden: object  # board[A] -> bool[A]: black's forbidden points (none but under renju)
    guard: object  # state[1] -> bool[A]: tactics.search_moves with forced moves


def build(nets: Networks, settings: SearchConfig, size: int, gamma: float, *,
          capacity: int, leaves: int, rule: str, transpositions: bool = False) -> Programs:
    """The jitted functions of a search with ``settings`` over trees of
    ``capacity`` nodes, growing ``leaves`` leaves a step (0: one), under
    ``rule``; with ``transpositions``, each position of a tree evaluated once
    (``Searcher.begin``)."""
    rules = Rules(size, rule)
    searcher = search.Searcher(rules=rules, nets=nets, settings=settings, gamma=gamma)

    def begin(variables, key, states, allowed, tree=None):
        # ``allowed`` comes from ``guard`` (search_moves with forced moves on,
        # within the settings' own tiers), so the roots do not read the tactics
        # again: the program holds one copy of them fewer.
        return searcher.begin(variables, key, states, capacity=capacity, moves=allowed,
                              tree=tree, transpositions=transpositions)

    # A tree of a large capacity is hundreds of MB. Fresh buffers for every
    # carry and start cost the host's page faults (tens to hundreds of ms a
    # move on a 2-core CPU), so each program writes its tree into the buffers
    # of a tree that is spent (donated), and the engine keeps two trees a lane.
    @jax.jit
    def blank(variables, key, states, allowed):
        return jax.tree.map(jnp.zeros_like, begin(variables, key, states, allowed))

    @functools.partial(jax.jit, donate_argnums=(4,), keep_unused=True)
    def start(variables, key, states, allowed, base, fresh):
        # ``base``: the carried subtree (``fresh`` False: it goes on under the
        # fresh root's prior), or a spent tree whose buffers take the new one.
        if not settings.reuse:
            return begin(variables, key, states, allowed)
        carried = base.replace(node_visits=jnp.where(fresh, 0, base.node_visits))
        return begin(variables, key, states, allowed, carried)

    @functools.partial(jax.jit, donate_argnums=(2,))
    def chunk(variables, key, tree, until):
        return searcher.grow(variables, key, tree, until=until, num_simulations=capacity,
                             leaves=leaves)

    @jax.jit
    def results(tree):
        out = searcher.result(tree)
        root = mctx.Tree.ROOT_INDEX
        q = tree.qvalues(jnp.full((1,), root, jnp.int32))[0]
        prior = jax.nn.softmax(tree.children_prior_logits[0, root])
        return (tree.children_visits[0, root], tree.node_values[0, root], q,
                out.action[0], prior)

    @functools.partial(jax.jit, donate_argnums=(2,), keep_unused=True)
    def carry(tree, line, spent):
        # ``line``: int32[2], our move and the reply (-1 for none); the subtree
        # is written into ``spent``'s buffers.
        del spent
        return mctx_loop.reuse(tree, jnp.reshape(line, (1, -1)))

    @jax.jit
    def threats(board, me):
        return rules.five_points(board, me)

    @jax.jit
    def guard(states):
        # The tiers of tactics.search_moves, forced moves always on: a
        # five, else the blocks of the opponent's five, else an open four,
        # then the model's own answers to threats and four-threes.
        return tactics.search_moves(rules, states, True, settings.answer_threats,
                                    settings.answer_four_threes)[0]

    @jax.jit
    def wins_on_board(board):
        return jax.vmap(lambda a: rules.is_win(board, a))(jnp.arange(rules.num_actions))

    @jax.jit
    def forbidden(board):
        return rules.forbidden(board)

    return Programs(blank, start, chunk, results, carry, threats, wins_on_board, forbidden, guard)
