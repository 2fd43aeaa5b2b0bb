r"""The main job: self-play reinforcement learning (AlphaGomoku IV.D), the command
line of ``agz_jax.training.driver.train`` (which sweeps and other studies call directly).

    python -m experiments.selfplay --preset smoke --out runs/smoke
    python -m experiments.selfplay --preset cpu --out runs/cpu --search.num-simulations 64
    python -m experiments.selfplay --out runs/cpu --resume            # continue a killed run
    python -m experiments.selfplay --out runs/cpu --resume --iterations 60   # extend it
    python -m experiments.selfplay --out runs/cpu --resume-from 12    # from checkpoint 12
    python -m experiments.selfplay --preset smoke --out runs/s --save-games 4  # .psq records
    python -m experiments.selfplay --preset campaign --net-preset 6x64 \
        --init-from runs/distill-6x64 --out runs/campaign-6x64   # a larger net (docs/nets.md)

Any config field can be overridden with a dotted flag (``--help`` lists them).
With ``--resume`` the run's own ``config.json`` is used; only ``--iterations``
(to extend a run), ``--parallel.*`` and ``--checkpoint.*`` may change, any other
differing override is an error. ``--resume-from STEP`` resumes from an earlier
checkpoint than the latest (the error for a damaged checkpoint names the intact
one); the later checkpoints move to ``RUN_DIR/damaged/``.

Devices and hosts (docs/performance.md): games and training batches are split
over every visible device (``--parallel.devices N`` for the first N). Several
processes (hosts) run the same command, each with its own process id:

    python -m experiments.selfplay --preset gpu --out runs/gpu \
        --num-processes 2 --process-id 0 --coordinator host0:1234     # on host0
    python -m experiments.selfplay --preset gpu --out runs/gpu \
        --num-processes 2 --process-id 1 --coordinator host0:1234     # on host1

(or the environment variables JAX_NUM_PROCESSES, JAX_PROCESS_ID,
JAX_COORDINATOR_ADDRESS; ``--num-processes auto`` detects SLURM / Open MPI /
TPU pods). ``--out`` must be a directory every host sees; process 0 writes the
logs, all processes take part in checkpoints and restore the same state.

Ctrl-C stops the job once any pending checkpoint write has committed; it says in
one line which checkpoint is kept and the command that continues from it (exit
status 130).

Each iteration's metrics line holds its phases' times and ``time/iteration_s``
(all of it up to the line) and ``time/previous_checkpoint_s`` (the checkpoint
written after the previous line), all of them wall time less any time the job
was stopped (kill -STOP, Ctrl-Z), which ``time/stopped_s`` holds; the summary at
the end gives self-play's share of the iterations' wall time, checkpoints
included (``agz_jax.training.run.ITERATION_S``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agz_jax.config import presets
from agz_jax.config.schema import Config, ConfigError
from agz_jax.training import cli


def _own_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--save-games", type=int, default=0, metavar="N",
                        help="save the first N self-play games of every iteration as .psq "
                             "in RUN_DIR/games/")
    parser.add_argument("--quiet", action="store_true", help="no per-iteration lines")
    parser.add_argument("--init-from", type=Path, default=None, metavar="MODEL",
                        help="start from these nets: a model name or directory, a run or "
                             "curriculum directory (any stage's output)")
    parser.add_argument("--init-any-rule", action="store_true",
                        help="with --init-from: the nets may have been trained under another "
                             "winning rule (a freestyle net starting renju self-play, say)")
    parser.add_argument("--net-preset", default=None, metavar="NAME",
                        help=presets.NET_PRESET_HELP)
    parser.add_argument("--num-processes", default=None, metavar="N",
                        help="processes (hosts) of a multi-host run, or 'auto' "
                        "(env JAX_NUM_PROCESSES; default 1)")
    parser.add_argument("--process-id", default=None, metavar="I",
                        help="this process's id, 0..N-1 (env JAX_PROCESS_ID)")
    parser.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                        help="HOST:PORT of process 0 (env JAX_COORDINATOR_ADDRESS)")


COMMAND = cli.RunCommand(
    prog="python -m experiments.selfplay", doc=__doc__, default_preset="cpu",
    default_out=lambda preset: Path("runs") / preset, sections=cli.RUN_SECTIONS,
    resume_allows=("iterations", "parallel", "checkpoint"), resume_from=True,
    own_flags=_own_flags,
    shorthands=lambda args: presets.net_preset_overrides(args.net_preset, vars(args)))


def parse(argv: list[str]) -> tuple[argparse.Namespace, Config]:
    """(args, config); ConfigError (one line) for any mistake, before anything compiles."""
    args, config = cli.parse_run(COMMAND, argv)
    if args.save_games < 0:
        raise ConfigError(f"--save-games must be an integer >= 0 (the games of each iteration "
                          f"to save; 0 saves none), got {args.save_games}")
    check_run_dir(args.out, args.resume)
    if args.init_from is not None:
        if args.resume:
            raise ConfigError("--init-from starts a new run; it cannot go with --resume")
        from agz_jax.nets import models

        try:
            args.init_model = models.load(args.init_from)
        except models.ModelError as e:
            raise ConfigError(f"--init-from: {e}") from e
        theirs = args.init_model.config
        if args.init_any_rule:  # the nets' shapes do not depend on the rule
            theirs = theirs.replace(**{"game.rule": config.game.rule})
        presets.check_nets_fit(config, theirs, f"--init-from {args.init_from}",
                              model=str(args.init_from))
    from agz_jax.training import parallel

    args.hosts = parallel.hosts_from(args.coordinator, args.num_processes, args.process_id)
    return args, config


def check_run_dir(out: Path, resume: bool) -> None:
    """ConfigError (one line) for an ``--out`` that holds something other than a run
    of this command: a model or a curriculum, whose ``config.json`` a new run would
    overwrite, or another ``config.json`` or ``metrics.jsonl``. A run killed before
    its first checkpoint (its ``config.json``, no checkpoint) may start again."""
    from agz_jax.nets import checkpoint, models

    new = "give a new directory for the run"
    # A curriculum killed in its first stage has no curriculum.json yet.
    curriculum = [name for name in ("curriculum.json", "stages", "rounds", "selfplay")
                  if (out / name).exists() and (name == "curriculum.json"
                                                or (out / "config.json").exists())]
    if curriculum:
        raise ConfigError(f"--out {out} holds a curriculum ({curriculum[0]}), not a self-play "
                          f"run: {new} (--init-from {out} starts from its nets)")
    if (out / models.VARIABLES_FILE).exists():
        raise ConfigError(f"--out {out} holds a model ({models.VARIABLES_FILE}), not a "
                          f"self-play run: {new} (--init-from {out} starts from its nets)")
    if not resume and (out / "config.json").exists():
        try:
            checkpoint.read_config(out)
        except checkpoint.CheckpointError as e:
            raise ConfigError(f"--out {out} holds no self-play run ({e}): {new}") from None
    metrics = out / "metrics.jsonl"
    if metrics.exists():
        if not (out / "config.json").exists():
            raise ConfigError(f"--out {out} holds a metrics.jsonl but no config.json, not a "
                              f"self-play run: {new}")
        try:
            lines = [json.loads(ln) for ln in metrics.read_text().splitlines() if ln.strip()]
            ours = all(isinstance(ln, dict) and "iteration" in ln and "stage" not in ln
                       for ln in lines)
        except (OSError, ValueError):
            ours = False
        if not ours:
            raise ConfigError(f"{metrics} is not the metrics of a self-play run (each line "
                              f"an iteration's): {new}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from agz_jax.nets.checkpoint import CheckpointError

    try:
        args, config = parse(argv)
    except (ConfigError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # --help
        return int(e.code or 0)

    try:
        with cli.Interrupts() as interrupts:
            return run_job(args, config, interrupts)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: the saver has committed any pending write (a signal
        # during a write waited for it), and every checkpointed iteration is
        # logged; only the iteration in progress is lost.
        from agz_jax.nets import checkpoint

        step = checkpoint.latest_step(args.out)
        if step is None:
            print(f"interrupted before the first checkpoint of {args.out}: nothing to "
                  "resume; run the same command again to start over", file=sys.stderr)
        else:
            print(f"interrupted: checkpoint {step} is kept in {args.out}; continue with "
                  f"python -m experiments.selfplay --out {args.out} --resume",
                  file=sys.stderr)
        return interrupts.status


def run_job(args: argparse.Namespace, config: Config,
            interrupts: cli.Interrupts | None = None) -> int:
    """The main job after its command line parsed (``agz_jax.training.driver.train``): the
    exit status. ``interrupts``: a Ctrl-C or SIGTERM it recorded but that was
    swallowed on the way, or that came while a checkpoint was written, stops the
    loop at the next iteration's start."""
    from agz_jax.training import driver as training

    init = (None if args.init_from is None
            else training.Init(str(args.init_from), args.init_model.variables))
    try:
        training.train(config, args.out, resume=args.resume, resume_from=args.resume_from,
                       init=init, quiet=args.quiet, save_games=args.save_games,
                       preset=args.preset, hosts=args.hosts, interrupts=interrupts)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    cli.leave(main())
