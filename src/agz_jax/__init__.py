"""agz_jax: AlphaGomoku (AlphaGo Zero for gomoku) in pure-functional JAX.

The public API; internals may move behind it.
"""

from agz_jax.config.presets import PRESETS, get_preset
from agz_jax.config.schema import Config, ConfigError
from agz_jax.game.gomoku import BLACK, WHITE, Rules, State
from agz_jax.match.arena import (
    MatchResult,
    Score,
    mcts_player,
    play_match,
    policy_player,
    random_player,
    score,
)
from agz_jax.nets.networks import Networks, PolicyValueNet
from agz_jax.search.searcher import Searcher, temperature, winning_value_decay
from agz_jax.training.selfplay import Trajectory, decayed_z, make_selfplay, to_examples
from agz_jax.training.train import TrainState, init_train_state, make_train_step

__version__ = "0.1.0"

__all__ = [
    "BLACK", "WHITE", "Config", "ConfigError", "MatchResult", "Networks", "PRESETS",
    "PolicyValueNet", "Rules", "Score", "State", "TrainState", "Trajectory", "decayed_z",
    "get_preset", "init_train_state", "make_selfplay", "make_train_step", "mcts_player",
    "play_match", "policy_player", "random_player", "Searcher", "score",
    "temperature", "to_examples", "winning_value_decay",
]
