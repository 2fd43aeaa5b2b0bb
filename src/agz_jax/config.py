"""Typed, frozen, validated configuration and the presets.

Every section is a frozen dataclass whose ``__post_init__`` checks its fields,
so a bad value fails when the config is built, before anything compiles, with a
``ConfigError`` that names the field (``search.num_simulations must be ...``).
Presets are plain data: ``PRESETS[name]`` is a ``Config``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from agz_jax.gomoku import MAX_SIZE, MIN_SIZE, RULES


class ConfigError(ValueError):
    """A config value is out of range; the message names the field."""


def _check(cond: bool, name: str, msg: str, value: Any) -> None:
    if not cond:
        raise ConfigError(f"{name} {msg}, got {value!r}")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@dataclass(frozen=True)
class GameConfig:
    """The board and the winning rule."""

    size: int = 15
    """Board side, 5..19."""
    rule: str = "freestyle"
    """'freestyle' (five or more wins, the paper's) or 'standard' (exactly five)."""

    def __post_init__(self):
        _check(_is_int(self.size) and MIN_SIZE <= self.size <= MAX_SIZE,
               "game.size", f"must be an integer in {MIN_SIZE}..{MAX_SIZE}", self.size)
        _check(self.rule in RULES, "game.rule", f"must be one of {RULES}", self.rule)


@dataclass(frozen=True)
class NetConfig:
    """The policy-value net (paper Tables I-III) and Double Networks."""

    filters: int = 32
    blocks: int = 2
    value_hidden: int = 32
    double: bool = True
    """Double Networks (paper III.B): a black net and a white net."""

    def __post_init__(self):
        _check(_is_int(self.filters) and self.filters >= 1, "net.filters", "must be >= 1",
               self.filters)
        _check(_is_int(self.blocks) and self.blocks >= 0, "net.blocks", "must be >= 0",
               self.blocks)
        _check(_is_int(self.value_hidden) and self.value_hidden >= 1, "net.value_hidden",
               "must be >= 1", self.value_hidden)
        _check(isinstance(self.double, bool), "net.double", "must be a bool", self.double)

    @property
    def num_nets(self) -> int:
        return 2 if self.double else 1


ALGORITHMS = ("puct", "gumbel")
QTRANSFORMS = ("raw", "minmax")


@dataclass(frozen=True)
class SearchConfig:
    """Tree search on mctx."""

    algorithm: str = "puct"
    """'puct' (AlphaGo Zero's c_puct rule, the paper's) or 'gumbel' (Gumbel MuZero)."""
    num_simulations: int = 400
    c_puct: float = 5.0
    qtransform: str = "raw"
    """'raw': Q in [-1, 1], unvisited 0 (the paper's); 'minmax': mctx's normalisation."""
    dirichlet_fraction: float = 0.25
    """Root noise in self-play only; 0 disables it."""
    dirichlet_alpha: float = 0.3
    max_considered_actions: int = 16
    """Gumbel only: actions considered at the root."""

    def __post_init__(self):
        _check(self.algorithm in ALGORITHMS, "search.algorithm", f"must be one of {ALGORITHMS}",
               self.algorithm)
        _check(_is_int(self.num_simulations) and self.num_simulations >= 1,
               "search.num_simulations", "must be a positive integer", self.num_simulations)
        _check(_is_num(self.c_puct) and self.c_puct > 0, "search.c_puct", "must be > 0",
               self.c_puct)
        _check(self.qtransform in QTRANSFORMS, "search.qtransform",
               f"must be one of {QTRANSFORMS}", self.qtransform)
        _check(_is_num(self.dirichlet_fraction) and 0 <= self.dirichlet_fraction <= 1,
               "search.dirichlet_fraction", "must be in [0, 1]", self.dirichlet_fraction)
        _check(_is_num(self.dirichlet_alpha) and self.dirichlet_alpha > 0,
               "search.dirichlet_alpha", "must be > 0", self.dirichlet_alpha)
        _check(_is_int(self.max_considered_actions) and self.max_considered_actions >= 1,
               "search.max_considered_actions", "must be >= 1", self.max_considered_actions)


@dataclass(frozen=True)
class DecayConfig:
    """Winning Value Decay (paper III.C)."""

    gamma: float = 0.95
    """Per-ply decay of backed-up values and of the z labels; 1.0 is plain AlphaZero."""

    def __post_init__(self):
        _check(_is_num(self.gamma) and 0 < self.gamma <= 1, "decay.gamma", "must be in (0, 1]",
               self.gamma)


MOVE_POLICIES = ("semi_stochastic", "stochastic", "deterministic")


@dataclass(frozen=True)
class SelfPlayConfig:
    num_games: int = 64
    """Games played at once (the vmapped batch)."""
    move_policy: str = "semi_stochastic"
    """'stochastic' (pi ~ N), 'deterministic' (argmax N) or 'semi_stochastic'
    (tau = tau_base ** (move // 2) until tau < tau_min, then argmax; the paper's)."""
    tau_base: float = 0.8
    tau_min: float = 0.04

    def __post_init__(self):
        _check(_is_int(self.num_games) and self.num_games >= 1, "selfplay.num_games",
               "must be a positive integer", self.num_games)
        _check(self.move_policy in MOVE_POLICIES, "selfplay.move_policy",
               f"must be one of {MOVE_POLICIES}", self.move_policy)
        _check(_is_num(self.tau_base) and 0 < self.tau_base <= 1, "selfplay.tau_base",
               "must be in (0, 1]", self.tau_base)
        _check(_is_num(self.tau_min) and 0 < self.tau_min <= 1, "selfplay.tau_min",
               "must be in (0, 1]", self.tau_min)


@dataclass(frozen=True)
class ReplayConfig:
    capacity: int = 100_000
    """Positions kept per net (the buffer is split by colour with Double Networks)."""

    def __post_init__(self):
        _check(_is_int(self.capacity) and self.capacity >= 1, "replay.capacity",
               "must be a positive integer", self.capacity)


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 512
    """Positions per step, per net."""
    steps_per_iteration: int = 100
    learning_rate: float = 2e-3
    momentum: float = 0.9
    nesterov: bool = True
    l2: float = 1e-4
    """c in the loss (z - v)^2 - pi^T log p + c ||theta||^2 (kernels only)."""
    min_replay: int = 512
    """Train only once each net's buffer holds this many positions."""

    def __post_init__(self):
        for name in ("batch_size", "steps_per_iteration", "min_replay"):
            v = getattr(self, name)
            _check(_is_int(v) and v >= (0 if name == "min_replay" else 1), f"train.{name}",
                   "must be a positive integer", v)
        _check(_is_num(self.learning_rate) and self.learning_rate > 0, "train.learning_rate",
               "must be > 0", self.learning_rate)
        _check(_is_num(self.momentum) and 0 <= self.momentum < 1, "train.momentum",
               "must be in [0, 1)", self.momentum)
        _check(_is_num(self.l2) and self.l2 >= 0, "train.l2", "must be >= 0", self.l2)


@dataclass(frozen=True)
class GatingConfig:
    """Evaluation match of the candidate against the best net (AlphaGo Zero)."""

    enabled: bool = True
    num_games: int = 20
    """Even: half with the candidate as black, half as white."""
    num_simulations: int = 400
    threshold: float = 0.55
    """The candidate replaces the best if its score (wins + draws/2) / games >= this."""

    def __post_init__(self):
        _check(_is_int(self.num_games) and self.num_games >= 2 and self.num_games % 2 == 0,
               "gating.num_games", "must be an even integer >= 2", self.num_games)
        _check(_is_int(self.num_simulations) and self.num_simulations >= 1,
               "gating.num_simulations", "must be a positive integer", self.num_simulations)
        _check(_is_num(self.threshold) and 0 <= self.threshold <= 1, "gating.threshold",
               "must be in [0, 1]", self.threshold)


@dataclass(frozen=True)
class EvalConfig:
    """Periodic match of the best net (with search) against a uniformly random player."""

    every: int = 5
    """Every this many iterations (and after the last); 0 disables it."""
    num_games: int = 100
    num_simulations: int = 64

    def __post_init__(self):
        _check(_is_int(self.every) and self.every >= 0, "eval.every", "must be >= 0", self.every)
        _check(_is_int(self.num_games) and self.num_games >= 2 and self.num_games % 2 == 0,
               "eval.num_games", "must be an even integer >= 2", self.num_games)
        _check(_is_int(self.num_simulations) and self.num_simulations >= 1,
               "eval.num_simulations", "must be a positive integer", self.num_simulations)


@dataclass(frozen=True)
class ParallelConfig:
    """Data parallelism over a device mesh (``agz_jax.parallel``).

    Self-play games and training batches are split over the devices of a 1-D
    mesh (axis ``data``); parameters are replicated and gradients averaged by
    the collective XLA inserts. ``selfplay.num_games`` and ``train.batch_size``
    are global; each device gets ``1/devices`` of them. Results equal the
    1-device run's within float tolerance, so a run may resume on another
    number of devices. Hosts (``jax.distributed``) are set on the command
    line, not here: see ``experiments/selfplay.py --help``.
    """

    devices: int = 0
    """Devices in the mesh: 0 = every device of every process; n = the first n."""

    def __post_init__(self):
        _check(_is_int(self.devices) and self.devices >= 0, "parallel.devices",
               "must be 0 (every device) or a positive integer", self.devices)


@dataclass(frozen=True)
class Config:
    """One run of self-play reinforcement learning."""

    seed: int = 0
    iterations: int = 100
    game: GameConfig = field(default_factory=GameConfig)
    net: NetConfig = field(default_factory=NetConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    decay: DecayConfig = field(default_factory=DecayConfig)
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    gating: GatingConfig = field(default_factory=GatingConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)

    def __post_init__(self):
        _check(_is_int(self.seed) and self.seed >= 0, "seed", "must be a non-negative integer",
               self.seed)
        _check(_is_int(self.iterations) and self.iterations >= 1, "iterations",
               "must be a positive integer", self.iterations)
        if self.parallel.devices:
            self.check_devices(self.parallel.devices)

    def check_devices(self, devices: int) -> None:
        """The global batches must split evenly over ``devices`` (ConfigError if not)."""
        for name, value in (("selfplay.num_games", self.selfplay.num_games),
                            ("train.batch_size", self.train.batch_size)):
            _check(value % devices == 0, name,
                   f"must be a multiple of the {devices} devices of the mesh "
                   "(set parallel.devices, or change it)", value)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> Config:
        kwargs = {}
        known = {f.name: f for f in dataclasses.fields(cls)}
        for k, v in d.items():
            if k not in known:
                raise ConfigError(f"unknown config field {k!r}")
            sub = _SECTIONS.get(k)
            if sub is not None:
                sub_known = {f.name for f in dataclasses.fields(sub)}
                bad = set(v) - sub_known
                if bad:
                    raise ConfigError(f"unknown config field {k}.{sorted(bad)[0]}")
                kwargs[k] = sub(**v)
            else:
                kwargs[k] = v
        return cls(**kwargs)

    def replace(self, **overrides) -> Config:
        """Dotted overrides: ``cfg.replace(**{'search.num_simulations': 64})``."""
        d = self.to_dict()
        for key, value in overrides.items():
            parts = key.replace("-", "_").split(".")
            node = d
            for p in parts[:-1]:
                if p not in node or not isinstance(node[p], dict):
                    raise ConfigError(f"unknown config field {key!r}")
                node = node[p]
            if parts[-1] not in node:
                raise ConfigError(f"unknown config field {key!r}")
            node[parts[-1]] = value
        return Config.from_dict(d)


_SECTIONS = {
    "game": GameConfig,
    "net": NetConfig,
    "search": SearchConfig,
    "decay": DecayConfig,
    "selfplay": SelfPlayConfig,
    "replay": ReplayConfig,
    "train": TrainConfig,
    "gating": GatingConfig,
    "eval": EvalConfig,
    "parallel": ParallelConfig,
}


PRESETS: dict[str, Config] = {
    # A tiny everything: checks the whole loop in about a minute on 2 CPU cores.
    "smoke": Config(
        iterations=3,
        game=GameConfig(size=7),
        net=NetConfig(filters=8, blocks=1, value_hidden=8),
        search=SearchConfig(num_simulations=8),
        selfplay=SelfPlayConfig(num_games=8),
        replay=ReplayConfig(capacity=2048),
        train=TrainConfig(batch_size=32, steps_per_iteration=4, min_replay=32),
        gating=GatingConfig(num_games=4, num_simulations=8),
        eval=EvalConfig(every=0, num_games=4, num_simulations=8),
    ),
    # The default of `make selfplay`: the paper's net and Double Networks on a
    # 9x9 board, with Gumbel search (its improved-policy targets need far fewer
    # simulations than PUCT's visit counts); about 15 minutes on 2 CPU cores.
    "cpu": Config(
        iterations=30,
        game=GameConfig(size=9),
        net=NetConfig(filters=32, blocks=2, double=True),
        search=SearchConfig(algorithm="gumbel", num_simulations=16),
        selfplay=SelfPlayConfig(num_games=64),
        replay=ReplayConfig(capacity=20_000),
        train=TrainConfig(batch_size=128, steps_per_iteration=40, min_replay=256,
                          learning_rate=2e-2),
        gating=GatingConfig(num_games=16, num_simulations=16),
        eval=EvalConfig(every=10, num_games=100, num_simulations=16),
    ),
    # The paper's settings (Section III/IV; original code's hyper-parameters).
    "paper": Config(
        iterations=1000,
        game=GameConfig(size=15),
        net=NetConfig(filters=32, blocks=2, double=True),
        search=SearchConfig(num_simulations=1600, c_puct=5.0),
        decay=DecayConfig(gamma=0.95),
        selfplay=SelfPlayConfig(num_games=64),
        replay=ReplayConfig(capacity=500_000),
        train=TrainConfig(batch_size=512, steps_per_iteration=200, learning_rate=2e-3,
                          momentum=0.9, nesterov=True, l2=1e-4, min_replay=4096),
        gating=GatingConfig(num_games=40, num_simulations=400, threshold=0.55),
        eval=EvalConfig(every=10, num_games=100, num_simulations=400),
    ),
    # The paper's game and net, sized for one accelerator.
    "gpu": Config(
        iterations=500,
        game=GameConfig(size=15),
        net=NetConfig(filters=64, blocks=4),
        search=SearchConfig(num_simulations=400),
        selfplay=SelfPlayConfig(num_games=512),
        replay=ReplayConfig(capacity=1_000_000),
        train=TrainConfig(batch_size=1024, steps_per_iteration=400, min_replay=8192),
        gating=GatingConfig(num_games=64, num_simulations=400),
        eval=EvalConfig(every=10, num_games=100, num_simulations=400),
    ),
}


def get_preset(name: str) -> Config:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
