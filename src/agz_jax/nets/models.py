"""Trained models: load a model by name or path, save one.

A *model directory* holds ``config.json`` (the config it was trained with) and
``variables.msgpack`` (the best net's variables, stacked ``[num_nets, ...]``,
serialized with flax). It is small (no optimizer state, no replay buffer), so
trained models ship in the repository under ``models/<name>/``.

``load`` accepts, in this order:

* a model name, e.g. ``default`` -> ``models/default`` in this repository (or in
  ``$AGZ_JAX_MODELS`` when set);
* a model directory (``config.json`` + ``variables.msgpack``);
* a run directory written by ``python -m experiments.selfplay`` (its latest
  checkpoint's best net).

Errors (``ModelError``) name the path and what is wrong, and happen before any
compilation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import serialization

from agz_jax.config.schema import Config
from agz_jax.game.gomoku import Rules
from agz_jax.nets.networks import Networks, make_networks

VARIABLES_FILE = "variables.msgpack"
CONFIG_FILE = "config.json"


class ModelError(ValueError):
    """A model cannot be found or read, or does not match its config."""


class Model(NamedTuple):
    name: str  # as asked for
    path: Path
    config: Config
    rules: Rules
    nets: Networks
    variables: Any  # stacked [num_nets, ...]
    # The checkpoint step (the self-play iteration) a run directory's net came
    # from; None for a model directory. A run directory's latest net changes as
    # the run goes on, so whoever records results (the ladder) names it by this.
    step: int | None = None


def models_dir() -> Path:
    """Where model names are looked up: ``$AGZ_JAX_MODELS`` or the repo's ``models/``."""
    env = os.environ.get("AGZ_JAX_MODELS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "models"


def available() -> list[str]:
    root = models_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / VARIABLES_FILE).exists())


def resolve(name_or_path: str | Path) -> Path:
    """The directory a model name or path refers to (model dir or run dir)."""
    text = str(name_or_path)
    named = models_dir() / text
    if "/" not in text and os.sep not in text and (named / VARIABLES_FILE).exists():
        return named
    path = Path(text)
    if path.is_dir():
        return path
    names = ", ".join(available()) or "none"
    raise ModelError(f"model {text!r} not found: no such directory, and no model of that "
                     f"name in {models_dir()} (available: {names})")


def read_config(path: Path) -> Config:
    from agz_jax.nets import checkpoint

    if not (path / CONFIG_FILE).exists():  # checkpoint's message speaks of a resume
        raise ModelError(f"{path / CONFIG_FILE} not found: {path} holds no model or run to "
                         f"start from; give a model directory, a run directory or a model "
                         f"name ({', '.join(available()) or 'none'})")
    try:
        return checkpoint.read_config(path)
    except checkpoint.CheckpointError as e:
        raise ModelError(str(e)) from e


def _abstract_variables(config: Config):
    nets = make_networks(config.net, board_size=config.game.size, features=config.features)
    return nets, jax.eval_shape(nets.init, jax.random.PRNGKey(0))


def load(name_or_path: str | Path) -> Model:
    """Load a model (see the module docstring for what is accepted)."""
    path = resolve(name_or_path)
    config = read_config(path)
    nets, abstract = _abstract_variables(config)
    if (path / VARIABLES_FILE).exists():
        try:
            raw = serialization.msgpack_restore((path / VARIABLES_FILE).read_bytes())
        except Exception as e:  # msgpack raises several types
            raise ModelError(f"{path / VARIABLES_FILE} is not readable: {e}") from e
        want = jax.tree_util.tree_structure(abstract)
        try:
            variables = jax.tree_util.tree_unflatten(
                want, jax.tree_util.tree_leaves(serialization.from_state_dict(abstract, raw)))
        except Exception as e:
            raise ModelError(f"{path / VARIABLES_FILE} does not match the net of "
                             f"{path / CONFIG_FILE}: {e}") from e
        for got, ref in zip(jax.tree.leaves(variables), jax.tree.leaves(abstract), strict=True):
            if np.shape(got) != ref.shape:
                raise ModelError(f"{path / VARIABLES_FILE}: an array has shape "
                                 f"{np.shape(got)}, the config's net needs {ref.shape}")
        variables = jax.tree.map(lambda x, r: np.asarray(x, r.dtype), variables, abstract)
        step = None
    else:
        variables, step = _best_from_run(path, abstract)
    return Model(str(name_or_path), path, config,
                 Rules(config.game.size, config.game.rule), nets, variables, step)


def _best_from_run(path: Path, abstract) -> tuple[Any, int]:
    """(the best net's variables, the step of the checkpoint they were read from):
    only the run state's ``best`` field is read (not the replay buffer)."""
    from agz_jax.nets import checkpoint

    if checkpoint.latest_step(path) is None:
        raise ModelError(f"{path} holds neither {VARIABLES_FILE} nor a checkpoint "
                         f"in {path / 'checkpoints'}")
    try:
        fields, step = checkpoint.restore_fields(path, {"best": abstract})
    except checkpoint.CheckpointError as e:
        raise ModelError(str(e)) from e
    return fields["best"], int(step)


def save(out_dir: str | Path, config: Config, variables: Any) -> Path:
    """Write a model directory from a config and (stacked) variables. The
    variables go to a temporary file first, renamed into place: a process
    killed while writing leaves the directory's previous variables whole."""
    from agz_jax.nets import checkpoint

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    checkpoint.write_config(out, config)
    state = serialization.to_state_dict(jax.device_get(variables))
    partial = out / f"{VARIABLES_FILE}.partial"
    partial.write_bytes(serialization.msgpack_serialize(state))
    os.replace(partial, out / VARIABLES_FILE)
    return out


def shipped_for(rule: str) -> str:
    """The name of the shipped model that plays ``rule`` (``models/NAME``)."""
    return "renju" if rule == "renju" else "default"
