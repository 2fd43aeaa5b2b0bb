"""The AlphaGomoku curriculum (paper Section IV): basic rules -> imitate the
mentor -> self-play RL, each stage checkpointed, the whole resumable.

    python -m experiments.curriculum --preset curriculum --out runs/curriculum
    python -m experiments.curriculum --preset smoke --out runs/c --stages basic,imitate
    python -m experiments.curriculum --out runs/curriculum --resume
    python -m experiments.selfplay --preset curriculum --out runs/rl --init-from runs/curriculum

``--stages`` picks and orders the stages (any of basic, imitate, selfplay);
any config field can be overridden with a dotted flag (``--imitate.level 3``,
``--basic.steps 200``; ``--help`` lists them). The run directory is a model
directory of the latest finished stage (``--a mcts:RUN_DIR:400`` in the arena,
``--init-from RUN_DIR`` for the main job); ``RUN_DIR/stages/<i>-<name>`` keeps
each stage's nets.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agz_jax.config import PRESETS, Config, ConfigError, get_preset


def parse(argv: list[str]) -> tuple[argparse.Namespace, Config]:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.curriculum", add_help=False, description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default=None,
                        help=f"one of {sorted(PRESETS)} (default curriculum)")
    parser.add_argument("--out", type=Path, default=None, help="run directory")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--stages", default=None,
                        help="comma-separated stages in order (default: the config's, "
                             "basic,imitate,selfplay)")
    parser.add_argument("--init-from", type=Path, default=None,
                        help="start the first stage from this model / run directory")
    args, rest = parser.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        parser.print_help()
        print("\nConfig overrides (dotted):")

    import tyro

    from agz_jax import checkpoint

    if args.resume:
        if args.out is None:
            raise ConfigError("--resume needs --out RUN_DIR")
        try:
            saved = checkpoint.read_config(args.out)
        except checkpoint.CheckpointError as e:
            raise ConfigError(str(e)) from e
        config = tyro.cli(Config, default=saved, args=rest, prog="experiments.curriculum")
        if args.stages is not None:
            config = config.replace(**{"curriculum.stages": args.stages})
        field = config.first_difference(saved)
        if field:
            raise ConfigError(f"{field} differs from the config saved in {args.out}/config.json;"
                              " --resume uses the run's own config")
    else:
        config = tyro.cli(Config, default=get_preset(args.preset or "curriculum"), args=rest,
                          prog="experiments.curriculum")
        if args.stages is not None:
            config = config.replace(**{"curriculum.stages": args.stages})
    if args.out is None:
        args.out = Path("runs") / f"curriculum-{args.preset or 'curriculum'}"
    return args, config


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args, config = parse(argv)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # tyro / argparse: the problem is printed already
        return int(e.code or 0)
    from agz_jax import checkpoint, models

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
            config.check_nets_fit(model.config, str(args.init_from))
        except (models.ModelError, ConfigError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        init = model.variables

    from agz_jax.cache import enable_compilation_cache

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
    console.print(f"done: stages {','.join(progress['done'])} in {run_dir} "
                  f"({time.perf_counter() - t0:.0f} s this session); the nets: "
                  f"{run_dir / 'variables.msgpack'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
