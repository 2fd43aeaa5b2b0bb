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
class FeaturesConfig:
    """Input planes of the nets (``agz_jax.features``): the paper's [X, Y, L], then
    Maddison et al.'s optional extras (Table 1), in this order. All off: the
    observation is exactly the paper's 3 planes."""

    history: int = 0
    """"Turns since": planes marking the stones played 1, 2, ..., k plies ago."""
    colour: bool = False
    """A plane of ones when black is to move (zeros for white)."""
    constant: bool = False
    """A plane of ones, so that the net sees the board edge through zero padding."""
    ranks: int = 0
    """Rank conditioning: k one-hot planes of the strength (``State.rank``) of the
    player whose move is predicted."""

    def __post_init__(self):
        _check(_is_int(self.history) and self.history >= 0, "features.history",
               "must be an integer >= 0", self.history)
        _check(isinstance(self.colour, bool), "features.colour", "must be a bool", self.colour)
        _check(isinstance(self.constant, bool), "features.constant", "must be a bool",
               self.constant)
        _check(_is_int(self.ranks) and self.ranks >= 0, "features.ranks",
               "must be an integer >= 0", self.ranks)

    @property
    def channels(self) -> int:
        """Planes of an observation."""
        return 3 + self.history + int(self.colour) + int(self.constant) + self.ranks


@dataclass(frozen=True)
class NetConfig:
    """The policy-value net (paper Tables I-III), Double Networks, and Maddison et
    al.'s architecture options (``agz_jax.networks``)."""

    filters: int = 32
    blocks: int = 2
    value_hidden: int = 32
    double: bool = True
    """Double Networks (paper III.B): a black net and a white net."""
    position_bias: bool = False
    """A learned bias per board point and channel in every conv layer."""
    symmetric: bool = False
    """Conv filters tied to be invariant under the 8 dihedral maps; the heads become
    fully convolutional / globally pooled, so the net is exactly equivariant."""
    colour_heads: bool = False
    """One trunk with a black and a white head (Maddison's two softmaxes); an
    alternative to ``double``."""

    def __post_init__(self):
        _check(_is_int(self.filters) and self.filters >= 1, "net.filters", "must be >= 1",
               self.filters)
        _check(_is_int(self.blocks) and self.blocks >= 0, "net.blocks", "must be >= 0",
               self.blocks)
        _check(_is_int(self.value_hidden) and self.value_hidden >= 1, "net.value_hidden",
               "must be >= 1", self.value_hidden)
        for name in ("double", "position_bias", "symmetric", "colour_heads"):
            v = getattr(self, name)
            _check(isinstance(v, bool), f"net.{name}", "must be a bool", v)
        _check(not (self.colour_heads and self.double), "net.colour_heads",
               "is an alternative to Double Networks: set net.double=false to use it",
               self.colour_heads)

    @property
    def num_nets(self) -> int:
        return 2 if self.double else 1


ALGORITHMS = ("puct", "gumbel")
QTRANSFORMS = ("raw", "minmax")
SEARCH_DTYPES = ("float32", "bfloat16")


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
    forced_moves: bool = False
    """At every node of the tree, search only the forced moves when there are
    any: the mover's own fives, else the blocks of the opponent's fives, else
    the mover's open fours and double fours (``search.search_moves``). This
    never changes a position's game value and lets the search read forcing
    lines deeply. False is plain AlphaZero search."""
    answer_threats: bool = False
    """With ``forced_moves``, a fourth kind: when the opponent can make an open
    four or a double four, search only the mover's fours and the moves that
    leave the opponent no such move (``search.threat_answers``); every other
    move loses in four plies."""
    answer_four_threes: bool = False
    """With ``answer_threats``, a fifth kind: when the opponent has a
    four-three point (a four and, on another line, an open three), search only
    the mover's fours and the moves that leave it none
    (``search.four_three_answers``). Every other move loses in six plies
    unless the forced block of the four makes the mover a four."""
    threat_values: bool = False
    """Value a searched position by the win its stones force, when they force
    one (``search.threat_value``): the mover's five, open four or double four,
    four-three, or a four whose block leaves it one of those; else by the net.
    A move that leaves the opponent such a win is then seen to lose as soon as
    it is expanded, not only when the search has read the win to its end."""
    dtype: str = "float32"
    """What the nets compute in during search (root and every expanded node):
    'float32', or 'bfloat16' (mixed precision: params and observations cast,
    BatchNorm statistics, logits and values float32; ``Networks.evaluate``).
    bfloat16 halves the bytes of the params and activations and runs on an
    accelerator's bf16 units; it changes the priors and values a little
    (``make bench`` reports the agreement: argmax agreement, total-variation
    distance, |value difference|), so trees may differ. Training, the raw
    policy and everything outside the search stay float32. It is meant for
    accelerators: on 2 CPU cores it ran at 0.7x (9x9, batch 8) to 1.1x (15x15,
    batch 64) float32's speed."""
    reuse: bool = False
    """Keep the subtree under the move played (and, in the engine and the web
    board, under the opponent's reply) as the next search's tree
    (``agz_jax.tree.reuse``). Its visits count towards the next search's
    budget: a search then runs only the simulations that fill the tree to
    ``num_simulations`` visits at the root. PUCT only (Gumbel's sequential
    halving schedules the root's visits from zero)."""

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
        _check(isinstance(self.forced_moves, bool), "search.forced_moves",
               "must be true or false", self.forced_moves)
        _check(isinstance(self.answer_threats, bool), "search.answer_threats",
               "must be true or false", self.answer_threats)
        _check(self.forced_moves or not self.answer_threats, "search.answer_threats",
               "needs search.forced_moves (it is their fourth kind)", self.answer_threats)
        _check(isinstance(self.answer_four_threes, bool), "search.answer_four_threes",
               "must be true or false", self.answer_four_threes)
        _check(self.answer_threats or not self.answer_four_threes, "search.answer_four_threes",
               "needs search.answer_threats (it is the fifth kind after it)",
               self.answer_four_threes)
        _check(isinstance(self.threat_values, bool), "search.threat_values",
               "must be true or false", self.threat_values)
        _check(self.dtype in SEARCH_DTYPES, "search.dtype", f"must be one of {SEARCH_DTYPES}",
               self.dtype)
        _check(isinstance(self.reuse, bool), "search.reuse", "must be true or false", self.reuse)
        _check(not (self.reuse and self.algorithm == "gumbel"), "search.reuse",
               "applies to search.algorithm=puct only (Gumbel's sequential halving starts "
               "from an empty root); set one of them differently", self.reuse)


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
    continuous: bool = False
    """False (lockstep): every iteration plays ``num_games`` games from their first
    move in one scan, which searches on until the longest game ends. True: the
    ``num_games`` slots play on across iterations, a slot whose game ends starts
    a new one inside the jitted loop, and each finished game goes to the replay
    at once (``selfplay.make_continuous``): no search is spent on finished games."""
    steps: int = 64
    """Continuous only: search steps per iteration (each slot plays one move per
    step, so an iteration searches ``num_games * steps`` positions)."""

    def __post_init__(self):
        _check(_is_int(self.num_games) and self.num_games >= 1, "selfplay.num_games",
               "must be a positive integer", self.num_games)
        _check(isinstance(self.continuous, bool), "selfplay.continuous",
               "must be true or false", self.continuous)
        _check(_is_int(self.steps) and self.steps >= 1, "selfplay.steps",
               "must be a positive integer", self.steps)
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
    every: int = 1
    """Gate every this many iterations; in between the candidate trains on and the
    best net keeps playing (the match's cost amortised over several iterations)."""
    chunk: int = 0
    """0: the match in one jitted scan, every ply at full batch until its longest
    game ends. n: n plies per jitted chunk, finished games dropped between chunks
    (``arena.play_match_compact``; not vmapped over seeds)."""

    def __post_init__(self):
        _check(_is_int(self.num_games) and self.num_games >= 2 and self.num_games % 2 == 0,
               "gating.num_games", "must be an even integer >= 2", self.num_games)
        _check(_is_int(self.every) and self.every >= 1, "gating.every",
               "must be a positive integer", self.every)
        _check(_is_int(self.chunk) and self.chunk >= 0, "gating.chunk",
               "must be an integer >= 0 (0: one scan per match)", self.chunk)
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
class OpeningsConfig:
    """Balanced opening positions (``agz_jax.openings``) for self-play, gating and
    evaluation, so that black's first-move advantage does not swamp what is learned
    and measured. Matches play each opening with both colours."""

    path: str = ""
    """'' starts every game on the empty board; else a shipped set's name
    (``agz_jax/data/*.txt``, e.g. 'balanced15') or an opening file's path."""
    empty_fraction: float = 0.0
    """Self-play only: this fraction of games starts from the empty board instead
    of an opening, so that the nets also learn the first moves (matches always
    start from the set)."""

    def __post_init__(self):
        _check(isinstance(self.path, str), "openings.path", "must be a string", self.path)
        _check(_is_num(self.empty_fraction) and 0 <= self.empty_fraction <= 1,
               "openings.empty_fraction", "must be in [0, 1]", self.empty_fraction)


STAGES = ("basic", "imitate", "selfplay")


@dataclass(frozen=True)
class BasicConfig:
    """Curriculum stage 1 (paper IV.B): supervised training on generated
    basic-rule positions (``agz_jax.curriculum.basic_rules``)."""

    num_positions: int = 80_000
    """Generated training positions (the paper: 80,000)."""
    held_out: int = 2_000
    """Further positions, generated with another key, for the held-out metrics."""
    steps: int = 1_000
    """SGD steps (batch ``train.batch_size`` per net)."""

    def __post_init__(self):
        _check(_is_int(self.num_positions) and self.num_positions >= 1, "basic.num_positions",
               "must be a positive integer", self.num_positions)
        _check(_is_int(self.held_out) and self.held_out >= 1, "basic.held_out",
               "must be a positive integer", self.held_out)
        _check(_is_int(self.steps) and self.steps >= 0, "basic.steps", "must be >= 0",
               self.steps)


@dataclass(frozen=True)
class ImitateConfig:
    """Curriculum stage 2 (paper IV.C): imitate the rule-based mentor.

    Each round plays ``num_games`` mentor-vs-mentor games, holds out a fraction
    of the games (whole games), trains ``steps_per_round`` steps on the rest
    (added to a replay of ``capacity`` positions per net), reports top-1/5/10
    move-prediction accuracy and the value loss on the held-out games, then
    plays the student (with search) against the mentor. The stage stops when the
    student scores at least ``target_score``, or after ``rounds`` rounds.
    """

    level: int = 2
    """Mentor level (0..3) that plays the games and is the opponent to beat."""
    num_games: int = 256
    opening_plies: int = 4
    """Random central moves opening every game, so the mentor's games differ."""
    held_out: float = 0.1
    """Fraction of each round's games kept out of training (split by game)."""
    rounds: int = 4
    steps_per_round: int = 500
    capacity: int = 100_000
    eval_games: int = 20
    eval_simulations: int = 64
    target_score: float = 0.75
    """Stop once the student's score against the mentor reaches this (1.0: never stop
    early)."""
    chunk: int = 8
    """Plies per jitted chunk of the mentor's games and of the evaluation match;
    finished games leave the batch between chunks (``arena.play_match_compact``).
    0: each match in one scan, every ply at full batch until its last game ends
    (how ``models/default`` was trained; the mentor breaks ties by a key of the
    whole batch, so the two play different games)."""

    def __post_init__(self):
        _check(_is_int(self.level) and 0 <= self.level <= 3, "imitate.level",
               "must be a mentor level in 0..3", self.level)
        for name in ("num_games", "rounds", "capacity", "eval_simulations"):
            v = getattr(self, name)
            _check(_is_int(v) and v >= 1, f"imitate.{name}", "must be a positive integer", v)
        _check(self.num_games >= 2, "imitate.num_games", "must be >= 2", self.num_games)
        _check(_is_int(self.opening_plies) and self.opening_plies >= 0,
               "imitate.opening_plies", "must be >= 0", self.opening_plies)
        _check(_is_num(self.held_out) and 0 < self.held_out < 1, "imitate.held_out",
               "must be a fraction in (0, 1)", self.held_out)
        _check(_is_int(self.steps_per_round) and self.steps_per_round >= 0,
               "imitate.steps_per_round", "must be >= 0", self.steps_per_round)
        _check(_is_int(self.eval_games) and self.eval_games >= 0 and self.eval_games % 2 == 0,
               "imitate.eval_games", "must be an even integer >= 0 (0: no match)",
               self.eval_games)
        _check(_is_num(self.target_score) and 0 <= self.target_score <= 1,
               "imitate.target_score", "must be in [0, 1]", self.target_score)
        _check(_is_int(self.chunk) and self.chunk >= 0, "imitate.chunk",
               "must be an integer >= 0 (0: one scan per match)", self.chunk)


@dataclass(frozen=True)
class CurriculumConfig:
    """The stages ``python -m experiments.curriculum`` runs, in order."""

    stages: tuple[str, ...] = STAGES
    """Any of basic, imitate, selfplay, each at most once, in any order."""

    def __post_init__(self):
        stages = self.stages
        if isinstance(stages, str):
            stages = tuple(s.strip() for s in stages.split(",") if s.strip())
        _check(isinstance(stages, (list, tuple)) and len(stages) >= 1, "curriculum.stages",
               f"must be a non-empty list of {STAGES}", self.stages)
        for s in stages:
            _check(s in STAGES, "curriculum.stages", f"has an unknown stage {s!r}; the "
                   f"stages are {', '.join(STAGES)}", self.stages)
        _check(len(set(stages)) == len(stages), "curriculum.stages",
               "must not repeat a stage", self.stages)
        object.__setattr__(self, "stages", tuple(stages))


@dataclass(frozen=True)
class Config:
    """One run of self-play reinforcement learning."""

    seed: int = 0
    iterations: int = 100
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
    openings: OpeningsConfig = field(default_factory=OpeningsConfig)
    basic: BasicConfig = field(default_factory=BasicConfig)
    imitate: ImitateConfig = field(default_factory=ImitateConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)

    def __post_init__(self):
        _check(_is_int(self.seed) and self.seed >= 0, "seed", "must be a non-negative integer",
               self.seed)
        _check(_is_int(self.iterations) and self.iterations >= 1, "iterations",
               "must be a positive integer", self.iterations)
        if self.parallel.devices:
            self.check_devices(self.parallel.devices)
        self.opening_set()  # a missing or unfitting file fails here, before compiling

    def opening_set(self):
        """The opening set int32[K, M] of ``openings.path`` for this board, or None
        (ConfigError naming ``openings.path`` if it cannot be read or does not fit)."""
        if not self.openings.path:
            return None
        from agz_jax import openings

        try:
            return openings.load(self.openings.path, self.game.size)
        except (openings.OpeningsError, OSError) as e:
            raise ConfigError(f"openings.path: {e}") from None

    def check_devices(self, devices: int) -> None:
        """The global batches must split evenly over ``devices`` (ConfigError if not)."""
        for name, value in (("selfplay.num_games", self.selfplay.num_games),
                            ("train.batch_size", self.train.batch_size)):
            _check(value % devices == 0, name,
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

    def check_nets_fit(self, other: Config, name: str) -> None:
        """Nets trained under ``other`` can be loaded into a run of this config:
        same board, rule, architecture and input features (ConfigError naming
        ``name`` and the first field that differs)."""
        for section in ("game", "net", "features"):
            mine, theirs = getattr(self, section), getattr(other, section)
            for f in dataclasses.fields(mine):
                a, b = getattr(mine, f.name), getattr(theirs, f.name)
                if a != b:
                    raise ConfigError(f"{name} has {section}.{f.name} = {b!r}, "
                                      f"this run needs {a!r}")

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
    "openings": OpeningsConfig,
    "basic": BasicConfig,
    "imitate": ImitateConfig,
    "curriculum": CurriculumConfig,
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
        basic=BasicConfig(num_positions=256, held_out=64, steps=4),
        imitate=ImitateConfig(level=0, num_games=8, opening_plies=2, rounds=2,
                              steps_per_round=4, capacity=2048, eval_games=2,
                              eval_simulations=4),
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
    # The whole curriculum on the paper's 15x15 board and net, sized for 2 CPU
    # cores (the shipped models/default): `python -m experiments.curriculum`.
    "curriculum": Config(
        iterations=5,
        game=GameConfig(size=15),
        net=NetConfig(filters=32, blocks=2, double=True),
        search=SearchConfig(algorithm="gumbel", num_simulations=16),
        selfplay=SelfPlayConfig(num_games=64),
        replay=ReplayConfig(capacity=50_000),
        train=TrainConfig(batch_size=256, steps_per_iteration=60, min_replay=256,
                          learning_rate=2e-2),
        gating=GatingConfig(num_games=16, num_simulations=16),
        eval=EvalConfig(every=3, num_games=50, num_simulations=16),
        basic=BasicConfig(num_positions=80_000, held_out=2_000, steps=400),
        imitate=ImitateConfig(level=2, num_games=256, opening_plies=4, rounds=2,
                              steps_per_round=500, capacity=100_000, eval_games=20,
                              eval_simulations=64, target_score=0.75),
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
    # The self-play campaign on the CPU (README, "The campaign"): the shipped
    # model's search and nets, continuous self-play from balanced openings.
    "campaign": Config(
        seed=23,
        iterations=1000,
        game=GameConfig(size=15),
        net=NetConfig(filters=32, blocks=2, double=True),
        search=SearchConfig(algorithm="gumbel", num_simulations=32, max_considered_actions=16,
                            forced_moves=True, answer_threats=True, answer_four_threes=True),
        selfplay=SelfPlayConfig(num_games=64, continuous=True, steps=48),
        openings=OpeningsConfig(path="balanced15", empty_fraction=0.1),
        replay=ReplayConfig(capacity=100_000),
        train=TrainConfig(batch_size=256, steps_per_iteration=40, min_replay=2048,
                          learning_rate=5e-3),
        gating=GatingConfig(num_games=32, num_simulations=32, every=2, chunk=8),
        eval=EvalConfig(every=0, num_games=50, num_simulations=16),
    ),
    # The paper's game, net and Double Networks on one accelerator: thousands of
    # continuous self-play slots (GPU work wants batches in the thousands), no
    # gating or evaluation match in the loop (AlphaZero's way; the ladder,
    # `python -m experiments.ladder`, rates checkpoints outside it), so that
    # self-play takes most of each iteration.
    "gpu": Config(
        iterations=500,
        game=GameConfig(size=15),
        net=NetConfig(filters=32, blocks=2, double=True),
        search=SearchConfig(algorithm="gumbel", num_simulations=64, max_considered_actions=16),
        # 262k positions per iteration; each is sampled about three times (400 x 1024
        # per net over 131k positions per net), and the replay holds four iterations.
        selfplay=SelfPlayConfig(num_games=4096, continuous=True, steps=64),
        openings=OpeningsConfig(path="balanced15", empty_fraction=0.1),
        replay=ReplayConfig(capacity=500_000),
        train=TrainConfig(batch_size=1024, steps_per_iteration=400, min_replay=65_536,
                          learning_rate=5e-3),
        gating=GatingConfig(enabled=False, num_games=64, num_simulations=64),
        eval=EvalConfig(every=0, num_games=100, num_simulations=64),
    ),
}


def get_preset(name: str) -> Config:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
