"""Is the net too small? Fresh nets of several sizes fitted to one run's self-play.

    python -m experiments.studies.capacity runs/campaign-q --nets 32x2,64x4 --steps 600
    python -m experiments.studies.capacity runs/campaign-q --nets 32x2,32x4,64x2 --json

The examples are the replay of a run's checkpoint (the latest, or ``--step``):
the (s, pi, z) of its own self-play, decayed z and all. From one ring (``--ring``:
0 the black net's positions, 1 the white net's, with Double Networks) the
``--held-out`` newest examples are set aside; they come from the last games
written, so a game is on one side of the split but for the one game the split
cuts. Each net ``FILTERSxBLOCKS`` (the run's other net options) starts from
random weights (``--seed``) and takes ``--steps`` SGD steps of the run's train
config (``--learning-rate`` if given) on symmetry-augmented samples of the rest,
as the main job trains. Every ``--eval-every`` steps its value loss (squared
error against z) and policy loss (cross-entropy against pi) are measured on
every held-out example, with the nets' running statistics, as they play.

Equal steps, equal data: a net that fits the held-out games better at every
point learns these positions faster per step; only nets trained to the end
would show which one can fit them better at all. It is not a match: a lower
loss says nothing by itself of strength.

``--best`` also measures the run's best nets (as the checkpoint holds them) on
the same examples, for where long training took the run's own architecture.
They trained on none of the games played after the gate last accepted them,
and each example written before that stayed in the replay for the SGD steps
that followed, so hold out no more than the games since that acceptance for a
clean reference (``metrics.jsonl``'s ``gating/accepted``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np


class CapacityError(ValueError):
    pass


def parse_nets(text: str) -> list[tuple[int, int]]:
    """'32x2,64x4' -> [(32, 2), (64, 4)] (filters, residual blocks)."""
    out = []
    for part in text.split(","):
        f, _, b = part.strip().partition("x")
        if not (f.isdigit() and b.isdigit() and int(f) > 0):
            raise CapacityError(f"--nets: {part.strip()!r} is not FILTERSxBLOCKS "
                                "(e.g. 32x2,64x4)")
        out.append((int(f), int(b)))
    return out


def split_ring(obs, policy, z, size: int, ptr: int, held_out: int):
    """The examples of one replay ring (arrays of its capacity, ``size`` of them
    filled, the next written at ``ptr``) as (train, held-out), each (obs, policy,
    z) in the order written: the held-out part is the newest ``held_out``."""
    capacity = len(z)
    if size < 2:
        raise CapacityError(f"the ring holds {size} examples: too few to hold any out "
                            f"(let the run play on, or pick another --ring)")
    if not 0 < held_out < size:
        raise CapacityError(f"--held-out must be between 1 and the ring's {size - 1} "
                            f"examples but one; got {held_out}")
    # The ring's examples from the oldest to the newest.
    order = (np.arange(size) + (ptr - size)) % capacity
    parts = [order[:size - held_out], order[size - held_out:]]
    return tuple((obs[i], policy[i], z[i]) for i in parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.capacity",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a self-play run directory with a checkpoint")
    p.add_argument("--nets", default="32x2,64x4", help="FILTERSxBLOCKS, comma-separated")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--held-out", type=int, default=10000)
    p.add_argument("--ring", type=int, default=0)
    p.add_argument("--step", type=int, default=None, help="the checkpoint (default: latest)")
    p.add_argument("--learning-rate", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--best", action="store_true",
                   help="also measure the run's best nets (the checkpoint's) on the held-out "
                        "examples")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    args = p.parse_args(argv)
    try:
        nets = parse_nets(args.nets)
        if args.steps < 1 or args.eval_every < 1:
            raise CapacityError("--steps and --eval-every must be >= 1")
        result = measure(args.run, nets, args.steps, args.eval_every, args.held_out,
                         args.ring, args.step, args.learning_rate, args.seed, args.best,
                         log=lambda text: print(text, file=sys.stderr, flush=True))
    except (CapacityError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(report(result))
    return 0


def summed_losses(nets, variables, obs, policy, z):
    """The value and policy losses of one net (``variables`` stacked [1, ...]) summed
    over a chunk of examples, with its running statistics."""
    import jax.numpy as jnp

    from agz_jax.nets.networks import unstack
    from agz_jax.training.train import loss_terms

    logits, value = nets.apply_one(unstack(variables, 0), obs.astype(jnp.float32))
    v, pl = loss_terms(logits, value, policy, z)
    return v * len(z), pl * len(z)


def measure(run_dir: Path, specs: list[tuple[int, int]], steps: int, eval_every: int,
            held_out: int, ring: int, step: int | None = None,
            learning_rate: float | None = None, seed: int = 0, best: bool = False,
            log=None) -> dict:
    """The table (see the module); ``log(text)``, if given, hears each point as it
    is measured."""
    import jax
    import jax.numpy as jnp

    from agz_jax.nets import checkpoint
    from agz_jax.nets.networks import Networks, make_networks
    from agz_jax.training import replay, run
    from agz_jax.training.train import init_train_state, sgd

    if not (run_dir / "config.json").exists():
        raise CapacityError(f"{run_dir} is not a self-play run (no config.json)")
    config = checkpoint.read_config(run_dir)
    if config.net.colour_heads:
        raise CapacityError("a run with colour_heads keeps both colours for one net; "
                            "this measures Double Networks or single-net runs")
    comps = run.build(config)
    abstract = {"replay": jax.eval_shape(lambda: replay.init_for(comps.nets, comps.rules,
                                                                 config.replay.capacity))}
    if best:
        abstract["best"] = jax.eval_shape(comps.nets.init, jax.random.PRNGKey(0))
    fields, at = checkpoint.restore_fields(run_dir, abstract, step=step)
    buf = jax.tree.map(np.asarray, fields["replay"])
    if not 0 <= ring < buf.z.shape[0]:
        raise CapacityError(f"--ring must be below the run's {buf.z.shape[0]} rings")
    train_part, test_part = split_ring(buf.obs[ring], buf.policy[ring], buf.z[ring],
                                       int(buf.size[ring]), int(buf.ptr[ring]), held_out)
    n_train = len(train_part[2])
    train_buf = replay.Buffer(*(jnp.asarray(x)[None] for x in train_part),
                              size=jnp.array([n_train], jnp.int32),
                              ptr=jnp.array([0], jnp.int32))
    cfg = config.train if learning_rate is None else dataclasses.replace(
        config.train, learning_rate=learning_rate)
    base = make_networks(config.net, board_size=config.game.size, features=config.features).module
    losses = jax.jit(summed_losses, static_argnums=0)

    def held_out_losses(nets, variables) -> dict:
        """Mean value and policy loss of one net (``variables`` stacked [1, ...]) over
        every held-out example."""
        total = np.zeros(2)
        for lo in range(0, len(test_part[2]), 1000):
            chunk = (jnp.asarray(x[lo:lo + 1000]) for x in test_part)
            total += np.array(jax.device_get(losses(nets, variables, *chunk)))
        v, pl = total / len(test_part[2])
        return {"value_loss": float(v), "policy_loss": float(pl)}

    rows = []
    if best:
        nets = Networks(base, num_nets=1, features=config.features)
        mine = jax.tree.map(lambda x: x[ring:ring + 1] if comps.nets.num_nets == 2 else x,
                            fields["best"])
        rows.append({"net": f"{base.filters}x{base.blocks}", "params": nets.num_params(mine),
                     "trained": "the run's best", "curve": [
                         {"step": None, **held_out_losses(nets, mine)}]})
    for i, (filters, blocks) in enumerate(specs):
        nets = Networks(dataclasses.replace(base, filters=filters, blocks=blocks), num_nets=1,
                        features=config.features)
        key = jax.random.fold_in(jax.random.PRNGKey(seed), i)
        state = init_train_state(nets, cfg, key)
        curve = [{"step": 0, **held_out_losses(nets, state.variables)}]
        seconds = 0.0
        for done in range(0, steps, eval_every):
            n = min(eval_every, steps - done)
            start = time.perf_counter()
            state, _ = sgd(nets, cfg, state, train_buf, jax.random.fold_in(key, done + 1), n)
            jax.block_until_ready(state.variables)
            seconds += time.perf_counter() - start
            curve.append({"step": done + n, **held_out_losses(nets, state.variables)})
            if log:
                log(f"{filters}x{blocks} step {done + n}: value loss "
                    f"{curve[-1]['value_loss']:.4f}, policy loss {curve[-1]['policy_loss']:.4f}"
                    f" ({seconds:.0f} s)")
        rows.append({"net": f"{filters}x{blocks}", "params": nets.num_params(state.variables),
                     "trained": "fresh", "train_seconds": round(seconds, 1), "curve": curve})
    return {"run": str(run_dir), "checkpoint": int(at), "ring": ring, "train_examples": n_train,
            "held_out": held_out, "batch_size": cfg.batch_size,
            "learning_rate": cfg.learning_rate, "seed": seed, "nets": rows}


def report(result: dict) -> str:
    lines = [f"{result['run']} checkpoint {result['checkpoint']}, ring {result['ring']}: "
             f"{result['train_examples']} examples to train on, the newest "
             f"{result['held_out']} held out; batch {result['batch_size']}, "
             f"lr {result['learning_rate']:g}, seed {result['seed']}",
             f"{'net':>6} {'params':>8} {'step':>6} {'value loss':>11} {'policy loss':>12}"]
    for row in result["nets"]:
        for point in row["curve"]:
            step = point["step"] if point["step"] is not None else "best"
            lines.append(f"{row['net']:>6} {row['params']:>8} {step:>6} "
                         f"{point['value_loss']:>11.4f} {point['policy_loss']:>12.4f}")
        if row["trained"] == "fresh":
            lines.append(f"{'':>6} trained in {row['train_seconds']} s")
        else:
            lines.append(f"{'':>6} the run's best nets, as the checkpoint holds them")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
