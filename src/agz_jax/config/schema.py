"""Typed, frozen, validated configuration: ``Config``, one run's settings.

A ``Config`` holds one of each section (``agz_jax.config.sections``: frozen
dataclasses whose fields declare what their values must be, checked by
``agz_jax.base.checks``), so a bad value fails when the config is built, before
anything compiles, with a ``ConfigError`` that names the field
(``search.num_simulations must be a positive integer, got 0``). ``Config``
adds the checks across sections, the dict and JSON round trip and dotted
overrides. The section classes are importable from here too; the presets live
in ``agz_jax.config.presets``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from agz_jax.base.checks import (
    ConfigError,
    integer,
    require,
    setting,
    validate,
)
from agz_jax.config.sections import (
    BasicConfig,
    CheckpointConfig,
    CurriculumConfig,
    DecayConfig,
    EvalConfig,
    FeaturesConfig,
    GameConfig,
    GatingConfig,
    ImitateConfig,
    NetConfig,
    OpeningsConfig,
    ParallelConfig,
    ReplayConfig,
    SearchConfig,
    SelfPlayConfig,
    TrainConfig,
)


@dataclass(frozen=True)
class Config:
    """One run of self-play reinforcement learning."""

    seed: int = setting(0, integer(0))
    """Every random number of the run comes from it: the same seed and config on
    the same machine type and jax build give the same run, resumed or not."""
    iterations: int = setting(100, integer(1))
    """Iterations of the loop (self-play, training, gating, evaluation); with
    ``--resume``, a larger number extends a finished run."""
    game: GameConfig = field(default_factory=GameConfig)
    net: NetConfig = field(default_factory=NetConfig)
    features: FeaturesConfig = field(default_factory=FeaturesConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    decay: DecayConfig = field(default_factory=DecayConfig)
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    gating: GatingConfig = field(default_factory=GatingConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    openings: OpeningsConfig = field(default_factory=OpeningsConfig)
    basic: BasicConfig = field(default_factory=BasicConfig)
    imitate: ImitateConfig = field(default_factory=ImitateConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)

    def __post_init__(self):
        validate(self, "")
        self.check_algorithm_options()
        # Each net's buffer holds at most replay.capacity positions: a larger
        # min_replay would keep the run from ever training.
        require(self.train.min_replay <= self.replay.capacity, "train.min_replay",
                f"must be at most replay.capacity ({self.replay.capacity}), or the run never "
                "trains: lower --train.min-replay or raise --replay.capacity",
                self.train.min_replay)
        if self.parallel.devices:
            self.check_devices(self.parallel.devices)

    # Options that only one search algorithm reads: set for the other, they
    # would be ignored, so they are refused (left at their defaults, they are).
    PUCT_ONLY = ("search.c_puct", "search.qtransform", "search.fpu_reduction",
                 "search.dirichlet_fraction", "search.dirichlet_alpha")
    GUMBEL_ONLY = ("search.max_considered_actions",)

    def check_algorithm_options(self) -> None:
        """ConfigError for an option the chosen ``search.algorithm`` does not
        read (Gumbel explores by its own Gumbel noise and plays its own choice;
        PUCT considers every move), when it differs from its default."""
        algorithm = self.search.algorithm
        unused = self.PUCT_ONLY if algorithm == "gumbel" else self.GUMBEL_ONLY
        other = "puct" if algorithm == "gumbel" else "gumbel"
        for name in unused:
            section, key = name.split(".")
            value = getattr(getattr(self, section), key)
            default = getattr(type(getattr(self, section))(), key)
            require(value == default, name,
                    f"applies to search.algorithm={other} only, and this config searches with "
                    f"{algorithm}: leave it at its default ({default!r}) or change the "
                    "algorithm", value)

    def check_devices(self, devices: int) -> None:
        """The global batches must split evenly over ``devices`` (ConfigError if not)."""
        for name, value in (("selfplay.num_games", self.selfplay.num_games),
                            ("train.batch_size", self.train.batch_size)):
            require(value % devices == 0, name,
                    f"must be a multiple of the {devices} devices of the mesh "
                    "(set parallel.devices, or change it)", value)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def first_difference(self, other: Config, allow: tuple[str, ...] = ()) -> str | None:
        """The first dotted field (``"search.num_simulations"``) where ``other``
        differs, or None; fields or whole sections named in ``allow`` are skipped."""
        mine, theirs = self.to_dict(), other.to_dict()
        for key in sorted(mine):
            if key in allow:
                continue
            if isinstance(mine[key], dict):
                for sub in sorted(mine[key]):
                    if f"{key}.{sub}" not in allow and mine[key][sub] != theirs[key].get(sub):
                        return f"{key}.{sub}"
            elif mine[key] != theirs[key]:
                return key
        return None

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
    "features": FeaturesConfig,
    "search": SearchConfig,
    "decay": DecayConfig,
    "selfplay": SelfPlayConfig,
    "replay": ReplayConfig,
    "train": TrainConfig,
    "gating": GatingConfig,
    "eval": EvalConfig,
    "parallel": ParallelConfig,
    "checkpoint": CheckpointConfig,
    "openings": OpeningsConfig,
    "basic": BasicConfig,
    "imitate": ImitateConfig,
    "curriculum": CurriculumConfig,
}
