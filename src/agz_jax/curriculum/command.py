"""The AlphaGomoku curriculum (paper Section IV): basic rules -> imitate the
mentor -> self-play RL, each stage checkpointed, the whole resumable.

    python -m experiments.training.curriculum --preset curriculum --out runs/curriculum
    python -m experiments.training.curriculum --preset smoke --out runs/c --stages basic,imitate
    python -m experiments.training.curriculum --out runs/curriculum --resume
    python -m experiments.selfplay --preset curriculum --out runs/rl --init-from runs/curriculum

``--stages`` picks and orders the stages (any of basic, imitate, selfplay);
any config field can be overridden with a dotted flag (``--imitate.level 3``,
``--basic.steps 200``; ``--help`` lists them). The run directory is a model
directory of the latest finished stage (``--a mcts:RUN_DIR:400`` in the arena,
``--init-from RUN_DIR`` for the main job); ``RUN_DIR/stages/<i>-<name>`` keeps
each stage's nets.
"""

# The docstring is ``python -m experiments.training.curriculum --help``: that command is
# this module's ``main``, which the ablation sweep (agz_jax.studies.ablation_train) calls too.

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agz_jax.config import presets
from agz_jax.config.schema import Config, ConfigError
from agz_jax.training import cli


def _own_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stages", default=None, metavar="A,B,...",
                        help="comma-separated stages in order (default: the config's, "
                             "basic,imitate,selfplay); the same as --curriculum.stages")
    parser.add_argument("--init-from", type=Path, default=None, metavar="MODEL",
                        help="start the first stage from this model / run directory")


COMMAND = cli.RunCommand(
    prog="python -m experiments.training.curriculum", doc=__doc__, default_preset="curriculum",
    default_out=lambda preset: Path("runs") / f"curriculum-{preset}",
    sections=cli.ALL_SECTIONS, own_flags=_own_flags,
    shorthands=lambda args: {} if args.stages is None else {"curriculum.stages": args.stages})


def parse(argv: list[str]) -> tuple[argparse.Namespace, Config]:
    """(args, config); ConfigError (one line) for any mistake, before anything compiles."""
    args, config = cli.parse_run(COMMAND, argv)
    check_run_dir(args.out)
    return args, config


def check_run_dir(out: Path) -> None:
    """ConfigError (one line) for an ``--out`` that holds a self-play run or a model
    and no curriculum: the stages would be added to it (and its metrics.jsonl)."""
    # A curriculum killed before its curriculum.json (or just after it wrote its nets)
    # has the directories of its stages.
    if any((out / name).exists() for name in ("curriculum.json", "stages", "rounds", "selfplay")):
        return
    if (out / "checkpoints").is_dir():
        raise ConfigError(f"--out {out} holds a self-play run, not a curriculum: give a new "
                          f"directory (python -m experiments.selfplay --out {out} --resume "
                          f"continues the run; --init-from {out} starts from its nets)")
    if (out / "variables.msgpack").exists():
        raise ConfigError(f"--out {out} holds a model, not a curriculum: give a new directory "
                          f"(--init-from {out} starts from its nets)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args, config = parse(argv)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # --help
        return int(e.code or 0)
    from agz_jax.nets import checkpoint, models

    run_dir: Path = args.out
    if not args.resume and ((run_dir / "curriculum.json").exists()
                            or checkpoint.latest_step(run_dir / "selfplay") is not None):
        print(f"error: {run_dir} already holds a curriculum; pass --resume to continue it "
              "or choose another --out", file=sys.stderr)
        return 2
    init = None
    if args.init_from is not None:
        try:
            model = models.load(args.init_from)
            presets.check_nets_fit(config, model.config, str(args.init_from))
        except (models.ModelError, ConfigError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        init = model.variables

    from agz_jax.base.cache import enable_compilation_cache

    enable_compilation_cache()
    import time

    from rich.console import Console

    from agz_jax.curriculum.stages import run_curriculum

    console = Console(highlight=False, soft_wrap=True)
    console.print(f"curriculum {run_dir}: stages {','.join(config.curriculum.stages)}, "
                  f"{config.game.size}x{config.game.size}, "
                  f"{'double' if config.net.double else 'single'} net "
                  f"{config.net.filters}x{config.net.blocks}")
    t0 = time.perf_counter()
    try:
        progress = run_curriculum(config, run_dir, init, say=console.print)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except checkpoint.DamagedCheckpoint as e:
        print(f"error: {e}: move {e.run_dir / 'checkpoints' / str(e.step)} out of the way and "
              "run --resume again, which continues from there", file=sys.stderr)
        return 2
    except checkpoint.CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    console.print(f"done: stages {','.join(progress['done'])} in {run_dir} "
                  f"({time.perf_counter() - t0:.0f} s this session); the nets: "
                  f"{run_dir / 'variables.msgpack'}")
    return 0
