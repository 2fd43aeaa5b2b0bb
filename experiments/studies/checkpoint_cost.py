"""What the main job's per-iteration checkpoint costs for a preset's state.

    python -m experiments.studies.checkpoint_cost --preset gpu --fill --json
    python -m experiments.studies.checkpoint_cost --preset gpu --fill --selfplay.num-games 1024 \\
        --replay.capacity 125000                    # a quarter of the state, to extrapolate
    python -m experiments.studies.checkpoint_cost --out runs/gpu --resume   # a run's own config

It builds the run state as the main job does (``run.build``, ``run.init_state``:
the nets, the optimiser, the replay and, for continuous self-play, the slots'
game records), and with ``--fill`` fills the replay and the slots' records with
positions shaped like real ones (a quarter of the board or less occupied, a
policy spread over the empty points, decayed z; the slots' records a random
part of the way into their games), since an empty replay compresses to
nothing. It then writes the state as the main job does (``checkpoint.Saver``),
twice: synchronously, and asynchronously (the seconds ``save`` blocks, and
those until the write has committed). It reports the raw bytes of the state's
arrays, the bytes of one checkpoint on disk, and those seconds. The
checkpoints go to a temporary directory inside ``--out`` (default: the
system's temporary directory; give one on the disk the run would use), removed
at the end. Any config field can be overridden with a dotted flag.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from agz_jax.config.schema import ConfigError
from agz_jax.training import cli


def _own_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fill", action="store_true",
                        help="fill the replay and the slots' records with positions shaped "
                             "like real ones (else they are the zeros a new run starts with)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


COMMAND = cli.RunCommand(
    prog="python -m experiments.studies.checkpoint_cost", doc=__doc__, default_preset="gpu",
    default_out=lambda preset: Path(tempfile.gettempdir()), sections=cli.RUN_SECTIONS,
    own_flags=_own_flags)


def positions(rng: np.random.Generator, n: int, size: int, channels: int):
    """``n`` positions shaped like self-play's: (obs int8[n, H, W, C], policy
    float32[n, H*W], z float32[n]). Own and opponent stones on up to a quarter
    of the points, the last move marked in channel 2, the policy positive on the
    empty points only (random weights, sharpened), z = +-0.95^k."""
    points = size * size
    density = rng.uniform(0.0, 0.25, (n, 1)).astype(np.float32)
    u = rng.random((n, points), dtype=np.float32)
    own, opp = u < density / 2, (u >= density / 2) & (u < density)
    obs = np.zeros((n, points, channels), np.int8)
    obs[..., 0], obs[..., 1] = own, opp
    if channels > 2:
        last = np.argmax(np.where(opp, u, -1.0), axis=1)
        obs[np.arange(n), last, 2] = opp[np.arange(n), last]
    weight = rng.random((n, points), dtype=np.float32) ** 8 * ~(own | opp)
    policy = weight / np.maximum(weight.sum(1, keepdims=True), 1e-9)
    z = (rng.choice([-1.0, 1.0], n) * 0.95 ** rng.integers(0, 60, n)).astype(np.float32)
    return obs.reshape(n, size, size, channels), policy, z


def fill(state, config, seed: int = 0, chunk: int = 65_536):
    """``state`` with its replay full and its slots' records part-filled (``positions``)."""
    import jax

    rng = np.random.default_rng(seed)
    size = config.game.size
    buf = jax.device_get(state.replay)
    obs, policy, z = np.array(buf.obs), np.array(buf.policy), np.array(buf.z)
    nets, capacity, channels = obs.shape[0], obs.shape[1], obs.shape[-1]
    for net in range(nets):
        for lo in range(0, capacity, chunk):
            hi = min(lo + chunk, capacity)
            obs[net, lo:hi], policy[net, lo:hi], z[net, lo:hi] = positions(
                rng, hi - lo, size, channels)
    full = np.full(nets, capacity, np.int32)
    replay = buf._replace(obs=obs, policy=policy, z=z, size=full, ptr=np.zeros(nets, np.int32))
    state = state._replace(replay=jax.device_put(replay))
    del obs, policy, z, replay
    if state.slots == ():
        return state
    slots = jax.device_get(state.slots)
    s_obs, s_policy = np.array(slots.obs), np.array(slots.policy)
    games, longest = s_obs.shape[:2]
    length = rng.integers(0, min(60, longest), games).astype(np.int32)
    for b in np.flatnonzero(length):
        s_obs[b, :length[b]], s_policy[b, :length[b]], _ = positions(
            rng, int(length[b]), size, channels)
    slots = slots._replace(obs=s_obs, policy=s_policy, length=length)
    return state._replace(slots=jax.device_put(slots))


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(config, filled: bool, directory: Path) -> dict:
    """Build the state, write it synchronously (step 1) and asynchronously (step
    2), and report bytes and seconds."""
    import jax

    from agz_jax.nets import checkpoint
    from agz_jax.training import run

    t0 = time.perf_counter()
    comps = run.build(config)
    state = run.init_state(comps)
    if filled:
        state = fill(state, config)
    jax.block_until_ready(state)
    built = time.perf_counter() - t0
    leaves = jax.tree.leaves(state)
    raw = sum(x.nbytes for x in leaves)
    big = {name: int(x.nbytes) for name, x in (
        ("replay.obs", state.replay.obs), ("replay.policy", state.replay.policy),
        *((("slots.obs", state.slots.obs), ("slots.policy", state.slots.policy))
          if state.slots != () else ()))}
    meta = {"iteration": 0, "config": config.to_dict()}
    # Each way twice, the faster kept (the machine may be shared; the first write
    # also pays for starting orbax's machinery).
    sync_s, blocked_s, committed_s = [], [], []
    with checkpoint.Saver(directory, asynchronous=False) as saver:
        for step in (1, 2):
            sync_s.append(saver.save(step, state, meta))
            if step == 1:
                on_disk = disk_bytes(directory / "checkpoints" / "1")
    with checkpoint.Saver(directory, asynchronous=True) as saver:
        for step in (3, 4):
            blocked_s.append(saver.save(step, state, meta))
            committed_s.append(blocked_s[-1] + saver.wait())
    return {"preset_state": {"selfplay.num_games": config.selfplay.num_games,
                             "replay.capacity": config.replay.capacity,
                             "continuous": config.selfplay.continuous, "filled": filled},
            "backend": jax.default_backend(), "build_s": built, "raw_bytes": int(raw),
            "largest_arrays_bytes": big, "disk_bytes": on_disk,
            "sync_save_s": min(sync_s), "async_blocking_s": min(blocked_s),
            "async_committed_s": min(committed_s)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args, config = cli.parse_run(COMMAND, argv)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # --help
        return int(e.code or 0)
    args.out.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="checkpoint_cost-", dir=args.out))
    try:
        report = measure(config, args.fill, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        gb = 1e9
        r = report
        print(f"{r['backend']}: state {r['raw_bytes'] / gb:.2f} GB raw, checkpoint "
              f"{r['disk_bytes'] / gb:.2f} GB on disk; synchronous save {r['sync_save_s']:.1f} s;"
              f" asynchronous: blocks {r['async_blocking_s']:.1f} s, committed after "
              f"{r['async_committed_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
