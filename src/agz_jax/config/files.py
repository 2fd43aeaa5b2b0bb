"""What a config names on disk, read here rather than by ``Config``, which
stays data: the opening set of ``openings.path``.

``check`` reads it where a config is made from what a user gave (the training
commands' flags, a sweep's grid, an ablation file), so that a missing or
unfitting file fails before anything compiles; the builders read it when they
need the moves.
"""

from __future__ import annotations

import numpy as np

from agz_jax.config.schema import Config, ConfigError
from agz_jax.game import openings


def opening_set(config: Config) -> np.ndarray | None:
    """The opening set int32[K, M] of ``openings.path`` for the config's board,
    or None (ConfigError naming ``openings.path`` if it cannot be read or does
    not fit)."""
    if not config.openings.path:
        return None
    try:
        return openings.load(config.openings.path, config.game.size)
    except (openings.OpeningsError, OSError) as e:
        raise ConfigError(f"openings.path: {e}") from None


def selfplay_opening_set(config: Config) -> np.ndarray | None:
    """The openings self-play draws from: ``opening_set`` with every translation
    of each opening by up to ``openings.shift`` points (``openings.translated``)."""
    moves = opening_set(config)
    if moves is None or not config.openings.shift:
        return moves
    return openings.translated(moves, config.game.size, config.openings.shift)


def check(config: Config) -> Config:
    """``config``, once the files it names are read and fit (ConfigError
    naming the field otherwise)."""
    opening_set(config)
    return config
