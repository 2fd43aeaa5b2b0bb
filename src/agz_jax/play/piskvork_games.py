"""Games between two Piskvork engines (``agz_jax.play.piskvork``), refereed by the
project's rules.

    with Piskvork(["/opt/rapfi-src/build/pbrain-rapfi"], "rapfi:1000",
                  Settings(timeout_turn_ms=30000, max_node=1000)) as rapfi, \\
         Piskvork(["pbrain-agz", "--model", "default"], "agz") as agz:
        game = play_game(agz, rapfi, opening=[112, 113, 127])

``play_game`` plays one game between two managers from an opening (actions
already on the board, black first), referees it with the project's rules
(``agz_jax.game.gomoku.Rules.is_win``: five or more in a row for freestyle, a full
board a draw; under renju a black move on a forbidden point loses, as in
Gomocup's renju league) and counts an engine's failure as its loss, the reason
kept. ``pbrain-agz --debug`` says before each move what its search did;
``Game.searched`` keeps that for every move, so that a match's ledger shows
how much each move searched on the machine that played it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import NamedTuple

from agz_jax.play.piskvork import EngineError, Piskvork

BLACK, WHITE, DRAW = 0, 1, -1


class Game(NamedTuple):
    """One finished game. ``winner``: ``BLACK`` (0), ``WHITE`` (1) or ``DRAW``
    (-1); ``moves``: every action from the empty board, the opening's first;
    ``reason``: ``five``, ``full board``, ``forbidden (double three)`` (and the
    other fouls, renju), or the failure of the engine that lost
    (``failed``: its colour; None when nobody failed)."""

    winner: int
    moves: list[int]
    reason: str
    failed: int | None
    failure: str | None  # the EngineError's kind ("timeout", "illegal", ...)
    seconds: float
    searched: tuple = ()  # a move's account (``searched``) for each move after the opening


_SEARCHED = re.compile(r"DEBUG (\w+): (\d+) simulations(?: \(\+(\d+) carried\))? in (\d+) ms")


def searched(notes: Sequence[str]) -> list | None:
    """What ``pbrain-agz --debug`` said of the move it just played: ``[reason,
    simulations, carried, ms]`` (reason ``search``, ``block``, ``vcf``, ``win``,
    ...; ``carried``: the visits its tree kept from the last move), from the
    notes before its reply; None when there is no such line (another engine,
    or no ``--debug``)."""
    for line in notes:
        found = _SEARCHED.match(line)
        if found:
            return [found[1], int(found[2]), int(found[3] or 0), int(found[4])]
    return None


def rule_name(bits: int) -> str:
    """The rule of a Piskvork ``INFO rule`` value (bit 4 renju, bit 1 exactly five)."""
    return "renju" if bits & 4 else "standard" if bits & 1 else "freestyle"


def rule_bits(rule: str) -> int:
    """``INFO rule`` of a rule name: 0 freestyle, 1 standard, 4 renju."""
    return {"freestyle": 0, "standard": 1, "renju": 4}[rule]


class Referee:
    """Five-in-a-row by the project's rules: ``Rules.is_win`` (jitted once) on
    the stone just played."""

    def __init__(self, size: int = 15, rule: str = "freestyle"):
        import jax

        from agz_jax.game.gomoku import Rules

        self.rules = Rules(size, rule)
        self._is_win = jax.jit(self.rules.is_win)

    def is_win(self, board, action: int) -> bool:
        """Does the stone on ``action`` of ``board`` (int8[A], +1 black, -1
        white) make a winning line?"""
        return bool(self._is_win(board, action))

    def foul(self, board, action: int) -> str | None:
        """Under renju, why black's move on the empty point ``action`` of
        ``board`` is forbidden (None when it is not, or not renju)."""
        if self.rules.rule != "renju":
            return None
        from agz_jax.game import renju

        code = renju.foul_code(board, action)
        return renju.FOULS[code] if code else None


def play_game(black: Piskvork, white: Piskvork, opening: Sequence[int] = (),
              referee: Referee | None = None) -> Game:
    """One game from ``opening`` (actions, black first) between two managers.

    Each engine gets ``new_game``, then at its first move the position so far
    (``BOARD``, or ``BEGIN`` on the empty board) and after that ``TURN`` with
    the opponent's move. The game ends on a five (``Referee``), a full board
    (a draw) or an engine's failure: an ``EngineError`` of either engine,
    starting the game included, is that engine's loss, with its message as the
    reason. The failed engine is not closed here: its caller decides.
    """
    import numpy as np

    size = black.settings.size
    if white.settings.size != size:
        raise ValueError(f"the engines play different boards: {size} and "
                         f"{white.settings.size}")
    referee = referee or Referee(size, rule_name(black.settings.rule))
    t0 = time.monotonic()
    board = np.zeros(size * size, np.int8)
    moves = [int(a) for a in opening]
    for i, action in enumerate(moves):
        if board[action]:
            raise ValueError(f"the opening plays the point {action} twice")
        board[action] = 1 if i % 2 == BLACK else -1
    engines = (black, white)
    seen = [False, False]  # has the engine been sent the position yet?
    accounts: list = []  # searched(...) of each move after the opening

    def over(winner, reason, failed=None, failure=None) -> Game:
        return Game(winner, moves, reason, failed, failure, time.monotonic() - t0,
                    tuple(accounts))

    for colour, engine in enumerate(engines):
        try:
            engine.new_game()
        except EngineError as e:
            return over(1 - colour, str(e), colour, e.kind)
    while True:
        if not (board == 0).any():
            return over(DRAW, "full board")
        colour = len(moves) % 2
        engine = engines[colour]
        try:
            if seen[colour]:
                action = engine.turn(moves[-1])
            elif moves:
                action = engine.board(moves, colour)
            else:
                action = engine.begin()
            seen[colour] = True
        except EngineError as e:
            return over(1 - colour, str(e), colour, e.kind)
        foul = referee.foul(board, action) if colour == BLACK else None
        moves.append(action)
        accounts.append(searched(engine.notes))
        if foul:
            return over(WHITE, f"forbidden ({foul})")
        board[action] = 1 if colour == BLACK else -1
        if referee.is_win(board, action):
            return over(colour, "five")
