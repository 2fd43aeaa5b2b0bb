"""Cross-checking ``go.rules`` against an independent referee over GTP (GnuGo).

``random_games`` plays many random games at once in JAX (one jitted scan over
the plies, vmapped over the games) and records, for every position, the legal
mask and the board after the move. ``check_game`` replays one of them in the
referee engine and compares, position by position:

* the legal moves (GTP ``all_legal``, which GnuGo 3.8 decides with its ko and
  suicide rules: ``--positional-superko`` or ``--simple-ko``, ``--forbid-suicide``);
* the board after each move, captures included (``list_stones``). GnuGo's
  superko check forgets the boards of its oldest moves once a game is past 500
  plies (``GNUGO_HISTORY``), so there a move it allows and we forbid is tried in
  GnuGo and counted apart (``forgotten_superko``) when the board it makes is one
  of the game's earlier boards, as positional superko says;
* the result of every game that ended with two passes (``final_score`` under
  ``--chinese-rules``): GnuGo removes the stones it judges dead, so the games are
  played out (random moves that never fill one's own eye, a pass only when
  nothing else is left) and a score is compared only where GnuGo finds no dead
  stone (``final_status_list dead`` empty) and the board is not empty (GnuGo
  does not score an empty board by area); the others are counted apart.

The moves come from a policy that never fills its own one-point eyes, so games
run to the end and capture a lot (kos and superko repetitions included).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agz_jax.go.board import OFF_BOARD, neighbour_table, padded, stone
from agz_jax.go.gtp import GtpEngine
from agz_jax.go.rules import Rules, point, vertex


class Games(NamedTuple):
    """Random games ``[G]`` of at most ``T = max_moves`` plies.

    Attributes:
      actions: int32[G, T]; -1 once the game is over.
      legal: bool[G, T, A + 1]; the legal mask before each ply.
      boards: int8[G, T, A]; the board after each ply.
      ko: bool[G, T]; a simple-ko point is set before the ply.
      superko: bool[G, T]; positional superko forbids a move that simple ko allows.
      captured: int32[G, T]; stones removed by the ply.
      done: bool[G]; the game ended (two passes or the move cap).
      passes: int32[G]; consecutive passes at the end (2: ended by passing).
      score: float32[G]; ``Rules.score`` of the final position.
    """

    actions: np.ndarray
    legal: np.ndarray
    boards: np.ndarray
    ko: np.ndarray
    superko: np.ndarray
    captured: np.ndarray
    done: np.ndarray
    passes: np.ndarray
    score: np.ndarray


def own_eyes(rules: Rules, board: jax.Array, me: jax.Array) -> jax.Array:
    """bool[A]: empty points whose neighbours are all ``me``'s stones."""
    nbr = jnp.asarray(neighbour_table(rules.size))
    around = padded(board, OFF_BOARD)[nbr]
    return (board == 0) & jnp.all((around == me) | (around == OFF_BOARD), axis=1)


def random_action(rules: Rules, state, key: jax.Array, pass_prob: float = 0.0):
    """int32[]: a uniform legal point that does not fill one's own eye, or the
    pass (when none is left, or with probability ``pass_prob``)."""
    mask = rules.legal_mask(state)[:-1] & ~own_eyes(rules, state.board, stone(state.to_play))
    k1, k2 = jax.random.split(key)
    point = jax.random.categorical(k1, jnp.where(mask, 0.0, -jnp.inf))
    passing = ~jnp.any(mask) | (jax.random.uniform(k2) < pass_prob)
    return jnp.where(passing, rules.pass_action, point).astype(jnp.int32)


@functools.partial(jax.jit, static_argnums=(0, 2, 3))
def _play(rules: Rules, key: jax.Array, games: int, pass_prob: float):
    simple = dataclasses.replace(rules, superko=False)

    def ply(state, key):
        legal = rules.legal_mask(state)
        action = random_action(rules, state, key, pass_prob)
        after = rules.step(state, action)
        record = (jnp.where(state.done, -1, action), legal, after.board, state.ko >= 0,
                  jnp.any(simple.legal_mask(state) & ~legal),
                  jnp.sum((state.board != 0) & (after.board == 0), dtype=jnp.int32))
        return after, record

    def game(key):
        final, record = jax.lax.scan(ply, rules.init(), jax.random.split(key, rules.max_moves))
        return record, final.done, final.passes, rules.score(final)

    return jax.vmap(game)(jax.random.split(key, games))


def random_games(rules: Rules, key: jax.Array, games: int, pass_prob: float = 0.0) -> Games:
    """``games`` random games (see the module), as host arrays."""
    record, done, passes, score = jax.device_get(_play(rules, key, games, pass_prob))
    return Games(*record, done, passes, score)


@dataclasses.dataclass
class Tally:
    """What a cross-check compared, and every disagreement found."""

    games: int = 0
    positions: int = 0
    legal_checks: int = 0
    ko_positions: int = 0
    superko_positions: int = 0
    captures: int = 0
    scores: int = 0
    scores_skipped: int = 0
    forgotten_superko: int = 0
    disagreements: list = dataclasses.field(default_factory=list)

    def add(self, other: Tally) -> Tally:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self


def parse_score(text: str) -> float:
    """GTP's ``final_score`` ("B+3.5", "W+0.5", "0") as black minus white."""
    text = text.strip().upper()
    if text in ("0", "DRAW"):
        return 0.0
    sign = {"B": 1.0, "W": -1.0}[text[0]]
    return sign * float(text[2:])


def board_of(rules: Rules, engine: GtpEngine) -> np.ndarray:
    """int8[A]: the engine's board, from ``list_stones``."""
    board = np.zeros(rules.num_points, np.int8)
    for colour, value in (("black", 1), ("white", -1)):
        for v in engine.send(f"list_stones {colour}").split():
            board[point(rules.size, v)] = value
    return board


GNUGO_HISTORY = 500
"""GnuGo 3.8 keeps 500 moves of history (``MAX_MOVE_HISTORY``): past that it folds
the oldest 51 into its starting position, and its superko check no longer sees
the boards before them."""


def repeats(engine: GtpEngine, rules: Rules, games: Games, g: int, t: int, colour: str,
            move: str) -> bool:
    """Does ``move`` (legal for the engine before ply ``t`` of game ``g``) recreate
    a board of the game's record: a superko repetition the engine has forgotten?
    Tried in the engine (GnuGo's ``trymove``, which leaves its move history alone),
    its board read back, and taken back (``popgo``)."""
    engine.send(f"trymove {colour} {move}")
    board = board_of(rules, engine)
    engine.send("popgo")
    earlier = games.boards[g, :t]
    return bool(not board.any() or np.any(np.all(earlier == board, axis=1)))


def check_game(rules: Rules, games: Games, g: int, engine: GtpEngine,
               score: bool = True) -> Tally:
    """Replay game ``g`` of ``games`` in ``engine`` (configured for the same
    rules) and compare every position (see the module)."""
    size = rules.size
    tally = Tally(games=1)
    engine.send(f"boardsize {size}")
    engine.send("clear_board")
    engine.send(f"komi {rules.komi}")
    names = [vertex(size, p) for p in range(rules.num_points)]
    for t, action in enumerate(games.actions[g]):
        if action < 0:
            break
        colour = "black" if t % 2 == 0 else "white"
        theirs = set(engine.send(f"all_legal {colour}").split())
        ours = {names[p] for p in np.flatnonzero(games.legal[g, t, :-1])}
        if rules.superko and t >= GNUGO_HISTORY:
            forgotten = {v for v in theirs - ours if repeats(engine, rules, games, g, t, colour, v)}
            tally.forgotten_superko += len(forgotten)
            theirs -= forgotten
        if theirs != ours:
            tally.disagreements.append(
                (g, t, "legal", f"only ours: {sorted(ours - theirs)}, "
                                f"only theirs: {sorted(theirs - ours)}"))
        engine.send(f"play {colour} {vertex(size, int(action))}")
        board = board_of(rules, engine)
        if not np.array_equal(board, games.boards[g, t]):
            tally.disagreements.append((g, t, "board", f"after {vertex(size, int(action))}"))
        tally.positions += 1
        tally.legal_checks += rules.num_points
        tally.ko_positions += int(games.ko[g, t])
        tally.superko_positions += int(games.superko[g, t])
        tally.captures += int(games.captured[g, t])
    if score and games.passes[g] >= 2:
        # GnuGo's final_score of an empty board is no area count (it gave B+5.5
        # with komi 7.5, where area scoring gives W+7.5): skipped like dead stones
        if not board_of(rules, engine).any() or engine.send("final_status_list dead").split():
            tally.scores_skipped += 1
        else:
            theirs = parse_score(engine.send("final_score"))
            tally.scores += 1
            if theirs != float(games.score[g]):
                tally.disagreements.append(
                    (g, -1, "score", f"ours {float(games.score[g])}, theirs {theirs}"))
    return tally
