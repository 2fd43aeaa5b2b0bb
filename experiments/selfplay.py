r"""The main job: self-play reinforcement learning (AlphaGomoku IV.D).

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
included (``agz_jax.run.ITERATION_S``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from agz_jax import cli, presets
from agz_jax.config import Config, ConfigError


def _own_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--save-games", type=int, default=0, metavar="N",
                        help="save the first N self-play games of every iteration as .psq "
                             "in RUN_DIR/games/")
    parser.add_argument("--quiet", action="store_true", help="no per-iteration lines")
    parser.add_argument("--init-from", type=Path, default=None, metavar="MODEL",
                        help="start from these nets: a model name or directory, a run or "
                             "curriculum directory (any stage's output)")
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
        from agz_jax import models

        try:
            args.init_model = models.load(args.init_from)
        except models.ModelError as e:
            raise ConfigError(f"--init-from: {e}") from e
        config.check_nets_fit(args.init_model.config, f"--init-from {args.init_from}",
                              model=str(args.init_from))
    from agz_jax import parallel

    args.hosts = parallel.hosts_from(args.coordinator, args.num_processes, args.process_id)
    return args, config


def check_run_dir(out: Path, resume: bool) -> None:
    """ConfigError (one line) for an ``--out`` that holds something other than a run
    of this command: a model or a curriculum, whose ``config.json`` a new run would
    overwrite, or another ``config.json`` or ``metrics.jsonl``. A run killed before
    its first checkpoint (its ``config.json``, no checkpoint) may start again."""
    from agz_jax import checkpoint, models

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


def fmt_line(it: int, total: int, m: dict) -> str:
    parts = [f"it {it:>4}/{total}"]
    parts.append(f"games/s {m['speed/games_per_s']:.2f}")
    parts.append(f"sims/s {m['speed/sims_per_s']:,.0f}")
    parts.append(f"len {m['selfplay/mean_length']:.1f}")
    parts.append(f"B/W/D {m['selfplay/black_wins']:.2f}/{m['selfplay/white_wins']:.2f}/"
                 f"{m['selfplay/draws']:.2f}")
    if m.get("train/trained"):
        parts.append(f"loss {m['train/loss']:.3f} (v {m['train/value_loss']:.3f} "
                     f"p {m['train/policy_loss']:.3f})")
    else:
        parts.append(f"filling replay {m['replay/size']:.0f}")
    if "gating/score" in m:
        verdict = "accepted" if m["gating/accepted"] else "rejected"
        parts.append(f"gate {m['gating/score']:.2f} {verdict}")
    if "eval/vs_random_score" in m:
        parts.append(f"vs random: search {m['eval/vs_random_score']:.2f}, "
                     f"raw {m['eval/policy_vs_random_score']:.2f}")
    if m.get("time/stopped_s", 0.0) >= 1.0:  # agz_jax.clock: shown, so it is not missed
        parts.append(f"stopped {m['time/stopped_s']:.0f} s")
    return " | ".join(parts)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from agz_jax.checkpoint import CheckpointError

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
        from agz_jax import checkpoint

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
    """The main job after its command line parsed: the exit status. ``interrupts``:
    a Ctrl-C or SIGTERM it recorded but that was swallowed on the way, or that
    came while a checkpoint was written, stops the loop at the next iteration's
    start."""
    from agz_jax import checkpoint, parallel

    parallel.initialize(args.hosts)  # before anything else touches a device
    run_dir: Path = args.out
    latest = checkpoint.latest_step(run_dir)
    if not args.resume and latest is not None:
        print(f"error: {run_dir} already holds a run; pass --resume to continue it "
              "or choose another --out", file=sys.stderr)
        return 2
    done = latest if args.resume_from is None else args.resume_from
    if (args.resume and done is not None and done > config.iterations
            and config.iterations != checkpoint.read_config(run_dir).iterations):
        # A run does not shrink: its config.json would say fewer iterations than it holds.
        print(f"error: --iterations {config.iterations} is fewer than the {done} iterations "
              f"{run_dir} has finished; give --iterations {done} or more to extend it, "
              "or leave it out", file=sys.stderr)
        return 2
    parallel.barrier("checked the run directory")  # before process 0 writes to it

    import jax

    from agz_jax.cache import enable_compilation_cache

    enable_compilation_cache()
    from rich.console import Console

    from agz_jax import run

    main_process = parallel.is_main()
    console = Console(highlight=False, soft_wrap=True, quiet=not main_process)
    try:
        comps = run.build(config)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    state = run.init_state(comps)
    if args.init_from is not None:
        nets = jax.device_put(args.init_model.variables)
        state = state._replace(train=state.train._replace(variables=nets), best=nets)
        if comps.sharder:
            state = comps.sharder.replicate(state)
        console.print(f"nets from {args.init_from}")
    if args.resume:
        try:
            state, meta, step = checkpoint.restore(run_dir, state, step=args.resume_from)
        except checkpoint.DamagedCheckpoint as e:
            print(f"error: {cli.damaged_way_out(e)}", file=sys.stderr)
            return 2
        except checkpoint.CheckpointError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if args.resume_from is not None:
            if main_process:
                for moved in checkpoint.set_aside(run_dir, step):
                    console.print(f"set aside {moved}")
            parallel.barrier("set aside the later checkpoints")
        console.print(f"resumed {run_dir} at iteration {int(state.iteration)}")
        if main_process and config != checkpoint.read_config(run_dir):
            # What --resume may change (--iterations, --checkpoint.*, --parallel.*)
            # becomes the run's own, so the plain --resume that a stopped run names
            # keeps it (an extended run is not "complete" at its old length).
            checkpoint.write_config(run_dir, config)
    else:
        if main_process:
            checkpoint.write_config(run_dir, config)
            if args.init_from is not None:  # the campaign's ledger names each run's start
                (run_dir / "init_from.txt").write_text(f"{args.init_from}\n")
        console.print(f"run {run_dir}: preset {args.preset or 'cpu'}, "
                      f"{config.game.size}x{config.game.size} {config.game.rule}, "
                      f"{'double' if config.net.double else 'single'} net "
                      f"{config.net.blocks} blocks x {config.net.filters} filters "
                      f"({comps.nets.num_params(state.best):,} parameters a net), "
                      f"{config.search.algorithm} {config.search.num_simulations} sims, "
                      f"{config.selfplay.num_games} games/iteration, backend "
                      f"{jax.default_backend()} x {comps.sharder.num_devices} device(s)"
                      + (f" on {jax.process_count()} processes" if jax.process_count() > 1
                         else ""))
    # Every process must see the same directory here (orbax's calls are collective):
    # none may look before, or after, another one creates it.
    parallel.barrier("before looking for a first checkpoint")
    first = checkpoint.latest_step(run_dir) is None
    parallel.barrier("looked for a first checkpoint")
    # One saver for the whole loop; leaving the block (the end, an error, Ctrl-C)
    # waits for a pending asynchronous write to commit.
    with checkpoint.Saver(run_dir, asynchronous=config.checkpoint.asynchronous,
                          keep_every=config.checkpoint.keep_every) as saver:
        return loop(args, config, comps, state, saver, first, console, interrupts)


def loop(args, config, comps, state, saver, first: bool, console,
         interrupts: cli.Interrupts | None = None) -> int:
    """The iterations of the main job, from ``state`` (after a resume, or new)."""
    from agz_jax import clock, parallel, run

    run_dir: Path = args.out
    meta = {"config": config.to_dict()}
    # A signal while a checkpoint is written lets the write commit, then stops the
    # loop at the next iteration's start.
    uncut = interrupts.deferred if interrupts is not None else contextlib.nullcontext
    # Seconds spent on the last checkpoint, logged in the next iteration's line
    # (run.PREVIOUS_CHECKPOINT_S says why there); None until this process saves one.
    checkpoint_s = None
    stopped = clock.stopped()  # run.STOPPED_S: the stops since the last line (or here)
    if first:
        with uncut():
            checkpoint_s = saver.save(0, state, {"iteration": 0, **meta})

    # Only process 0 writes the metrics; the others keep an unwritten log.
    log = run.MetricsLog(run_dir, keep_through=int(state.iteration), write=parallel.is_main())
    if int(state.iteration) >= config.iterations:
        console.print(f"nothing to do: {run_dir} is complete ({int(state.iteration)} iterations;"
                      " pass --iterations N to extend it)")
        print_params_hash(run, state)
        return 0
    start = clock.running()
    # Every process must make the same (collective) calls: process 0 decides.
    if parallel.agree(int(state.iteration) == 0 and bool(config.eval.every)
                      and not log.read()):
        metrics = run.initial_evaluation(comps, state)
        log.write(0, metrics)
        if not args.quiet:
            console.print(f"it    0/{config.iterations} | untrained net vs random: "
                          f"search {metrics['eval/vs_random_score']:.2f}, raw policy "
                          f"{metrics['eval/policy_vs_random_score']:.2f}")
    games: dict = {}
    if args.save_games > 0:
        comps = record_selfplay(comps, games)
    while int(state.iteration) < config.iterations:
        if interrupts is not None:
            interrupts.check()
        t0 = clock.running()
        state, metrics = run.run_iteration(comps, state)
        it = int(state.iteration)
        if games:
            save_games(run_dir / "games", it, games.pop("moves"), config.game.size,
                       args.save_games)
        metrics[run.ITERATION_S] = clock.running() - t0
        metrics[run.STOPPED_S] = clock.stopped() - stopped
        stopped += metrics[run.STOPPED_S]
        if checkpoint_s is not None:
            metrics[run.PREVIOUS_CHECKPOINT_S] = checkpoint_s
        # The line before the checkpoint: see run.PREVIOUS_CHECKPOINT_S.
        log.write(it, metrics)
        if not args.quiet:
            console.print(fmt_line(it, config.iterations, metrics))
        with uncut():
            checkpoint_s = saver.save(it, state, {"iteration": it, **meta})
    with uncut():
        checkpoint_s += saver.wait()  # the last checkpoint, committed
    log.close()

    history = log.read()
    wall = clock.running() - start
    console.print(summary(history, wall, run_dir, last_checkpoint_s=checkpoint_s))
    print_params_hash(run, state)
    return 0


def print_params_hash(run, state) -> None:
    """On every process: equal hashes on all processes are the multi-host consistency
    check, and equal hashes of two runs mean bit-identical nets."""
    import jax

    print(f"params sha256 {run.params_hash(state)} (process {jax.process_index()}/"
          f"{jax.process_count()})", flush=True)


def summary(history: list[dict], wall: float, run_dir: Path,
            last_checkpoint_s: float | None = None) -> str:
    """The end-of-run report; ``last_checkpoint_s``: the seconds the loop spent on
    the last checkpoint, which no metrics line holds."""
    from agz_jax import run

    iterations = [h for h in history if h["iteration"] > 0]
    trained = [h for h in iterations if h.get("train/trained")]
    lines = [f"done: {len(iterations)} iterations in {run_dir} ({wall:.0f} s this session)"]
    share = run.selfplay_share(iterations)
    if share is not None:
        timed = [h for h in iterations if run.ITERATION_S in h]
        saves = [h[run.PREVIOUS_CHECKPOINT_S] for h in timed if run.PREVIOUS_CHECKPOINT_S in h]
        if last_checkpoint_s is not None:
            saves.append(last_checkpoint_s)
        lines.append(
            f"  self-play took {share:.0%} of the wall time of {len(timed)} iterations "
            f"({sum(run.wall_seconds(h) for h in timed):.0f} s, checkpoints included)"
            + (f"; checkpoints {sum(saves) / len(saves):.1f} s each on average "
               f"({len(saves)} saves)" if saves else ""))
    if trained:
        first, last = trained[0], trained[-1]
        lines.append(
            f"  loss (first step of the first trained iteration -> last step of the last) "
            f"{first['train/first_loss']:.3f} -> {last['train/loss']:.3f}: value "
            f"{first['train/first_value_loss']:.3f} -> {last['train/value_loss']:.3f}, policy "
            f"{first['train/first_policy_loss']:.3f} -> {last['train/policy_loss']:.3f}")
    gates = [h for h in iterations if "gating/score" in h]
    if gates:
        acc = sum(h["gating/accepted"] for h in gates)
        lines.append(f"  gating: {acc:.0f}/{len(gates)} candidates accepted")
    evals = [h for h in history if "eval/vs_random_score" in h]
    for e in evals[:1] + evals[1:][-1:]:
        lines.append(f"  vs random at iteration {e['iteration']}: with search "
                     f"{e['eval/vs_random_score']:.2f} (95% CI from {e['eval/vs_random_low']:.2f}),"
                     f" raw policy {e['eval/policy_vs_random_score']:.2f} "
                     f"({e['eval/vs_random_games']:.0f} games each)")
    lines.append(f"  metrics: {run_dir / 'metrics.jsonl'}, TensorBoard: {run_dir / 'tb'}")
    return "\n".join(lines)


def record_selfplay(comps, into: dict):
    """``comps`` whose self-play also leaves its games' moves (int32[T, B]) in ``into``."""
    import dataclasses

    play = comps.selfplay

    def selfplay(*args, **kwargs):
        traj, final, stats = play(*args, **kwargs)
        into["moves"] = traj.action
        return traj, final, stats

    return dataclasses.replace(comps, selfplay=selfplay)


def save_games(directory: Path, iteration: int, moves, size: int, count: int) -> list[Path]:
    """Write the first ``count`` games of one iteration as ``.psq`` files (process 0 only)."""
    import jax
    import numpy as np

    from agz_jax.records import write_psq

    if jax.process_index() != 0 or not getattr(moves, "is_fully_addressable", True):
        return []  # only process 0 writes, and only games it holds entirely
    moves = np.asarray(jax.device_get(moves))
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for game in range(min(count, moves.shape[1])):
        path = directory / f"it{iteration:05d}_game{game:03d}.psq"
        write_psq(path, moves[:, game], size, trailer=(f"self-play iteration {iteration}",))
        paths.append(path)
    return paths


if __name__ == "__main__":
    cli.leave(main())
