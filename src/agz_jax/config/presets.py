"""The presets: named configs, plain data (``PRESETS[name]`` is a ``Config``).

``smoke`` checks the whole loop in about a minute; ``cpu`` is ``make
selfplay``'s; ``curriculum`` the shipped model's; ``paper`` the paper's
settings; ``campaign`` the CPU self-play campaign's; ``gpu`` one accelerator's.

``NET_PRESETS`` names net sizes apart from the rest of a config (``--net-preset
6x64`` on the main job and ``experiments.training.distill``): ``BLOCKSxFILTERS``, as
Leela Zero and KataGo name their nets, with the paper's 2 blocks of 32 filters
as ``paper`` (docs/nets.md has their parameter counts).
"""

from __future__ import annotations

import dataclasses

from agz_jax.config.schema import (
    BasicConfig,
    CheckpointConfig,
    Config,
    ConfigError,
    DecayConfig,
    EvalConfig,
    GameConfig,
    GatingConfig,
    ImitateConfig,
    NetConfig,
    OpeningsConfig,
    ReplayConfig,
    SearchConfig,
    SelfPlayConfig,
    TrainConfig,
)

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
    # simulations than PUCT's visit counts); about 4 minutes on 2 CPU cores.
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
    # cores (models/curriculum): `python -m experiments.training.curriculum`.
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
    # The self-play campaign on the CPU (docs/campaign.md): the shipped
    # model's search and nets, continuous self-play from balanced openings.
    "campaign": Config(
        seed=23,
        iterations=1000,
        game=GameConfig(size=15),
        net=NetConfig(filters=32, blocks=2, double=True),
        search=SearchConfig(algorithm="gumbel", num_simulations=32, max_considered_actions=16,
                            forced_moves=True, answer_threats=True, answer_four_threes=True),
        selfplay=SelfPlayConfig(num_games=64, continuous=True, steps=48),
        openings=OpeningsConfig(path="balanced15v3", empty_fraction=0.1, shift=3),
        replay=ReplayConfig(capacity=100_000),
        # 80 steps (40 before campaign-k): with twice the steps, campaign-k's nets
        # gained against models/curriculum where 35,000 games at 40 had not
        # (docs/campaign.md, "Runs so far").
        train=TrainConfig(batch_size=256, steps_per_iteration=80, min_replay=2048,
                          learning_rate=5e-3),
        gating=GatingConfig(num_games=32, num_simulations=32, every=2, chunk=8),
        eval=EvalConfig(every=0, num_games=50, num_simulations=16),
        # Every 25th checkpoint stays, to polish or rate later.
        checkpoint=CheckpointConfig(keep_every=25),
    ),
    # The paper's game, net and Double Networks on one accelerator: thousands of
    # continuous self-play slots (GPU work wants batches in the thousands), no
    # gating or evaluation match in the loop (AlphaZero's way; the ladder,
    # `python -m experiments.play.ladder`, rates checkpoints outside it), so that
    # self-play takes most of each iteration.
    "gpu": Config(
        iterations=500,
        game=GameConfig(size=15),
        net=NetConfig(filters=32, blocks=2, double=True),
        search=SearchConfig(algorithm="gumbel", num_simulations=64, max_considered_actions=16),
        # 262k positions per iteration; each is sampled about three times (400 x 1024
        # per net over 131k positions per net), and the replay holds four iterations.
        selfplay=SelfPlayConfig(num_games=4096, continuous=True, steps=64),
        openings=OpeningsConfig(path="balanced15v3", empty_fraction=0.1, shift=3),
        replay=ReplayConfig(capacity=500_000),
        train=TrainConfig(batch_size=1024, steps_per_iteration=400, min_replay=65_536,
                          learning_rate=5e-3),
        gating=GatingConfig(enabled=False, num_games=64, num_simulations=64),
        eval=EvalConfig(every=0, num_games=100, num_simulations=64),
        # Its checkpoint (3.0 GB of arrays, 0.96 GB on disk) took 13 s to write on
        # this project's CPU; written in the background, the loop waits only for
        # the copy to host memory (docs/campaign.md).
        checkpoint=CheckpointConfig(asynchronous=True),
    ),
}


# The fields of ``NetConfig`` a net preset sets; the other net options (Double
# Networks, symmetric, position biases, colour heads) stay the config's.
NET_SIZE_FIELDS = ("blocks", "filters", "value_hidden")

NET_PRESETS: dict[str, dict[str, int]] = {
    # The paper's net (Tables I-III): 146,890 parameters a net on 15x15, most of
    # them (101,475) the policy head's dense layer.
    "paper": {"blocks": 2, "filters": 32, "value_hidden": 32},
    # 561,962 parameters a net on 15x15; 11.6 times the paper net's multiply-adds.
    "6x64": {"blocks": 6, "filters": 64, "value_hidden": 64},
    # 3,088,874 parameters a net on 15x15; 77 times the paper net's multiply-adds.
    "10x128": {"blocks": 10, "filters": 128, "value_hidden": 128},
}

NET_PRESET_HELP = (f"net sizes by name, BLOCKSxFILTERS: one of {', '.join(NET_PRESETS)} "
                   "(paper: 2 blocks of 32 filters); sets net.blocks, net.filters and "
                   "net.value_hidden (docs/nets.md)")


def net_preset(name: str) -> dict[str, int]:
    """The dotted fields net preset ``name`` sets (``{"net.blocks": 6, ...}``);
    ConfigError for an unknown name."""
    if name not in NET_PRESETS:
        raise ConfigError(f"--net-preset: unknown net preset {name!r}; choose one of "
                          f"{', '.join(NET_PRESETS)} (or set --net.blocks, --net.filters and "
                          "--net.value-hidden)")
    return {f"net.{k}": v for k, v in NET_PRESETS[name].items()}


def net_preset_overrides(name: str | None, given: dict) -> dict[str, int]:
    """What ``--net-preset name`` sets on a command line whose other flags are
    ``given`` (the parsed namespace's dict, dotted names): {} without it;
    ConfigError for an unknown name or a size also given by its own flag."""
    if name is None:
        return {}
    fields = net_preset(name)
    for dotted in fields:
        if dotted in given:
            flag = "--" + dotted.replace("_", "-")
            raise ConfigError(f"{flag} and --net-preset {name} both set {dotted}: give one "
                              "of them")
    return fields


def net_preset_name(net) -> str | None:
    """The net preset whose sizes a ``NetConfig`` has, or None."""
    for name, sizes in NET_PRESETS.items():
        if all(getattr(net, k) == v for k, v in sizes.items()):
            return name
    return None


def net_size_flags(net) -> str:
    """The flags that give a run the sizes of ``net``: ``--net-preset NAME`` when
    they are a preset's, else the three dotted flags."""
    name = net_preset_name(net)
    if name is not None:
        return f"--net-preset {name}"
    return " ".join(f"--net.{k.replace('_', '-')} {getattr(net, k)}" for k in NET_SIZE_FIELDS)


def net_size_text(net) -> str:
    """``BLOCKSxFILTERS`` (``6x64``), with ``(value_hidden V)`` when V is not the
    filters'."""
    text = f"{net.blocks}x{net.filters}"
    return text if net.value_hidden == net.filters else f"{text} (value_hidden {net.value_hidden})"


def get_preset(name: str) -> Config:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]


def check_nets_fit(config: Config, other: Config, name: str, model: str | None = None) -> None:
    """Nets trained under ``other`` can be loaded into a run of ``config``:
    same board, rule, architecture and input features (ConfigError naming
    ``name`` and the first field that differs, and the flags that would fit
    them all). When only the net's sizes differ (``NET_SIZE_FIELDS``)
    the way out also names the distillation that starts a net of this run's
    sizes from them (``experiments.training.distill``; ``model``: the teacher to name
    there, by default the last word of ``name``)."""
    differ = []  # (field, this run's value, theirs)
    for section in ("game", "net", "features"):
        mine, theirs = getattr(config, section), getattr(other, section)
        for f in dataclasses.fields(mine):
            a, b = getattr(mine, f.name), getattr(theirs, f.name)
            if a != b:
                differ.append((f"{section}.{f.name}", a, b))
    if not differ:
        return
    field, a, b = differ[0]
    if all(f.partition(".")[2] in NET_SIZE_FIELDS and f.startswith("net.")
           for f, _, _ in differ):
        want = net_size_flags(config.net)
        teacher = model if model is not None else name.split()[-1]
        raise ConfigError(
            f"{name} has {field} = {b!r}, this run needs {a!r} ({want}): give "
            f"{net_size_flags(other.net)} to start from its nets as they are, or "
            f"distil a {net_size_text(config.net)} net from them first (python -m "
            f"experiments.training.distill --teacher {teacher} {want} --out DIR) and give "
            "--init-from DIR")
    flags = " ".join(_flag(f, value) for f, _, value in differ)
    raise ConfigError(f"{name} has {field} = {b!r}, this run needs {a!r}: "
                      f"give {flags} or another model")


def _flag(field: str, value) -> str:
    """The command-line flag that sets ``field`` (``"net.double"``) to ``value``."""
    section, _, leaf = field.replace("_", "-").rpartition(".")
    if isinstance(value, bool):
        return f"--{section}.{leaf}" if value else f"--{section}.no-{leaf}"
    return f"--{section}.{leaf} {value}"
