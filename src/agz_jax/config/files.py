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
from agz_jax.config.sections import OpeningsConfig
from agz_jax.game import openings


def opening_set(config: Config) -> np.ndarray | None:
    """The opening set int32[K, M] of ``openings.path`` for the config's board,
    or None (ConfigError naming ``openings.path`` if it cannot be read or does
    not fit)."""
    return _read(config.openings, config.game.size)


def selfplay_opening_set(openings_cfg: OpeningsConfig, size: int) -> np.ndarray | None:
    """The openings self-play on a ``size`` board draws from: the set of
    ``openings_cfg.path`` (as ``opening_set``) with every translation of each
    opening by up to ``openings_cfg.shift`` points (``openings.translated``)."""
    moves = _read(openings_cfg, size)
    if moves is None or not openings_cfg.shift:
        return moves
    return openings.translated(moves, size, openings_cfg.shift)


def _read(openings_cfg: OpeningsConfig, size: int) -> np.ndarray | None:
    if not openings_cfg.path:
        return None
    try:
        return openings.load(openings_cfg.path, size)
    except (openings.OpeningsError, OSError) as e:
        raise ConfigError(f"openings.path: {e}") from None


def check(config: Config) -> Config:
    """``config``, once the files it names are read and fit (ConfigError
    naming the field otherwise)."""
    opening_set(config)
    return config
