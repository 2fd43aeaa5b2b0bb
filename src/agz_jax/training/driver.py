"""The training driver: one self-play RL run in a run directory, new or resumed.

``train(config, run_dir)`` is the main job (``python -m experiments.selfplay`` is
a parser over it; the sweep and the ablation call it directly). It owns what
surrounds ``agz_jax.training.run``'s iterations:

    RUN_DIR/config.json           the run's config (rewritten when a resume
                                  changes what it may: iterations, parallel.*,
                                  checkpoint.*)
    RUN_DIR/init_from.txt         the nets it started from (``init``), if any
    RUN_DIR/checkpoints/<i>/      the run state after iteration i (0: the start);
                                  the last two and every ``checkpoint.keep_every``-th
    RUN_DIR/metrics.jsonl         one line per iteration (0: the untrained net's
                                  evaluation); TensorBoard events in RUN_DIR/tb
    RUN_DIR/games/                with ``save_games`` N: the first N self-play
                                  games of every iteration as .psq

Resume (``resume=True``) continues from the latest checkpoint (or
``resume_from``'s; the later ones move to ``RUN_DIR/damaged/``) and drops the
metrics lines past it, so a killed run resumed computes what an unbroken one
does. Ctrl-C and SIGTERM stop the run once any pending checkpoint write has
committed (``Interrupted``, a ``KeyboardInterrupt``, carries the exit status
the signal asks for). At the end it prints the summary (``training.report``) and the params hash
and returns a ``Summary``.

Hooks (``hooks=[...]``) see the run without changing it. A hook is an object
with any of these methods (``Hook`` has them all, doing nothing), or a plain
callable, taken as its ``after_iteration``:

* ``on_start(run_dir, state)``: once, before the first iteration of this call
  (``state``: the ``run.RunState``, new or resumed);
* ``before_iteration(iteration)``: just before ``run.run_iteration`` computes
  iteration ``iteration`` (1-based);
* ``after_iteration(iteration, metrics)``: just after it, before the metrics
  line is written; a dict it returns is added to the line (new keys only);
* ``on_end(summary)``: once, after the summary.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from agz_jax.config.schema import Config, ConfigError
from agz_jax.training.report import fmt_line, header, initial_line, summary

# What a resume may change of a run's config (the rest is the run's own).
RESUME_ALLOWS = ("iterations", "parallel", "checkpoint")


class Init(NamedTuple):
    """The nets a new run starts from: ``variables`` (both nets' trees), and
    ``name``, what the console line and ``init_from.txt`` call them."""

    name: str
    variables: Any


@dataclasses.dataclass(frozen=True)
class Summary:
    """What ``train`` returns: the run's ``metrics.jsonl`` lines (``history``), the
    report it printed (``text``), the sha256 of its nets (``run.params_hash``),
    the iterations it holds and this call's running seconds."""

    run_dir: Path
    iterations: int
    params_hash: str
    history: list[dict]
    text: str
    wall_s: float


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped ``train``; every checkpoint it wrote is committed.
    ``status``: the exit status the signal asks for (``cli.INTERRUPTED``,
    ``cli.TERMINATED``); ``step``: the checkpoint kept (None: none yet)."""

    def __init__(self, status: int, step: int | None):
        super().__init__(status, step)
        self.status, self.step = status, step


class Hook:
    """A hook that does nothing: subclass it and override what you need."""

    def on_start(self, run_dir: Path, state) -> None:
        pass

    def before_iteration(self, iteration: int) -> None:
        pass

    def after_iteration(self, iteration: int, metrics: dict) -> dict | None:
        return None

    def on_end(self, summary: Summary) -> None:
        pass


class _After(Hook):
    def __init__(self, fn: Callable[[int, dict], dict | None]):
        self.fn = fn

    def after_iteration(self, iteration: int, metrics: dict) -> dict | None:
        return self.fn(iteration, metrics)


def _hooks(hooks: Iterable) -> list:
    out = []
    for h in hooks:
        if any(hasattr(h, m) for m in ("on_start", "before_iteration", "after_iteration",
                                       "on_end")):
            out.append(h)
        elif callable(h):
            out.append(_After(h))
        else:
            raise TypeError(f"a hook is a callable or an object with on_start, "
                            f"before_iteration, after_iteration or on_end; got {h!r}")
    return out


def _call(hooks: Sequence, method: str, *args) -> list:
    return [getattr(h, method)(*args) for h in hooks if hasattr(h, method)]


def checkpoint_meta(config: Config, iteration: int) -> dict:
    """The meta data of a run's checkpoint ``iteration``."""
    return {"iteration": iteration, "config": config.to_dict()}


def train(config: Config | None, run_dir: Path, *, resume: bool = False,
          resume_from: int | None = None, iterations: int | None = None,
          init: Init | None = None, hooks: Iterable = (), console=None, quiet: bool = False,
          save_games: int = 0, preset: str | None = None, hosts=None,
          interrupts=None) -> Summary:
    """Run (``resume``: continue) the main job in ``run_dir``; its ``Summary``.

    ``config``: the run's config; with ``resume`` it may differ from the saved
    one only in ``RESUME_ALLOWS`` (None: the saved one). ``iterations``: the
    run's length, instead of ``config.iterations`` (a resume extends a run
    with it). ``resume_from``: the checkpoint to resume from (implies
    ``resume``). ``init``: the nets a new run starts from. ``hooks``: see the
    module's docstring. ``console``: a ``rich`` console for its lines (default:
    one on stdout, silent on processes other than 0); ``quiet``: no line per
    iteration. ``save_games``: the self-play games of each iteration saved as
    .psq. ``preset``: the name the first line gives the config. ``hosts``: a
    multi-host run's ``parallel.Hosts`` (``jax.distributed`` is initialized
    first). ``interrupts``: the caller's ``cli.Interrupts`` (default: its own,
    for the duration of the call).

    ConfigError (one line), before any iteration, for a run that cannot
    start: ``run_dir`` holds a run and ``resume`` is off, a resume that would
    shrink the run or change its config, a damaged checkpoint (naming the
    intact one). ``Interrupted`` on Ctrl-C or SIGTERM.
    """
    from agz_jax.nets import checkpoint
    from agz_jax.training import cli

    run_dir = Path(run_dir)
    resume = resume or resume_from is not None
    if config is None:
        if not resume:
            raise ConfigError("a new run needs a config (None: the saved one, on resume)")
        config = _saved_config(run_dir)
    if iterations is not None:
        config = config.replace(iterations=iterations)
    if resume and init is not None:
        raise ConfigError("init starts a new run; it cannot go with a resume")
    hooks = _hooks(hooks)
    own = interrupts is None
    if own:
        interrupts = cli.Interrupts()
    with interrupts if own else contextlib.nullcontext():
        try:
            return _train(config, run_dir, resume, resume_from, init, hooks, console, quiet,
                          save_games, preset, hosts, interrupts)
        except Interrupted:
            raise
        except KeyboardInterrupt as e:
            raise Interrupted(interrupts.status, checkpoint.latest_step(run_dir)) from e


def _saved_config(run_dir: Path) -> Config:
    from agz_jax.nets import checkpoint

    try:
        return checkpoint.read_config(run_dir)
    except checkpoint.CheckpointError as e:
        raise ConfigError(f"{e}; start it without resuming") from None


def _train(config, run_dir, resume, resume_from, init, hooks, console, quiet, save_games,
           preset, hosts, interrupts) -> Summary:
    from agz_jax.nets import checkpoint
    from agz_jax.training import parallel

    parallel.initialize(hosts)  # before anything else touches a device
    latest = checkpoint.latest_step(run_dir)
    if not resume and latest is not None:
        raise ConfigError(f"{run_dir} already holds a run; pass --resume to continue it "
                          "or choose another --out")
    if resume:
        saved = _saved_config(run_dir)
        field = config.first_difference(saved, allow=RESUME_ALLOWS)
        if field:
            raise ConfigError(f"{field} differs from the config saved in "
                              f"{run_dir / 'config.json'}; only iterations, parallel.* and "
                              "checkpoint.* may change on a resume")
    done = latest if resume_from is None else resume_from
    if (resume and done is not None and done > config.iterations
            and config.iterations != saved.iterations):
        # A run does not shrink: its config.json would say fewer iterations than it holds.
        raise ConfigError(f"--iterations {config.iterations} is fewer than the {done} "
                          f"iterations {run_dir} has finished; give --iterations {done} or "
                          "more to extend it, or leave it out")
    parallel.barrier("checked the run directory")  # before process 0 writes to it

    import jax

    from agz_jax.base.cache import enable_compilation_cache

    enable_compilation_cache()
    from rich.console import Console

    from agz_jax.training import run

    main_process = parallel.is_main()
    if console is None:
        console = Console(highlight=False, soft_wrap=True, quiet=not main_process)
    comps = run.build(config)
    state = run.init_state(comps)
    if init is not None:
        nets = jax.device_put(init.variables)
        state = state._replace(train=state.train._replace(variables=nets), best=nets)
        if comps.sharder:
            state = comps.sharder.replicate(state)
        console.print(f"nets from {init.name}")
    if resume:
        state = _restore(run_dir, state, resume_from, config, console, main_process)
    else:
        if main_process:
            checkpoint.write_config(run_dir, config)
            if init is not None:  # the campaign's ledger names each run's start
                (run_dir / "init_from.txt").write_text(f"{init.name}\n")
        console.print(header(run_dir, config, comps, state, preset))
    # Every process must see the same directory here (orbax's calls are collective):
    # none may look before, or after, another one creates it.
    parallel.barrier("before looking for a first checkpoint")
    first = checkpoint.latest_step(run_dir) is None
    parallel.barrier("looked for a first checkpoint")
    _call(hooks, "on_start", run_dir, state)
    # One saver for the whole loop; leaving the block (the end, an error, Ctrl-C)
    # waits for a pending asynchronous write to commit.
    with checkpoint.Saver(run_dir, asynchronous=config.checkpoint.asynchronous,
                          keep_every=config.checkpoint.keep_every) as saver:
        summary = loop(config, run_dir, comps, state, saver, first, console, quiet=quiet,
                       games_to_save=save_games, hooks=hooks, interrupts=interrupts)
    _call(hooks, "on_end", summary)
    return summary


def _restore(run_dir: Path, state, resume_from: int | None, config: Config, console,
             main_process: bool):
    """``state`` restored from ``run_dir``'s checkpoint (``resume_from``'s, whose
    later ones are set aside); the run's config.json updated to ``config``."""
    from agz_jax.nets import checkpoint
    from agz_jax.training import cli, parallel

    try:
        state, _, step = checkpoint.restore(run_dir, state, step=resume_from)
    except checkpoint.DamagedCheckpoint as e:
        raise ConfigError(cli.damaged_way_out(e)) from None
    except checkpoint.CheckpointError as e:
        raise ConfigError(str(e)) from None
    if resume_from is not None:
        if main_process:
            for moved in checkpoint.set_aside(run_dir, step):
                console.print(f"set aside {moved}")
        parallel.barrier("set aside the later checkpoints")
    console.print(f"resumed {run_dir} at iteration {int(state.iteration)}")
    if main_process and config != checkpoint.read_config(run_dir):
        # What a resume may change (iterations, checkpoint.*, parallel.*) becomes
        # the run's own, so the plain --resume that a stopped run names keeps it
        # (an extended run is not "complete" at its old length).
        checkpoint.write_config(run_dir, config)
    return state


def loop(config: Config, run_dir: Path, comps, state, saver, first: bool, console, *,
         quiet: bool = False, games_to_save: int = 0, hooks: Sequence = (),
         interrupts=None) -> Summary:
    """The iterations of a run, from ``state`` (resumed, or new: ``first``, whose
    checkpoint 0 it writes first), each logged, then checkpointed with ``saver``."""
    from agz_jax.base import clock
    from agz_jax.training import parallel, run

    hooks = _hooks(hooks)
    # A signal while a checkpoint is written lets the write commit, then stops the
    # loop at the next iteration's start.
    uncut = interrupts.deferred if interrupts is not None else contextlib.nullcontext
    # Seconds spent on the last checkpoint, logged in the next iteration's line
    # (run.PREVIOUS_CHECKPOINT_S says why there); None until this process saves one.
    checkpoint_s = None
    stopped = clock.stopped()  # run.STOPPED_S: the stops since the last line (or here)
    if first:
        with uncut():
            checkpoint_s = saver.save(0, state, checkpoint_meta(config, 0))

    # Only process 0 writes the metrics; the others keep an unwritten log.
    log = run.MetricsLog(run_dir, keep_through=int(state.iteration), write=parallel.is_main())
    start = clock.running()
    if int(state.iteration) >= config.iterations:
        text = (f"nothing to do: {run_dir} is complete ({int(state.iteration)} iterations;"
                " pass --iterations N to extend it)")
        console.print(text)
        return _finish(run_dir, state, log.read(), text, clock.running() - start)
    # Every process must make the same (collective) calls: process 0 decides.
    if parallel.agree(needs_initial_evaluation(config, int(state.iteration), log)):
        metrics = run.initial_evaluation(comps, state)
        log.write(0, metrics)
        if not quiet:
            console.print(initial_line(config, metrics))
    games: dict = {}
    if games_to_save > 0:
        comps = record_selfplay(comps, games)
    while int(state.iteration) < config.iterations:
        if interrupts is not None:
            interrupts.check()
        t0 = clock.running()
        _call(hooks, "before_iteration", int(state.iteration) + 1)
        state, metrics = run.run_iteration(comps, state)
        it = int(state.iteration)
        for extra in _call(hooks, "after_iteration", it, metrics):
            _add_metrics(metrics, extra)
        if games:
            save_games(run_dir / "games", it, games.pop("moves"), config.game.size,
                       games_to_save, rule=config.game.rule)
        metrics[run.ITERATION_S] = clock.running() - t0
        metrics[run.STOPPED_S] = clock.stopped() - stopped
        stopped += metrics[run.STOPPED_S]
        if checkpoint_s is not None:
            metrics[run.PREVIOUS_CHECKPOINT_S] = checkpoint_s
        # The line before the checkpoint: see run.PREVIOUS_CHECKPOINT_S.
        log.write(it, metrics)
        if not quiet:
            console.print(fmt_line(it, config.iterations, metrics))
        with uncut():
            checkpoint_s = saver.save(it, state, checkpoint_meta(config, it))
    with uncut():
        checkpoint_s += saver.wait()  # the last checkpoint, committed
    log.close()

    history = log.read()
    wall = clock.running() - start
    text = summary(history, wall, run_dir, last_checkpoint_s=checkpoint_s)
    console.print(text)
    return _finish(run_dir, state, history, text, wall)


def _add_metrics(metrics: dict, extra: dict | None) -> None:
    if not extra:
        return
    clash = sorted(set(extra) & set(metrics))
    if clash:
        raise ValueError(f"a hook's metrics {clash} are already in the iteration's line")
    metrics.update(extra)


def _finish(run_dir: Path, state, history: list[dict], text: str, wall: float) -> Summary:
    from agz_jax.training import run

    digest = print_params_hash(run, state)
    return Summary(run_dir, int(state.iteration), digest, history, text, wall)


def needs_initial_evaluation(config: Config, iteration: int, log) -> bool:
    """Iteration 0's line (the untrained net against random): due when a run
    evaluates at all, has not started, and has not logged it yet."""
    return iteration == 0 and bool(config.eval.every) and not log.read()


def print_params_hash(run, state) -> str:
    """On every process: equal hashes on all processes are the multi-host consistency
    check, and equal hashes of two runs mean bit-identical nets. Returns the hash."""
    import jax

    digest = run.params_hash(state)
    print(f"params sha256 {digest} (process {jax.process_index()}/"
          f"{jax.process_count()})", flush=True)
    return digest


def record_selfplay(comps, into: dict):
    """``comps`` whose self-play also leaves its games' moves (int32[T, B]) in ``into``."""
    play = comps.selfplay

    def selfplay(*args, **kwargs):
        traj, final, stats = play(*args, **kwargs)
        into["moves"] = traj.action
        return traj, final, stats

    return dataclasses.replace(comps, selfplay=selfplay)


def save_games(directory: Path, iteration: int, moves, size: int, count: int,
               rule: str | None = None) -> list[Path]:
    """Write the first ``count`` games of one iteration as ``.psq`` files (process 0 only)."""
    import jax
    import numpy as np

    from agz_jax.game.records import write_psq

    if jax.process_index() != 0 or not getattr(moves, "is_fully_addressable", True):
        return []  # only process 0 writes, and only games it holds entirely
    moves = np.asarray(jax.device_get(moves))
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for game in range(min(count, moves.shape[1])):
        path = directory / f"it{iteration:05d}_game{game:03d}.psq"
        write_psq(path, moves[:, game], size, trailer=(f"self-play iteration {iteration}",),
                  rule=rule)
        paths.append(path)
    return paths
