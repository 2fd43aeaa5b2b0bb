"""Orbax checkpoints of a whole run: every array of the run state plus JSON metadata.

Layout: ``RUN_DIR/config.json`` (the run's config, written once) and
``RUN_DIR/checkpoints/<iteration>/{state,meta}``. Saving is synchronous, and
orbax writes each step to a temporary directory renamed on completion, so a
run killed mid-save leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from agz_jax.config import Config, ConfigError


def _not_read_only_notice(record: logging.LogRecord) -> bool:
    """False for orbax's notices that a read-only manager adjusted its options
    (three absl warnings each time a run is resumed or a model read): nothing
    is wrong, and the user can do nothing about them."""
    msg = record.getMessage()
    return not ("read_only=True" in msg or msg.startswith("Given directory is read only"))


logging.getLogger("absl").addFilter(_not_read_only_notice)


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable, or does not match the run's config."""


def _manager(run_dir: Path, read_only: bool = False) -> ocp.CheckpointManager:
    options = ocp.CheckpointManagerOptions(
        max_to_keep=2, enable_async_checkpointing=False, create=not read_only,
        read_only=read_only,
    )
    return ocp.CheckpointManager(
        (run_dir / "checkpoints").absolute(), options=options, item_names=("state", "meta")
    )


def latest_step(run_dir: Path) -> int | None:
    if not (run_dir / "checkpoints").exists():
        return None
    with _manager(run_dir, read_only=True) as mngr:
        return mngr.latest_step()


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


def save(run_dir: Path, step: int, state: Any, meta: dict) -> None:
    with _manager(run_dir) as mngr:
        mngr.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(_on_disk(state)), meta=ocp.args.JsonSave(meta)))
        mngr.wait_until_finished()


def restore(run_dir: Path, like: Any, step: int | None = None) -> tuple[Any, dict, int]:
    """Restore the latest (or given) checkpoint into the structure of ``like``.

    Raises CheckpointError, naming the directory and the cause, if there is no
    checkpoint or it cannot be read into ``like``'s shapes and dtypes.
    """
    if step is None:
        step = latest_step(run_dir)
    if step is None:
        raise CheckpointError(f"no checkpoint in {run_dir / 'checkpoints'}")
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, _on_disk(like))
    try:
        with _manager(run_dir, read_only=True) as mngr:
            out = mngr.restore(step, args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
    except Exception as e:  # orbax raises many types; name the file and the cause
        raise CheckpointError(
            f"checkpoint {run_dir / 'checkpoints' / str(step)} cannot be restored "
            f"for this config ({type(e).__name__}: {str(e).splitlines()[0][:300]})"
        ) from e
    state = like._replace(**out.state) if hasattr(like, "_asdict") else out.state
    return state, dict(out.meta), step
