"""A move's thinking time under the Piskvork protocol's time limits: ``INFO
timeout_turn``, ``timeout_match`` and ``time_left`` (milliseconds), as
``pbrain-agz`` spends them (``agz_jax.play.brain`` describes the rule)."""

from __future__ import annotations

UNLIMITED_MS = 2147483647
"""``INFO time_left`` for a match without a time limit."""


def move_budget_ms(*, timeout_turn: float | None, timeout_match: float | None,
                   time_left: float | None, used_ms: float, empty: int) -> float | None:
    """Milliseconds the next move may think (after the safety reserve); None: no limit.

    Args:
      timeout_turn: ``INFO timeout_turn`` (0: as fast as possible), None if not sent.
      timeout_match: ``INFO timeout_match`` (0: no limit), None if not sent;
        used only when ``time_left`` is None.
      time_left: what is left of the match (``INFO time_left``, counted down by
        the time used since); may be negative; ``UNLIMITED_MS`` or more: no limit.
      used_ms: thinking time used this game (for ``timeout_match``).
      empty: empty points on the board (the moves still to play, roughly twice).
    """
    budgets = []
    if timeout_turn is not None:
        budgets.append(float(timeout_turn))
    left = time_left
    if left is None and timeout_match:
        left = timeout_match - used_ms
    if left is not None and left < UNLIMITED_MS:
        moves_to_go = min(30, max(5, empty // 2))
        budgets.append(max(0.0, float(left)) / moves_to_go)
    if not budgets:
        return None
    budget = min(budgets)
    # Reserve: printing, the manager's own overhead and clock noise.
    return budget - min(budget, max(40.0, 0.08 * budget))
