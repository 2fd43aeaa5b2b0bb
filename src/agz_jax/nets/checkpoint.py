"""Orbax checkpoints of a whole run: every array of the run state plus JSON metadata.

Layout: ``RUN_DIR/config.json`` (the run's config, written once) and
``RUN_DIR/checkpoints/<iteration>/{state,meta}``. Orbax writes each step to a
temporary directory renamed on completion (the commit), so a run killed
mid-save leaves the previous checkpoint intact; only committed steps are listed
and restored.

``save`` writes one checkpoint and returns when it is committed. A run's loop
keeps one ``Saver``, which can also write asynchronously: its ``save`` returns
once the arrays are copied to the host (and the previous write has committed),
and the write continues in orbax's background thread (see ``Saver``).

A checkpoint that cannot be read is told apart from one that does not fit the
run's config (its arrays' shapes, from orbax's metadata): the first raises
``DamagedCheckpoint`` naming the latest earlier checkpoint that restores, the
way out (``set_aside`` the later ones and resume from it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from agz_jax.base import clock
from agz_jax.config.schema import Config, ConfigError

SET_ASIDE = "damaged"  # RUN_DIR/damaged/<step>: checkpoints moved out of the way


def _not_routine_notice(record: logging.LogRecord) -> bool:
    """False for orbax's notices that a read-only manager adjusted its options
    (three absl warnings each time a run is resumed or a model read), and for
    its warning that an asynchronous save waited over a second for the previous
    write (the main job logs that wait itself, ``run.PREVIOUS_CHECKPOINT_S``):
    nothing is wrong, and the user can do nothing about them."""
    msg = record.getMessage()
    return not ("read_only=True" in msg or msg.startswith("Given directory is read only")
                or msg.startswith("Waiting for previous save to complete took"))


logging.getLogger("absl").addFilter(_not_routine_notice)

_unraisablehook = sys.unraisablehook


def _drop_closed_loop_noise(unraisable) -> None:
    """When one array of a restore cannot be read, orbax's asyncio loop closes
    while TensorStore still completes the other reads; each completion then
    fails on the closed loop and Python prints it as an unraisable exception:
    dozens of "Event loop is closed" tracebacks around the real error. They
    say nothing more, so exactly those are dropped."""
    exc = unraisable.exc_value
    if isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed":
        return
    _unraisablehook(unraisable)


sys.unraisablehook = _drop_closed_loop_noise


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable, or does not match the run's config."""


class DamagedCheckpoint(CheckpointError):
    """Checkpoint ``step`` of ``run_dir`` cannot be read; ``intact`` is the latest
    earlier step that restores (None if there is none)."""

    def __init__(self, message: str, run_dir: Path, step: int, intact: int | None):
        super().__init__(message)
        self.run_dir, self.step, self.intact = run_dir, step, intact


@contextlib.contextmanager
def _quiet_absl():
    """Orbax's absl warnings off (reading a damaged checkpoint's metadata warns)."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _manager(run_dir: Path, read_only: bool = False, asynchronous: bool = False,
             keep_every: int = 0) -> ocp.CheckpointManager:
    # A writer first removes the temporary directories of writes a killed
    # process left unfinished (a gpu-sized one holds gigabytes). It keeps the
    # last two steps and, with ``keep_every``, every multiple of it.
    options = ocp.CheckpointManagerOptions(
        max_to_keep=2, keep_period=keep_every or None, enable_async_checkpointing=asynchronous,
        create=not read_only, read_only=read_only, cleanup_tmp_directories=not read_only,
    )
    return ocp.CheckpointManager(
        (run_dir / "checkpoints").absolute(), options=options, item_names=("state", "meta")
    )


def all_steps(run_dir: Path) -> list[int]:
    """The steps of ``run_dir``'s checkpoints, in increasing order."""
    if not (run_dir / "checkpoints").exists():
        return []
    with _manager(run_dir, read_only=True) as mngr:
        return sorted(mngr.all_steps())


def latest_step(run_dir: Path) -> int | None:
    steps = all_steps(run_dir)
    return steps[-1] if steps else None


def write_config(run_dir: Path, config: Config) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(config.to_json())


def read_config(run_dir: Path) -> Config:
    path = run_dir / "config.json"
    if not path.exists():
        raise CheckpointError(f"{path} not found: {run_dir} holds no run to resume")
    try:
        return Config.from_dict(json.loads(path.read_text()))
    except (json.JSONDecodeError, ConfigError, TypeError) as e:
        raise CheckpointError(f"{path} is not a valid config: {e}") from e


def _on_disk(state: Any) -> Any:
    """A NamedTuple state as the dict of its fields that hold something: a field
    that is ``()`` (say, ``RunState.slots`` of a lockstep run) leaves no trace, so
    checkpoints written before such a field existed still restore."""
    if hasattr(state, "_asdict"):
        return {k: v for k, v in state._asdict().items() if not (isinstance(v, tuple) and not v)}
    return state


class Saver:
    """Writes one run's checkpoints through one orbax manager (every process of a
    multi-process run makes the same calls: orbax's saves are collective).

    Synchronous (the default): ``save`` returns when the step is committed.
    Asynchronous: ``save`` first waits for the previous step's write to commit,
    then copies the arrays to host memory and returns; the write, the commit
    (the rename of the step's temporary directory) and the removal of the
    oldest step then run in orbax's background thread, while the caller goes
    on. A step is on disk, for ``all_steps`` and a resume, only once committed,
    and the oldest step is removed only after the newer one commits, so a
    process killed at any moment leaves its last committed step intact. The
    host copy is the checkpoint's own: on a GPU it is a copy in host memory;
    on the CPU, where it is a view of the arrays' memory, jax will not donate
    an array while such a view lives (it copies instead), so the next
    iteration cannot overwrite what is being written.

    ``wait`` blocks until the pending write has committed; ``close`` (also on
    leaving a ``with`` block, even by an exception or Ctrl-C) waits, then
    releases the manager. ``save`` and ``wait`` return the seconds the caller
    was blocked. It keeps the last two steps and, with ``keep_every`` N > 0,
    every step that is a multiple of N.
    """

    def __init__(self, run_dir: Path, asynchronous: bool = False, keep_every: int = 0):
        self.asynchronous = asynchronous
        self._mngr = _manager(run_dir, asynchronous=asynchronous, keep_every=keep_every)

    def save(self, step: int, state: Any, meta: dict) -> float:
        t0 = clock.running()
        self._mngr.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(_on_disk(state)), meta=ocp.args.JsonSave(meta)))
        if not self.asynchronous:
            self._mngr.wait_until_finished()
        return clock.running() - t0

    def wait(self) -> float:
        t0 = clock.running()
        self._mngr.wait_until_finished()
        return clock.running() - t0

    def close(self) -> None:
        self._mngr.close()

    def __enter__(self) -> Saver:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def save(run_dir: Path, step: int, state: Any, meta: dict) -> None:
    """Write checkpoint ``step`` of ``state`` and ``meta``; returns once it is committed."""
    with Saver(run_dir) as saver:
        saver.save(step, state, meta)


def _step_dir(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / str(step)


def _read(run_dir: Path, step: int, state_args) -> Any:
    with _manager(run_dir, read_only=True) as mngr:
        return mngr.restore(step, args=ocp.args.Composite(state=state_args,
                                                          meta=ocp.args.JsonRestore()))


def _names(tree) -> dict[str, tuple]:
    """``{"best.params.Conv_0.kernel": (shape, dtype)}``, orbax's names for the leaves."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(p, simple=True, separator="."): (tuple(x.shape), x.dtype)
            for p, x in leaves}


def _misfit(run_dir: Path, step: int, abstract, partial: bool) -> str | None:
    """How checkpoint ``step``'s arrays (orbax's metadata) differ from ``abstract``'s
    (``partial``: ``abstract`` names some of them), or None if they agree, or if
    the metadata itself cannot be read."""
    try:
        with _quiet_absl(), ocp.StandardCheckpointer() as ckptr:
            tree = ckptr.metadata((_step_dir(run_dir, step) / "state").absolute())
            saved = {m.name: (tuple(m.shape), m.dtype)
                     for m in jax.tree.leaves(tree.item_metadata.tree)}
    except Exception:  # unreadable metadata: a damaged checkpoint, not a misfit
        return None
    wanted = _names(abstract)
    for name in sorted(wanted):
        if name not in saved:
            return f"it has no array {name}"
        if saved[name] != wanted[name]:
            return (f"its {name} has shape {saved[name][0]}, the config needs "
                    f"{wanted[name][0]}")
    extra = [] if partial else sorted(set(saved) - set(wanted))
    return f"it has an array {extra[0]} the config does not make" if extra else None


def _cause(e: Exception) -> str:
    """A few words on why a read failed (TensorStore's status code, or the type)."""
    text = str(e).strip()
    head = text.split(":", 1)[0]
    if head.isupper() and head.replace("_", "").isalpha():  # DATA_LOSS, OUT_OF_RANGE, ...
        return head
    return type(e).__name__


def _restore(run_dir: Path, abstract: Any, step: int | None, state_args,
             partial: bool = False) -> tuple[Any, int]:
    """(orbax's restored Composite, its step) of the state ``abstract`` describes;
    CheckpointError with the reason."""
    steps = all_steps(run_dir)
    if not steps:
        raise CheckpointError(f"no checkpoint in {run_dir / 'checkpoints'}")
    step = steps[-1] if step is None else step
    if step not in steps:
        raise CheckpointError(f"{run_dir / 'checkpoints'} holds no checkpoint {step} (it holds "
                              f"{', '.join(map(str, steps))})")
    # Before reading: orbax pads or cuts an array of another shape without a word.
    misfit = _misfit(run_dir, step, abstract, partial)
    if misfit:
        raise CheckpointError(f"checkpoint {_step_dir(run_dir, step)} does not fit the config "
                              f"in {run_dir / 'config.json'}: {misfit}")
    try:
        return _read(run_dir, step, state_args), step
    except Exception as e:  # orbax raises many types: its files cannot be read
        first = e
    intact = None
    for earlier in reversed([s for s in steps if s < step]):
        try:
            _read(run_dir, earlier, state_args)
        except Exception:
            continue
        intact = earlier
        break
    later = (f"the previous checkpoint, {intact}, is intact" if intact is not None
             else "no earlier checkpoint is intact")
    raise DamagedCheckpoint(
        f"checkpoint {_step_dir(run_dir, step)} is damaged ({_cause(first)}: its files "
        f"cannot be read); {later}", run_dir, step, intact) from first


def restore(run_dir: Path, like: Any, step: int | None = None) -> tuple[Any, dict, int]:
    """Restore the latest (or given) checkpoint into the structure of ``like``.

    Raises CheckpointError, naming the checkpoint and the cause, if there is none,
    or it does not fit ``like``'s shapes and dtypes (the run's config.json was
    changed); DamagedCheckpoint if its files cannot be read.
    """
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, _on_disk(like))
    out, step = _restore(run_dir, abstract, step, ocp.args.StandardRestore(abstract))
    state = like._replace(**out.state) if hasattr(like, "_asdict") else out.state
    return state, dict(out.meta), step


def restore_fields(run_dir: Path, fields: dict, step: int | None = None) -> tuple[dict, int]:
    """Only the named top-level fields of a checkpoint's state, as host arrays:
    ``fields`` maps each name to its abstract tree (``jax.eval_shape``), e.g.
    ``{"best": variables}``. The other arrays (the replay buffer) are not read."""
    restore_args = ocp.checkpoint_utils.construct_restore_args(fields)
    args = ocp.args.PyTreeRestore(item=fields, restore_args=restore_args, partial_restore=True)
    out, step = _restore(run_dir, fields, step, args, partial=True)
    return dict(out.state), step


def set_aside(run_dir: Path, after: int) -> list[Path]:
    """Move the checkpoints after step ``after`` out of ``RUN_DIR/checkpoints`` into
    ``RUN_DIR/damaged/`` (a run resumed from ``after`` writes those steps again).
    Returns where they went."""
    moved = []
    for step in all_steps(run_dir):
        if step > after:
            target = run_dir / SET_ASIDE / str(step)
            n = 1
            while target.exists():
                target = run_dir / SET_ASIDE / f"{step}.{n}"
                n += 1
            target.parent.mkdir(parents=True, exist_ok=True)
            _step_dir(run_dir, step).rename(target)
            moved.append(target)
    return moved
