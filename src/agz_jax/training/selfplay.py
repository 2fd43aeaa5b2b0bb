"""Self-play: games of the best net against itself, turned into (s, pi, z).

Two ways to play them, both jitted scans with fixed shapes:

* lockstep (``make_selfplay``): B games start together and the scan runs until
  the longest one ends. Finished games stay finished (their steps are no-ops
  and their rows are marked invalid), but every step still searches the whole
  batch while any game is on.
* continuous (``make_continuous``): B slots play on across iterations; a slot
  whose game ends writes it to the replay and starts a new game inside the
  scan, so every search is spent on a game in progress.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from agz_jax.config import files
from agz_jax.config.sections import DecayConfig, OpeningsConfig, SearchConfig, SelfPlayConfig
from agz_jax.game import openings as opening_sets
from agz_jax.game.gomoku import Rules, State
from agz_jax.nets.networks import Networks
from agz_jax.search.mctx_loop import node_count
from agz_jax.search.searcher import Searcher
from agz_jax.training import replay
from agz_jax.training.replay import Examples


class Trajectory(NamedTuple):
    """Time-major record of B games, T = board points.

    obs: int8[T, B, H, W, C] observations (0/1 planes).
    policy: float32[T, B, A] search policy (the training target pi).
    action: int32[T, B] move played (-1 after the game ended).
    to_play: int32[T, B] colour to move.
    valid: bool[T, B] the position occurred (the game was not over).
    """

    obs: jax.Array
    policy: jax.Array
    action: jax.Array
    to_play: jax.Array
    valid: jax.Array


def decayed_z(to_play: jax.Array, winner: jax.Array, length: jax.Array,
              gamma: float) -> jax.Array:
    """Winning Value Decay labels: z_t = +-gamma^(T - t - 1), 0 for draws.

    Args:
      to_play: int32[T, B] colour to move at ply t.
      winner: int32[B] winning colour, -1 for a draw / unfinished game.
      length: int32[B] number of plies T of each game.
    Returns float32[T, B]; +1 at the winner's last (winning) move.
    """
    t = jnp.arange(to_play.shape[0])[:, None]
    dist = jnp.maximum(length[None, :] - t - 1, 0).astype(jnp.float32)
    sign = jnp.where(to_play == winner[None, :], 1.0, -1.0)
    return jnp.where(winner[None, :] >= 0, sign * jnp.power(jnp.float32(gamma), dist), 0.0)


def make_move(rules: Rules, nets: Networks, *, search: SearchConfig, decay: DecayConfig,
              selfplay: SelfPlayConfig):
    """``move(variables, states [B], key, tree=None) -> (action int32[B], policy
    float32[B, A], out)``: one self-play move of every game, by search with
    exploration noise, the search's training target and its output. The move is
    ``Searcher.play``'s: the Gumbel search's choice, or drawn from the visit
    counts with ``selfplay``'s temperature (PUCT). ``tree``: the subtree carried from the
    last move (``search.reuse``; ``Searcher.carry``)."""
    searcher = Searcher.of(rules, nets, search=search, decay=decay)

    def move(variables, states, key, tree=None):
        action, out = searcher.play(variables, key, states, move_cfg=selfplay,
                                    explore=True, tree=tree)
        return action, out.action_weights, out

    return move


def make_selfplay(rules: Rules, nets: Networks, *, search: SearchConfig, decay: DecayConfig,
                  selfplay: SelfPlayConfig, openings: OpeningsConfig, shard=None):
    """Returns ``play(variables, key) -> (Trajectory, final State [B], stats)``:
    lockstep self-play, all games from their first move in one scan.

    With ``openings.path`` set, each game starts from an opening drawn by
    ``key`` (from ``files.selfplay_opening_set``: moved by up to
    ``openings.shift`` points); the trajectory then holds the players' moves only.

    ``shard(tree, axis)``, if given, constrains the game axis of the states and
    of the records to be split over devices (``parallel.Sharder.constrain``);
    it changes where the games are played, not the numbers.
    """
    num_games = selfplay.num_games
    opening_moves = files.selfplay_opening_set(openings, rules.size)
    empty = openings.empty_fraction
    # A game from an opening has that many fewer moves to play, unless some start empty.
    num_steps = rules.num_actions - (
        0 if opening_moves is None or empty else opening_moves.shape[1])
    shard = shard or (lambda tree, axis: tree)
    move = make_move(rules, nets, search=search, decay=decay, selfplay=selfplay)
    searcher = Searcher.of(rules, nets, search=search, decay=decay)
    reuse = search.reuse

    def play(variables, key):
        if opening_moves is None:
            states = jax.vmap(lambda _: rules.init())(jnp.arange(num_games))
        else:
            key, k_open = jax.random.split(key)
            states = opening_sets.sample_states(rules, opening_moves, k_open, num_games, empty)
        states = shard(states, 0)
        tree = searcher.empty_tree(variables, states) if reuse else None

        def search_and_move(states, key, tree):
            action, policy, out = move(variables, states, key, tree)
            return action, policy, searcher.carry(out, action) if reuse else None

        def idle(states, key, tree):
            return (jnp.zeros(num_games, jnp.int32),
                    jnp.zeros((num_games, rules.num_actions), jnp.float32), tree)

        def body(carry, key):
            states, tree = carry
            states = shard(states, 0)
            active = ~states.done
            action, policy, tree = jax.lax.cond(jnp.any(active), search_and_move, idle,
                                                states, key, tree)
            record = Trajectory(
                obs=nets.observe(rules, states).astype(jnp.int8),
                policy=policy,
                action=jnp.where(active, action, -1),
                to_play=states.to_play,
                valid=active,
            )
            states = jax.vmap(rules.step)(states, action)
            return (states, tree), shard(record, 0)

        (final, _), traj = jax.lax.scan(body, (states, tree), jax.random.split(key, num_steps))
        length = jnp.sum(traj.valid, axis=0, dtype=jnp.int32)
        stats = {
            "games": jnp.int32(num_games),
            "moves": jnp.sum(length),
            "searched": num_games * jnp.max(length),
            "mean_length": jnp.mean(length.astype(jnp.float32)),
            "black_wins": jnp.mean((final.winner == 0).astype(jnp.float32)),
            "white_wins": jnp.mean((final.winner == 1).astype(jnp.float32)),
            "draws": jnp.mean((final.winner < 0).astype(jnp.float32)),
        }
        return traj, final, stats

    return play


class Slots(NamedTuple):
    """The B games in progress of continuous self-play, each with its record so far
    (slot-major; T = board points, the longest game).

    states: State [B], the positions to search next.
    obs: int8[B, T, H, W, C] observations of the game's searched positions.
    policy: float32[B, T, A] their search policies.
    to_play: int32[B, T] their colours to move.
    length: int32[B] positions recorded so far in each slot's game.
    opening: int32[B] the opening each game started from (an index into
      ``files.selfplay_opening_set``),
      ``openings.EMPTY`` (-1) for the empty board.
    """

    states: State
    obs: jax.Array
    policy: jax.Array
    to_play: jax.Array
    length: jax.Array
    opening: jax.Array


NO_GAME = -2  # SlotMoves.opening where no new game started


class SlotMoves(NamedTuple):
    """What each slot played in one call of continuous self-play (S steps):
    action int32[S, B] the move searched and played at each step; ended bool[S, B]
    that move ended the slot's game (the next step's move starts a new one);
    opening int32[S, B] the opening the new game starts from (``openings.EMPTY``
    for the empty board), ``NO_GAME`` (-2) where no game ended."""

    action: jax.Array
    ended: jax.Array
    opening: jax.Array


def make_continuous(rules: Rules, nets: Networks, *, search: SearchConfig, decay: DecayConfig,
                    selfplay: SelfPlayConfig, openings: OpeningsConfig, refill: bool = True,
                    shard=None):
    """Continuous self-play: ``(init, play)``.

    ``init(key) -> Slots`` starts ``selfplay.num_games`` games (from openings
    drawn by ``key`` when ``openings.path`` is set). ``play(variables, slots,
    buffer, key) -> (slots, buffer, stats, SlotMoves)`` runs ``selfplay.steps`` search steps
    in one scan. At every step each slot's game gets one move (``make_move``);
    a game that ends is turned into (s, pi, z) examples with decayed z
    (``decayed_z`` over the positions its slot recorded) and added to the replay
    ``buffer`` at once, and its slot starts a new game, all inside the scan: the
    shapes never change, no step searches a finished game, and nothing goes
    back to the host until the iteration ends. Games in progress carry over to
    the next call (they belong to the run's state, so a resumed run continues
    them).

    The per-step keys are ``make_selfplay``'s (``split(key, steps)``, each split
    again by ``make_move``), so with ``refill=False`` and openings off the slots
    play exactly the games of lockstep self-play with the same key (the test of
    that); a finished slot is then searched on without effect, as in lockstep.

    stats: games finished, positions searched (``moves``), the finished games'
    mean length (in searched positions) and results (fractions of them).
    """
    num_games = selfplay.num_games
    opening_moves = files.selfplay_opening_set(openings, rules.size)
    gamma = decay.gamma
    steps = selfplay.steps
    T = rules.num_actions
    shard = shard or (lambda tree, axis: tree)
    move = make_move(rules, nets, search=search, decay=decay, selfplay=selfplay)
    searcher = Searcher.of(rules, nets, search=search, decay=decay)
    reuse = search.reuse
    slot = jnp.arange(num_games)

    def start(key):
        """New games' states [B] and their openings int32[B]."""
        index = opening_sets.sample_index(opening_moves, key, num_games,
                                          openings.empty_fraction)
        return opening_sets.start_states(rules, opening_moves, index), index

    def init(key) -> Slots:
        obs_shape = (rules.size, rules.size, nets.obs_channels)
        states, opening = start(key)
        return Slots(
            states=states,
            obs=jnp.zeros((num_games, T, *obs_shape), jnp.int8),
            policy=jnp.zeros((num_games, T, T), jnp.float32),
            to_play=jnp.zeros((num_games, T), jnp.int32),
            length=jnp.zeros(num_games, jnp.int32),
            opening=opening,
        )

    def flush(buffer, slots: Slots, ended, winner):
        """Add the games ``ended`` bool[B] (records in ``slots``) to the replay."""
        z = decayed_z(slots.to_play.T, winner, slots.length, gamma).T  # [B, T]
        valid = ended[:, None] & (jnp.arange(T)[None, :] < slots.length[:, None])
        flat = lambda x: x.reshape((-1,) + x.shape[2:])
        return replay.add(buffer, Examples(flat(slots.obs), flat(slots.policy), flat(z),
                                           flat(slots.to_play), flat(valid)))

    def play(variables, slots: Slots, buffer, key):
        def body(carry, key):
            slots, buffer, games, length_sum, wins, tree, carried = carry
            states = shard(slots.states, 0)
            if reuse:  # the visits each root starts with, from the last move's tree
                carried += jnp.sum(jnp.maximum(node_count(tree) - 1, 0))
            action, policy, out = move(variables, states, key, tree)
            t = slots.length
            put = lambda rec, x: rec.at[slot, t].set(x.astype(rec.dtype), mode="drop")
            slots = Slots(
                states=states,
                obs=put(slots.obs, nets.observe(rules, states)),
                policy=put(slots.policy, policy),
                to_play=put(slots.to_play, states.to_play),
                length=jnp.where(states.done, t, t + 1),
                opening=slots.opening,
            )
            after = jax.vmap(rules.step)(states, action)
            ended = after.done & ~states.done
            buffer = jax.lax.cond(jnp.any(ended), flush, lambda b, *_: b,
                                  buffer, slots, ended, after.winner)
            if reuse:  # the next search starts from the subtree of the move played
                tree = searcher.carry(out, action, restart=ended)
            games += jnp.sum(ended, dtype=jnp.int32)
            length_sum += jnp.sum(jnp.where(ended, slots.length, 0))
            wins += jnp.stack([jnp.sum(ended & (after.winner == c)) for c in (0, 1)])
            new_opening = jnp.full(num_games, NO_GAME, jnp.int32)
            if refill:
                fresh, index = start(jax.random.fold_in(key, 1))
                after = jax.tree.map(
                    lambda f, a: jnp.where(ended.reshape((-1,) + (1,) * (a.ndim - 1)), f, a),
                    fresh, after)
                new_opening = jnp.where(ended, index, NO_GAME)
                slots = slots._replace(length=jnp.where(ended, 0, slots.length),
                                       opening=jnp.where(ended, index, slots.opening))
            return ((slots._replace(states=after), buffer, games, length_sum, wins, tree,
                     carried), SlotMoves(action, ended, new_opening))

        zero = jnp.int32(0)
        # Trees are carried within a call only: each call (an iteration, whose
        # nets may have been trained since the last) starts with fresh roots.
        tree = searcher.empty_tree(variables, slots.states) if reuse else None
        carry = (slots, buffer, zero, zero, jnp.zeros(2, jnp.int32), tree, zero)
        keys = jax.random.split(key, steps)
        (slots, buffer, games, length_sum, wins, _, carried), moves = jax.lax.scan(
            body, carry, keys)
        finished = jnp.maximum(games, 1).astype(jnp.float32)
        stats = {
            "games": games,
            "moves": jnp.int32(num_games * steps),
            "searched": jnp.int32(num_games * steps),
            "mean_length": length_sum / finished,
            "black_wins": wins[0] / finished,
            "white_wins": wins[1] / finished,
            "draws": (games - wins[0] - wins[1]) / finished,
            # Mean visits a search started with (search.reuse), of num_simulations.
            "reused_visits": carried / jnp.float32(num_games * steps),
        }
        return slots, buffer, stats, moves

    return init, play


def to_examples(traj: Trajectory, final: State, gamma: float) -> Examples:
    """Flatten a trajectory into [T*B] examples with decayed z labels."""
    length = jnp.sum(traj.valid, axis=0, dtype=jnp.int32)  # positions searched per game
    z = decayed_z(traj.to_play, final.winner, length, gamma)
    flat = lambda x: x.reshape((-1,) + x.shape[2:])
    return Examples(
        obs=flat(traj.obs),
        policy=flat(traj.policy),
        z=flat(z),
        to_play=flat(traj.to_play),
        valid=flat(traj.valid),
    )
