"""Data parallelism over a device mesh, on one host or many (``jax.distributed``).

One code path for 1 and N devices: every jitted phase of an iteration is the
same program whatever the mesh; a ``Sharder`` only annotates it.

* Mesh: 1-D, axis ``data``, over every device of every process (or the first
  ``parallel.devices``).
* Self-play: the batch of games is split over the mesh (a sharding constraint
  on the game axis of the states, kept through the scan); each device plays
  ``num_games / devices`` games with the replicated best net.
* Training: the replay buffer and the parameters are replicated; a sampled
  batch is split over the mesh. XLA's SPMD partitioner (GSPMD) then computes
  each device's part of the loss and inserts the all-reduce that sums the
  gradients (and the BatchNorm batch statistics) over devices, so a step is
  the global-batch step of the 1-device run up to float summation order.
* Randomness: ``jax_threefry_partitionable`` (the default) makes random bits
  independent of how an array is sharded, so N devices draw the numbers 1
  device draws.

Several hosts: every process runs the same program (``jax.distributed``,
multi-controller); arrays are global, jitted calls are collective and must be
issued in the same order everywhere. ``hosts_from`` reads the coordinator,
process count and id from flags or the environment; only process 0 writes
files (``is_main``), while every process takes part in checkpoint saves and
restores (orbax writes each replicated array once, from process 0).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from agz_jax.config.schema import ConfigError
from agz_jax.config.sections import ParallelConfig

AXIS = "data"


def make_mesh(parallel: ParallelConfig) -> Mesh:
    """The 1-D data mesh of ``parallel.devices``; ConfigError (no compiling) if
    the devices are too few. Whether a run's global batches split evenly over
    it is the run config's ``Config.check_devices(mesh.size)``."""
    available = jax.devices()
    n = parallel.devices or len(available)
    if n > len(available):
        raise ConfigError(f"parallel.devices must be at most the {len(available)} devices "
                          f"available ({jax.default_backend()}), got {n}")
    if jax.process_count() > 1 and n != len(available):
        raise ConfigError(f"parallel.devices must be 0 (every device) with "
                          f"{jax.process_count()} processes, got {n}")
    return Mesh(np.array(available[:n]), (AXIS,))


@dataclasses.dataclass(frozen=True)
class Sharder:
    """Shardings of one mesh: game / example batches split on ``AXIS``, the rest
    replicated."""

    mesh: Mesh

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    @property
    def replicated(self) -> NamedSharding:
        return NamedSharding(self.mesh, P())

    def batch(self, axis: int = 0) -> NamedSharding:
        """Split along ``axis`` (the batch axis), replicated along the others."""
        return NamedSharding(self.mesh, P(*([None] * axis), AXIS))

    def constrain(self, tree, axis: int = 0):
        """Inside jit: every leaf of ``tree`` split along ``axis``."""
        sharding = self.batch(axis)
        return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, sharding), tree)

    def replicate(self, tree):
        """Host values (the same on every process) as global replicated arrays.

        ``make_array_from_callback`` works with one process or many; the values
        are copied exactly."""
        sharding = self.replicated

        def put(x):
            host = np.asarray(x)
            return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])

        return jax.tree.map(put, tree)


# ------------------------------------------------------------------------- hosts


@dataclasses.dataclass(frozen=True)
class Hosts:
    """How to call ``jax.distributed.initialize``; ``None`` fields are auto-detected
    (SLURM, Open MPI, TPU pods)."""

    coordinator: str | None
    num_processes: int | None
    process_id: int | None


ENV = {"coordinator": "JAX_COORDINATOR_ADDRESS", "num_processes": "JAX_NUM_PROCESSES",
       "process_id": "JAX_PROCESS_ID"}


def hosts_from(coordinator: str | None = None, num_processes: str | None = None,
               process_id: str | None = None,
               environ: Mapping[str, str] | None = None) -> Hosts | None:
    """Resolve the multi-host settings from flags, else the environment.

    ``num_processes``: absent or 1 -> one process (``None`` is returned, nothing to
    initialize); N > 1 -> needs a coordinator ``host:port`` and a process id in
    0..N-1; ``auto`` -> ``jax.distributed.initialize()`` detects the cluster.
    Raises ConfigError naming the flag / variable before anything starts.
    """
    env = os.environ if environ is None else environ
    coordinator = coordinator or env.get(ENV["coordinator"]) or None
    num = num_processes or env.get(ENV["num_processes"]) or None
    pid = process_id if process_id is not None else env.get(ENV["process_id"])
    where = lambda f: f"--{f.replace('_', '-')} / {ENV[f]}"
    if num is None:
        if coordinator is not None or pid is not None:
            raise ConfigError(f"{where('num_processes')} must be set (N or 'auto') when a "
                              "coordinator or a process id is given")
        return None
    if num == "auto":
        return Hosts(coordinator, None, None if pid is None else _int(pid, "process_id"))
    n = _int(num, "num_processes")
    if n < 1:
        raise ConfigError(f"{where('num_processes')} must be >= 1 or 'auto', got {num!r}")
    if n == 1:
        return None
    if coordinator is None or ":" not in coordinator:
        raise ConfigError(f"{where('coordinator')} must be HOST:PORT of process 0 with "
                          f"{n} processes, got {coordinator!r}")
    if pid is None:
        raise ConfigError(f"{where('process_id')} must be set with {n} processes")
    p = _int(pid, "process_id")
    if not 0 <= p < n:
        raise ConfigError(f"{where('process_id')} must be in 0..{n - 1}, got {p}")
    return Hosts(coordinator, n, p)


def _int(value, field: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"--{field.replace('_', '-')} / {ENV[field]} must be an integer, "
                          f"got {value!r}") from None


def initialize(hosts: Hosts | None) -> None:
    """``jax.distributed.initialize`` (before any other JAX call); no-op for one process."""
    if hosts is None:
        return
    jax.distributed.initialize(coordinator_address=hosts.coordinator,
                               num_processes=hosts.num_processes, process_id=hosts.process_id)


def is_main() -> bool:
    """Process 0: the one that writes logs and files."""
    return jax.process_index() == 0


def agree(value: int) -> int:
    """Process 0's ``value`` on every process (a host decision that steers collective
    calls must be the same everywhere)."""
    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    return int(multihost_utils.broadcast_one_to_all(np.int32(value)))


def barrier(name: str) -> None:
    """Wait until every process reaches this point."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)
