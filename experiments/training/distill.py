r"""Distil a model's nets into nets of other sizes (``agz_jax.training.distill``).

    python -m experiments.training.distill --teacher models/default --net-preset 6x64 \
        --out runs/distill-6x64
    python -m experiments.selfplay --preset campaign --net-preset 6x64 \
        --init-from runs/distill-6x64 --out runs/campaign-6x64
    python -m experiments.training.distill --net-presets        # the presets' sizes and parameters

The teacher (a model name or directory, or a run directory: its best nets)
plays ``--games`` games against itself from the openings of its config (the
balanced set; ``--openings`` names another, '' the empty board), by its raw
policy at ``--temperature`` or, with ``--simulations N``, by the main job's
self-play with its search at N simulations a move. A student of the sizes of
``--net-preset`` (or ``--net.blocks``, ``--net.filters``, ``--net.value-hidden``;
its other net options, board and features are the teacher's) is trained
``--epochs`` passes over those positions to the teacher's move probabilities
(``--policy-target search``: its search's policy) and value, under the 8
symmetries, each of its nets by the teacher's net of the same colour. Before
training and after every epoch, ``RUN_DIR/metrics.jsonl`` gets the student's
agreement with the teacher on the positions of ``--held-out-games`` other
games: ``held_out/top1`` (the student's top move is the teacher's),
``held_out/value_mse`` and ``held_out/policy_kl``, over all of them and per
colour to move. ``RUN_DIR`` is then a model directory (``config.json``: the
teacher's config with the student's sizes; ``variables.msgpack``), rewritten
after every epoch, so the main job's ``--init-from RUN_DIR`` starts a campaign
from it at any point; ``distill.json`` records the teacher, the settings, the
games and the result.

A CPU smoke run (about two minutes on 2 cores):

    python -m experiments.training.distill --teacher models/default --net-preset 6x64 \
        --out runs/distill-smoke --games 64 --held-out-games 16 --games-per-batch 32 \
        --epochs 2 --batch-size 64

The GPU window's settings are in docs/nets.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agz_jax.config import files, presets
from agz_jax.config.schema import ConfigError
from agz_jax.training import cli

SIZE_FLAGS = {"net.blocks": "residual blocks of the student (the paper: 2)",
              "net.filters": "filters of the student's conv layers (the paper: 32)",
              "net.value_hidden": "units of the student's value hidden layer (the paper: 32)"}


def parser() -> argparse.ArgumentParser:
    from agz_jax.training.distill import Settings

    p = cli.ArgumentParser(
        prog="python -m experiments.training.distill", description=__doc__, allow_abbrev=False,
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(
            prog, max_help_position=8, width=100))
    p.add_argument("--teacher", default=None, metavar="MODEL",
                   help="the nets to distil: a model name or directory, or a run directory")
    p.add_argument("--out", type=Path, default=None, metavar="RUN_DIR",
                   help="a new directory for the student (a model directory)")
    p.add_argument("--net-preset", default=None, metavar="NAME", help=presets.NET_PRESET_HELP)
    for dest, text in SIZE_FLAGS.items():
        p.add_argument("--" + dest.replace("_", "-"), dest=dest, type=int,
                       default=argparse.SUPPRESS, metavar="N", help=text)
    p.add_argument("--net-presets", action="store_true",
                   help="print the net presets' sizes and parameter counts (on the teacher's "
                        "board, else 15x15) and exit")
    defaults = Settings()
    docs = cli.field_docs(Settings)
    kinds = {int: "N", float: "X", str: "TEXT"}
    for name, value in vars(defaults).items():
        kind = {"openings": str}.get(name, type(value))
        shown = "the teacher's openings.path" if name == "openings" else value
        metavar = "{net,search}" if name == "policy_target" else kinds[kind]
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, default=value,
                       metavar=metavar, help=f"{docs[name]} (default: {shown})")
    return p


def parse(argv: list[str]):
    """(args, settings, teacher, student config) or ConfigError (one line), before
    anything compiles."""
    from agz_jax.nets import models
    from agz_jax.training import distill

    args = cli.parse_known(parser(), argv)
    if args.net_presets:
        return args, None, None, None
    if args.teacher is None:
        raise ConfigError("--teacher MODEL is needed: the nets to distil (a model name or "
                          "directory, or a run directory)")
    if args.out is None:
        raise ConfigError("--out RUN_DIR is needed: a new directory for the student")
    check_out(args.out)
    given = {k: v for k, v in vars(args).items() if k in SIZE_FLAGS}
    sizes = presets.net_preset_overrides(args.net_preset, given) | given
    if not sizes:
        names = ", ".join(presets.NET_PRESETS)
        raise ConfigError(f"give the student's size: --net-preset NAME ({names}) or "
                          "--net.blocks, --net.filters and --net.value-hidden")
    settings = distill.Settings(**{f: getattr(args, f) for f in vars(distill.Settings())})
    settings.check()
    try:
        teacher = models.load(args.teacher)
    except models.ModelError as e:
        raise ConfigError(f"--teacher: {e}") from None
    distill.check_teacher(teacher.config)
    config = distill.student_config(teacher.config, sizes)
    if settings.openings is not None:
        files.opening_set(config.replace(**{"openings.path": settings.openings}))  # fits the board
    return args, settings, teacher, config


def check_out(out: Path) -> None:
    """``--out`` must be a new or empty directory."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a new directory for the student")
    if out.is_dir() and any(out.iterdir()):
        held = sorted(p.name for p in out.iterdir())[0]
        raise ConfigError(f"--out {out} is not empty (it holds {held}): give a new directory "
                          "for the student")


def preset_table(teacher_config=None) -> str:
    """The net presets' sizes and parameters a net, on ``teacher_config``'s board
    and features (else the campaign preset's)."""
    from agz_jax.nets.networks import flops_per_position
    from agz_jax.training import distill

    base = teacher_config or presets.get_preset("campaign")
    size = base.game.size
    lines = [f"net presets on {size}x{size}, {base.features.channels} input planes "
             f"(BLOCKSxFILTERS):",
             f"{'name':>8} {'blocks':>6} {'filters':>7} {'value_hidden':>12} "
             f"{'parameters a net':>16} {'multiply-adds':>13}"]
    paper = None
    for name, sizes in presets.NET_PRESETS.items():
        cfg = base.replace(**presets.net_preset(name))
        flops = flops_per_position(size, sizes["filters"], sizes["blocks"],
                                   base.features.channels, sizes["value_hidden"])
        paper = paper or flops
        lines.append(f"{name:>8} {sizes['blocks']:>6} {sizes['filters']:>7} "
                     f"{sizes['value_hidden']:>12} {distill.parameters(cfg):>16,} "
                     f"{flops / paper:>12.1f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args, settings, teacher, config = parse(argv)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # --help
        return int(e.code or 0)
    if args.net_presets:
        try:
            from agz_jax.nets import models

            base = models.load(args.teacher).config if args.teacher else None
        except models.ModelError as e:
            print(f"error: --teacher: {e}", file=sys.stderr)
            return 2
        print(preset_table(base))
        return 0

    from agz_jax.base.cache import enable_compilation_cache

    enable_compilation_cache()
    from agz_jax.training import distill

    name = presets.net_preset_name(config.net)
    print(f"teacher {args.teacher}: {presets.net_size_text(teacher.config.net)}, "
          f"{distill.parameters(teacher.config):,} parameters a net; student "
          f"{presets.net_size_text(config.net)}"
          + (f" (--net-preset {name})" if name else "")
          + f", {distill.parameters(config):,} parameters a net; "
          f"{'double' if config.net.double else 'single'} nets, "
          f"{config.game.size}x{config.game.size}", flush=True)
    try:
        summary = distill.distil(teacher, config, settings, args.out,
                                 say=lambda text: print(text, flush=True))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not summary["written"]:
        print(f"error: --seconds {settings.seconds:g} ran out before the first SGD step "
              f"(the games took {summary['seconds']:.0f} s): no student written; give more "
              "--seconds or fewer --games", file=sys.stderr)
        return 1
    held = summary["held_out"]
    print(f"done: {summary['steps']} steps ({summary['epochs']} epochs) in "
          f"{summary['seconds']:.0f} s; held-out top-1 {held['top1']:.3f}, value MSE "
          f"{held['value_mse']:.4f}, policy KL {held['policy_kl']:.3f}; the student is in "
          f"{args.out} (--init-from {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
