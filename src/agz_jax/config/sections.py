"""The config's sections, one frozen dataclass each (``GameConfig``,
``SearchConfig``, ..., the curriculum's ``BasicConfig``, ``ImitateConfig`` and
``CurriculumConfig``).

Every field declares its default and what its value must be
(``setting(default, check)``, ``agz_jax.base.checks``) and has an attribute
docstring: the command lines' ``--help`` shows it. ``agz_jax.config.schema.Config``
holds one of each.
"""

from __future__ import annotations

from dataclasses import dataclass

from agz_jax.base.checks import (
    FLAG,
    TEXT,
    Section,
    integer,
    number,
    one_of,
    require,
    setting,
)
from agz_jax.game.gomoku import MAX_SIZE, MIN_SIZE, RULES


@dataclass(frozen=True)
class GameConfig(Section):
    """The board and the winning rule."""

    section = "game"
    size: int = setting(15, integer(MIN_SIZE, MAX_SIZE))
    """Board side, 5..19."""
    rule: str = setting("freestyle", one_of(RULES))
    """'freestyle' (five or more wins, the paper's), 'standard' (exactly five) or
    'renju' (black: exactly five, no double three, double four or overline)."""


@dataclass(frozen=True)
class FeaturesConfig(Section):
    """Input planes of the nets (``agz_jax.nets.features``): the paper's [X, Y, L], then
    Maddison et al.'s optional extras (Table 1), in this order. All off: the
    observation is exactly the paper's 3 planes."""

    section = "features"
    history: int = setting(0, integer(0))
    """"Turns since": planes marking the stones played 1, 2, ..., k plies ago."""
    colour: bool = setting(False, FLAG)
    """A plane of ones when black is to move (zeros for white)."""
    constant: bool = setting(False, FLAG)
    """A plane of ones, so that the net sees the board edge through zero padding."""
    ranks: int = setting(0, integer(0))
    """Rank conditioning: k one-hot planes of the strength (``State.rank``) of the
    player whose move is predicted."""

    @property
    def channels(self) -> int:
        """Planes of an observation."""
        return 3 + self.history + int(self.colour) + int(self.constant) + self.ranks


@dataclass(frozen=True)
class NetConfig(Section):
    """The policy-value net (paper Tables I-III), Double Networks, and Maddison et
    al.'s architecture options (``agz_jax.nets.networks``)."""

    section = "net"
    filters: int = setting(32, integer(1))
    """Channels of every conv layer of the residual tower (the paper: 32)."""
    blocks: int = setting(2, integer(0))
    """Residual blocks after the first conv layer (the paper's table: 2; its code: 3)."""
    value_hidden: int = setting(32, integer(1))
    """Units of the value head's hidden dense layer (the paper: 32)."""
    double: bool = setting(True, FLAG)
    """Double Networks (paper III.B): a black net and a white net."""
    position_bias: bool = setting(False, FLAG)
    """A learned bias per board point and channel in every conv layer."""
    symmetric: bool = setting(False, FLAG)
    """Conv filters tied to be invariant under the 8 dihedral maps; the heads become
    fully convolutional / globally pooled, so the net is exactly equivariant."""
    colour_heads: bool = setting(False, FLAG)
    """One trunk with a black and a white head (Maddison's two softmaxes); an
    alternative to ``double``."""

    def cross_check(self):
        require(not (self.colour_heads and self.double), "net.colour_heads",
                "is an alternative to Double Networks: set net.double=false to use it",
                self.colour_heads)

    @property
    def num_nets(self) -> int:
        return 2 if self.double else 1


ALGORITHMS = ("puct", "gumbel")


QTRANSFORMS = ("raw", "minmax", "parent")


SEARCH_DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class SearchConfig(Section):
    """Tree search on mctx."""

    section = "search"
    algorithm: str = setting("puct", one_of(ALGORITHMS))
    """'puct' (AlphaGo Zero's c_puct rule, the paper's) or 'gumbel' (Gumbel MuZero)."""
    num_simulations: int = setting(400, integer(1))
    """Simulations per searched move in self-play (the paper: 1,600)."""
    c_puct: float = setting(5.0, number(0, lo_open=True))
    """c_puct of PUCT's U = c_puct P sqrt(sum N) / (1 + N) (the paper: 5)."""
    qtransform: str = setting("raw", one_of(QTRANSFORMS))
    """PUCT's Q of a child: 'raw': in [-1, 1], unvisited 0 (the paper's);
    'minmax': mctx's normalisation by the parent and siblings; 'parent': raw,
    with an unvisited child valued at its node's own value less
    ``fpu_reduction`` (first-play urgency), so that a side that is behind does
    not spend its search visiting every legal move once."""
    fpu_reduction: float = setting(0.2, number(0, 2))
    """With qtransform 'parent': how much worse than its node an unvisited child is assumed."""
    dirichlet_fraction: float = setting(0.25, number(0, 1))
    """Root noise in self-play only; 0 disables it."""
    dirichlet_alpha: float = setting(0.3, number(0, lo_open=True))
    """Alpha of the root's Dirichlet noise (0.3, as AlphaZero's chess)."""
    max_considered_actions: int = setting(16, integer(1))
    """Gumbel only: actions considered at the root."""
    forced_moves: bool = setting(False, FLAG)
    """At every node of the tree, search only the forced moves when there are
    any: the mover's own fives, else the blocks of the opponent's fives, else
    the mover's open fours and double fours (``tactics.search_moves``). This
    never changes a position's game value and lets the search read forcing
    lines deeply. False is plain AlphaZero search."""
    answer_threats: bool = setting(False, FLAG)
    """With ``forced_moves``, a fourth kind: when the opponent can make an open
    four or a double four, search only the mover's fours and the moves that
    leave the opponent no such move (``tactics.threat_answers``); every other
    move loses in four plies."""
    answer_four_threes: bool = setting(False, FLAG)
    """With ``answer_threats``, a fifth kind: when the opponent has a
    four-three point (a four and, on another line, an open three), search only
    the mover's fours and the moves that leave it none
    (``tactics.four_three_answers``). Every other move loses in six plies
    unless the forced block of the four makes the mover a four."""
    threat_values: bool = setting(False, FLAG)
    """Value a searched position by the win its stones force, when they force
    one (``tactics.threat_value``): the mover's five, open four or double four,
    four-three, or a four whose block leaves it one of those; else by the net.
    A move that leaves the opponent such a win is then seen to lose as soon as
    it is expanded, not only when the search has read the win to its end."""
    dtype: str = setting("float32", one_of(SEARCH_DTYPES))
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
    reuse: bool = setting(False, FLAG)
    """Keep the subtree under the move played (and, in the engine and the web
    board, under the opponent's reply) as the next search's tree
    (``agz_jax.search.mctx_loop.reuse``). Its visits count towards the next search's
    budget: a search then runs only the simulations that fill the tree to
    ``num_simulations`` visits at the root. PUCT only (Gumbel's sequential
    halving schedules the root's visits from zero)."""

    def cross_check(self):
        require(self.forced_moves or not self.answer_threats, "search.answer_threats",
                "needs search.forced_moves (it is their fourth kind)", self.answer_threats)
        require(self.answer_threats or not self.answer_four_threes, "search.answer_four_threes",
                "needs search.answer_threats (it is the fifth kind after it)",
                self.answer_four_threes)
        require(not (self.reuse and self.algorithm == "gumbel"), "search.reuse",
                "applies to search.algorithm=puct only (Gumbel's sequential halving starts "
                "from an empty root); set one of them differently", self.reuse)


@dataclass(frozen=True)
class DecayConfig(Section):
    """Winning Value Decay (paper III.C)."""

    section = "decay"
    gamma: float = setting(0.95, number(0, 1, lo_open=True))
    """Per-ply decay of backed-up values and of the z labels; 1.0 is plain AlphaZero."""


MOVE_POLICIES = ("semi_stochastic", "stochastic", "deterministic")


@dataclass(frozen=True)
class SelfPlayConfig(Section):
    """Self-play (paper IV.D): the best net plays itself with search."""

    section = "selfplay"
    num_games: int = setting(64, integer(1))
    """Games played at once (the vmapped batch)."""
    move_policy: str = setting("semi_stochastic", one_of(MOVE_POLICIES))
    """How PUCT self-play and the gating players (either algorithm) pick a move
    from the search: 'stochastic' (pi ~ N), 'deterministic' (the search's own
    choice) or 'semi_stochastic' (tau = tau_base ** (move // 2) until tau <
    tau_min, then the search's choice; the paper's). Gumbel self-play explores
    by its Gumbel noise and always plays its own choice (``Searcher.choose``)."""
    tau_base: float = setting(0.8, number(0, 1, lo_open=True))
    """semi_stochastic: tau = tau_base ** (move // 2) (the paper: 0.8)."""
    tau_min: float = setting(0.04, number(0, 1, lo_open=True))
    """semi_stochastic: once tau falls below this, the move is the argmax (the
    paper: 0.04)."""
    continuous: bool = setting(False, FLAG)
    """False (lockstep): every iteration plays ``num_games`` games from their first
    move in one scan, which searches on until the longest game ends. True: the
    ``num_games`` slots play on across iterations, a slot whose game ends starts
    a new one inside the jitted loop, and each finished game goes to the replay
    at once (``selfplay.make_continuous``): no search is spent on finished games."""
    steps: int = setting(64, integer(1))
    """Continuous only: search steps per iteration (each slot plays one move per
    step, so an iteration searches ``num_games * steps`` positions)."""


@dataclass(frozen=True)
class ReplayConfig(Section):
    """The replay buffer of (s, pi, z) examples, sampled uniformly."""

    section = "replay"
    capacity: int = setting(100_000, integer(1))
    """Positions kept per net (the buffer is split by colour with Double Networks)."""


@dataclass(frozen=True)
class TrainConfig(Section):
    """SGD on the replay (paper IV.D; the original code's hyper-parameters)."""

    section = "train"
    batch_size: int = setting(512, integer(1))
    """Positions per step, per net."""
    steps_per_iteration: int = setting(100, integer(1))
    """SGD steps per iteration."""
    learning_rate: float = setting(2e-3, number(0, lo_open=True))
    """SGD learning rate (the paper: 2e-3)."""
    lr_decay_steps: int = setting(0, integer(0, note="0: constant"))
    """A cosine decay of ``learning_rate`` to a tenth of it over this many SGD
    steps, constant after them (0: a constant learning rate, the paper's)."""
    momentum: float = setting(0.9, number(0, 1, hi_open=True))
    """SGD momentum (the paper: 0.9); 0: plain SGD."""
    nesterov: bool = setting(True, FLAG)
    """Nesterov momentum (the paper's)."""
    l2: float = setting(1e-4, number(0))
    """c in the loss (z - v)^2 - pi^T log p + c ||theta||^2 (kernels only)."""
    min_replay: int = setting(512, integer(0))
    """Train only once each net's buffer holds this many positions."""


@dataclass(frozen=True)
class GatingConfig(Section):
    """Evaluation match of the candidate against the best net (AlphaGo Zero)."""

    section = "gating"
    enabled: bool = setting(True, FLAG)
    """False: no match; every trained net becomes the best at once (AlphaZero's way)."""
    num_games: int = setting(20, integer(2, even=True))
    """Even: half with the candidate as black, half as white."""
    num_simulations: int = setting(400, integer(1))
    """Simulations per move of both players."""
    threshold: float = setting(0.55, number(0, 1))
    """The candidate replaces the best if its score (wins + draws/2) / games >= this."""
    every: int = setting(1, integer(1))
    """Gate every this many iterations; in between the candidate trains on and the
    best net keeps playing (the match's cost amortised over several iterations)."""
    chunk: int = setting(0, integer(0, note="0: one scan per match"))
    """0: the match in one jitted scan, every ply at full batch until its longest
    game ends. n: n plies per jitted chunk, finished games dropped between chunks
    (``arena.play_match_compact``; not vmapped over seeds)."""


@dataclass(frozen=True)
class EvalConfig(Section):
    """Periodic match of the best net (with search) against a uniformly random player."""

    section = "eval"
    every: int = setting(5, integer(0, note="0: never"))
    """Every this many iterations (and after the last); 0 disables it."""
    num_games: int = setting(100, integer(2, even=True))
    """Games of the match (even: half with the net as black)."""
    num_simulations: int = setting(64, integer(1))
    """Simulations per move of the net's search."""


@dataclass(frozen=True)
class ParallelConfig(Section):
    """Data parallelism over a device mesh (``agz_jax.training.parallel``).

    Self-play games and training batches are split over the devices of a 1-D
    mesh (axis ``data``); parameters are replicated and gradients averaged by
    the collective XLA inserts. ``selfplay.num_games`` and ``train.batch_size``
    are global; each device gets ``1/devices`` of them. Results equal the
    1-device run's within float tolerance, so a run may resume on another
    number of devices. Hosts (``jax.distributed``) are set on the command
    line, not here: see ``experiments/selfplay.py --help``.
    """

    section = "parallel"
    devices: int = setting(0, integer(0, says="must be 0 (every device) or a positive integer"))
    """Devices in the mesh: 0 = every device of every process; n = the first n."""


@dataclass(frozen=True)
class CheckpointConfig(Section):
    """How the main job writes the checkpoint after every iteration
    (``agz_jax.nets.checkpoint.Saver``). Results do not depend on it, so a run may
    resume with another setting."""

    section = "checkpoint"
    asynchronous: bool = setting(False, FLAG)
    """Write each checkpoint in orbax's background thread while the next
    iteration runs: the loop waits only for the copy of the arrays to host
    memory (and for the previous write, if it has not committed yet). An
    iteration counts as done once its checkpoint commits: a run killed before
    that resumes from the one before and plays it again. Costs host memory for
    one copy of the state; off, the loop waits for every write."""
    keep_every: int = setting(0, integer(0, note="0: only the last two"))
    """Besides the last two checkpoints, keep every one whose iteration is a
    multiple of this, to polish or rate later (``experiments.training.campaign polish
    --step N``) or to go back to. Each holds the replay buffer, so each costs
    its size on disk."""


@dataclass(frozen=True)
class OpeningsConfig(Section):
    """Balanced opening positions (``agz_jax.game.openings``) for self-play, gating and
    evaluation, so that black's first-move advantage does not swamp what is learned
    and measured. Matches play each opening with both colours."""

    section = "openings"
    path: str = setting("", TEXT)
    """'' starts every game on the empty board; else a shipped set's name
    (``agz_jax/data/*.txt``, e.g. 'balanced15') or an opening file's path."""
    empty_fraction: float = setting(0.0, number(0, 1))
    """Self-play only: this fraction of games starts from the empty board instead
    of an opening, so that the nets also learn the first moves (matches always
    start from the set)."""
    shift: int = setting(0, integer(0))
    """Self-play only: each game's opening is moved by up to this many points along
    each axis (every translation that keeps its stones on the board is equally
    likely), so that games start all over the board's middle and the nets do not
    learn that the centre is always taken (matches and gating play the set as it
    is)."""


STAGES = ("basic", "imitate", "selfplay")


@dataclass(frozen=True)
class BasicConfig(Section):
    """Curriculum stage 1 (paper IV.B): supervised training on generated
    basic-rule positions (``agz_jax.curriculum.basic_rules``)."""

    section = "basic"
    num_positions: int = setting(80_000, integer(1))
    """Generated training positions (the paper: 80,000)."""
    held_out: int = setting(2_000, integer(1))
    """Further positions, generated with another key, for the held-out metrics."""
    steps: int = setting(1_000, integer(0))
    """SGD steps (batch ``train.batch_size`` per net)."""


@dataclass(frozen=True)
class ImitateConfig(Section):
    """Curriculum stage 2 (paper IV.C): imitate the rule-based mentor.

    Each round plays ``num_games`` mentor-vs-mentor games, holds out a fraction
    of the games (whole games), trains ``steps_per_round`` steps on the rest
    (added to a replay of ``capacity`` positions per net), reports top-1/5/10
    move-prediction accuracy and the value loss on the held-out games, then
    plays the student (with search) against the mentor. The stage stops when the
    student scores at least ``target_score``, or after ``rounds`` rounds.
    """

    section = "imitate"
    level: int = setting(2, integer(0, 3))
    """Mentor level (0..3) that plays the games and is the opponent to beat."""
    num_games: int = setting(256, integer(2))
    """Mentor-vs-mentor games per round."""
    opening_plies: int = setting(4, integer(0))
    """Random central moves opening every game, so the mentor's games differ."""
    held_out: float = setting(0.1, number(0, 1, lo_open=True, hi_open=True))
    """Fraction of each round's games kept out of training (split by game)."""
    rounds: int = setting(4, integer(1))
    """Rounds at most (games, training, held-out metrics, match)."""
    steps_per_round: int = setting(500, integer(0))
    """SGD steps per round."""
    capacity: int = setting(100_000, integer(1))
    """Replay positions kept per net across the rounds."""
    eval_games: int = setting(20, integer(0, even=True, note="0: no match"))
    """Games of the student (with search) against the mentor after each round
    (even; 0: no match)."""
    eval_simulations: int = setting(64, integer(1))
    """Simulations per move of the student in that match."""
    target_score: float = setting(0.75, number(0, 1))
    """Stop once the student's score against the mentor reaches this (1.0: never stop
    early)."""
    chunk: int = setting(8, integer(0, note="0: one scan per match"))
    """Plies per jitted chunk of the mentor's games and of the evaluation match;
    finished games leave the batch between chunks (``arena.play_match_compact``).
    0: each match in one scan, every ply at full batch until its last game ends
    (how ``models/curriculum`` was trained; the mentor breaks ties by a key of the
    whole batch, so the two play different games)."""


@dataclass(frozen=True)
class CurriculumConfig(Section):
    """The stages ``python -m experiments.training.curriculum`` runs, in order."""

    section = "curriculum"
    stages: tuple[str, ...] = STAGES
    """Any of basic, imitate, selfplay, each at most once, in any order."""

    def __post_init__(self):
        stages = self.stages
        if isinstance(stages, str):  # "basic,imitate"
            stages = tuple(s.strip() for s in stages.split(",") if s.strip())
        require(isinstance(stages, (list, tuple)) and len(stages) >= 1, "curriculum.stages",
                f"must be a non-empty list of {STAGES}", self.stages)
        for s in stages:
            require(s in STAGES, "curriculum.stages", f"has an unknown stage {s!r}; the "
                    f"stages are {', '.join(STAGES)}", self.stages)
        require(len(set(stages)) == len(stages), "curriculum.stages",
                "must not repeat a stage", self.stages)
        object.__setattr__(self, "stages", tuple(stages))
