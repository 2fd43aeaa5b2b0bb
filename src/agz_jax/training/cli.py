"""What the training command lines share: config flags made from the config
dataclasses, the run directory (``--out``, ``--resume``, ``--resume-from``), and
override grids (``FIELD=V1,V2,...``: ``experiments.studies.sweep --set``,
``experiments.studies.movepred --grid/--set``).

Every field of a ``Config`` section the command uses is a dotted flag
(``--search.num-simulations 64``; ``--net.double`` / ``--net.no-double`` for a
bool; underscores work too), documented by the field's attribute docstring and
defaulting to the preset's (or, with ``--resume``, the run's own) value. There
is one parser and one usage block. Every mistake ends in a ``ConfigError``: a
one-line message that names the flag or field and the way out.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import difflib
import functools
import inspect
import itertools
import json
import os
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agz_jax.config import files
from agz_jax.config.presets import PRESETS, get_preset
from agz_jax.config.schema import Config, ConfigError

# The sections of the main job (``experiments.selfplay``); the curriculum also
# uses basic, imitate and curriculum.
RUN_SECTIONS = ("game", "net", "features", "search", "decay", "selfplay", "replay", "train",
                "gating", "eval", "parallel", "checkpoint", "openings")
ALL_SECTIONS = RUN_SECTIONS + ("basic", "imitate", "curriculum")


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a dataclass (the string after each field), as one
    paragraph each."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    docs = {}
    for stmt, after in zip(body, body[1:], strict=False):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs


def class_doc(cls: type) -> str:
    """The first paragraph of a class's docstring, as one line."""
    return " ".join((inspect.getdoc(cls) or "").split("\n\n")[0].split())


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are ConfigErrors (one line, no usage block)."""

    def error(self, message: str):
        raise ConfigError(f"{message} (--help lists the flags)")


class _Flag(argparse.Action):
    """``--a.b`` sets True, ``--a.no-b`` False."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, ".no-" not in option_string)


def _convert(kind: type, flag: str) -> Callable[[str], Any]:
    what = {int: "an integer", float: "a number", str: "a string"}[kind]

    def convert(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"wants {what}, got {text!r}") from None

    return convert


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return " ".join(map(str, value))
    return repr(value) if value == "" else str(value)


def _add_field(group, dest: str, f: dataclasses.Field, value: Any, doc: str) -> None:
    name = "--" + dest.replace("_", "-")
    help_text = f"{doc} (default: {_show(value)})".replace("%", "%%")
    kind = {"int": int, "float": float, "str": str, "bool": bool}.get(str(f.type))
    if kind is bool:
        section, _, leaf = name.rpartition(".")
        no = f"{section}.no-{leaf}" if section else f"--no-{leaf[2:]}"
        group.add_argument(name, no, action=_Flag, dest=dest, default=argparse.SUPPRESS,
                           help=help_text)
    elif kind is not None:
        check = f.metadata.get("check")
        choices = getattr(check, "choices", None)
        metavar = ("{" + ",".join(map(str, choices)) + "}" if choices
                   else {int: "N", float: "X", str: "TEXT"}[kind])
        group.add_argument(name, dest=dest, type=_convert(kind, name), metavar=metavar,
                           default=argparse.SUPPRESS, help=help_text)
    else:  # tuple[str, ...]
        group.add_argument(name, dest=dest, nargs="+", metavar="VALUE",
                           default=argparse.SUPPRESS, help=help_text)


def add_config_flags(parser: argparse.ArgumentParser, config: Config,
                     sections: Sequence[str]) -> list[str]:
    """A flag per field of ``config``'s top level and of ``sections``, its default
    shown from ``config``; returns the dotted names (the parsed namespace holds
    only the flags given, under those names)."""
    names = []
    top = parser.add_argument_group("run")
    docs = field_docs(Config)
    for f in dataclasses.fields(Config):
        if f.name not in ALL_SECTIONS:
            _add_field(top, f.name, f, getattr(config, f.name), docs[f.name])
            names.append(f.name)
    for section in sections:
        value = getattr(config, section)
        group = parser.add_argument_group(section, textwrap.fill(class_doc(type(value)), 94))
        docs = field_docs(type(value))
        for f in dataclasses.fields(value):
            dest = f"{section}.{f.name}"
            _add_field(group, dest, f, getattr(value, f.name), docs[f.name])
            names.append(dest)
    return names


def _normalise(argv: Sequence[str]) -> list[str]:
    """``--search.num_simulations=5`` -> ``--search.num-simulations=5`` (flags only)."""
    out = []
    for arg in argv:
        if arg.startswith("--") and "." in arg.split("=", 1)[0]:
            name, eq, value = arg.partition("=")
            arg = name.replace("_", "-") + eq + value
        out.append(arg)
    return out


def parse_known(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``parser.parse_args``, with an unknown flag named and a near one suggested."""
    args, rest = parser.parse_known_args(_normalise(argv))
    if rest:
        bad = rest[0]
        if bad.startswith("-"):
            flag = bad.split("=", 1)[0]
            known = sorted(set(re.findall(r"--[\w.-]+", parser.format_help())))
            near = difflib.get_close_matches(flag, known, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise ConfigError(f"unknown flag {flag}{hint}; --help lists the flags of this "
                              "command")
        raise ConfigError(f"unexpected argument {bad!r}; --help lists the flags")
    return args


def overrides(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The dotted fields given on the command line, with their values."""
    given = vars(args)
    return {name: tuple(given[name]) if isinstance(given[name], list) else given[name]
            for name in names if name in given}


# --------------------------------------------------------------------- run directories


@dataclasses.dataclass(frozen=True)
class RunCommand:
    """How a training command line reads its run directory and config.

    prog, doc: its name and module docstring (the help's description).
    default_preset: the preset without ``--preset``; default_out(preset) the
    directory without ``--out``. sections: the config sections it uses.
    resume_allows: fields (or whole sections) that may differ on ``--resume``.
    resume_from: offer ``--resume-from STEP``. own_flags: adds the command's
    other flags to the parser; shorthands(args): the dotted fields some of them
    set (``--stages`` is ``curriculum.stages``).
    """

    prog: str
    doc: str
    default_preset: str
    default_out: Callable[[str], Path]
    sections: tuple[str, ...] = RUN_SECTIONS
    resume_allows: tuple[str, ...] = ()
    resume_from: bool = False
    own_flags: Callable[[argparse.ArgumentParser], None] = lambda parser: None
    shorthands: Callable[[argparse.Namespace], dict] = lambda args: {}


def _common(parser: argparse.ArgumentParser, command: RunCommand) -> None:
    parser.add_argument("--preset", default=None, metavar="NAME",
                        help=f"one of {', '.join(sorted(PRESETS))} (default "
                             f"{command.default_preset}); the defaults shown below are its "
                             "values (with --resume, the run's own)")
    parser.add_argument("--out", type=Path, default=None, metavar="RUN_DIR",
                        help=f"run directory (default {command.default_out('PRESET')})")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out, with its own config.json")
    if command.resume_from:
        parser.add_argument("--resume-from", type=int, default=None, metavar="STEP",
                            help="--resume from checkpoint STEP of --out, not the latest: "
                                 "the later ones (say, a damaged one) move to RUN_DIR/damaged/")


def parse_run(command: RunCommand, argv: Sequence[str]) -> tuple[argparse.Namespace, Config]:
    """(args, config) of a training command line; ConfigError for any mistake.

    ``args.resume`` is set by ``--resume`` or ``--resume-from``; ``args.out``
    is filled in. With it, the config is the run's ``config.json`` and a given
    flag may change only ``command.resume_allows``.
    """
    from agz_jax.nets import checkpoint

    argv = list(argv)
    first = ArgumentParser(add_help=False, allow_abbrev=False)
    _common(first, command)
    early, _ = first.parse_known_args(_normalise(argv))
    resume = early.resume or getattr(early, "resume_from", None) is not None
    asks_help = "-h" in argv or "--help" in argv
    saved = None
    if resume:
        if early.out is None:
            raise ConfigError("--resume needs --out RUN_DIR, the run to continue")
        check_out(early.out)
        try:
            saved = checkpoint.read_config(early.out)
        except checkpoint.CheckpointError as e:
            if not asks_help:
                raise ConfigError(f"{e}; start it without --resume") from None
    base = saved or get_preset(early.preset or command.default_preset)

    resume_flags = "--resume | --resume-from STEP" if command.resume_from else "--resume"
    usage = (f"{command.prog} [--preset NAME] [--out RUN_DIR] [{resume_flags}] [options] "
             "[--SECTION.FIELD VALUE ...]")
    parser = ArgumentParser(
        prog=command.prog, usage=usage, description=command.doc, allow_abbrev=False,
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(
            prog, max_help_position=8, width=100))
    _common(parser, command)
    command.own_flags(parser)
    names = add_config_flags(parser, base, command.sections)
    args = parse_known(parser, argv)
    args.resume = resume
    given = overrides(args, names) | command.shorthands(args)
    config = base.replace(**given) if given else base
    if saved is not None:
        if args.preset is not None and get_preset(args.preset).first_difference(
                saved, allow=("iterations",)):
            raise ConfigError(f"--preset {args.preset} differs from the config of {args.out}; "
                              "--resume uses the run's own config (drop --preset)")
        field = config.first_difference(saved, allow=command.resume_allows)
        if field:
            flags = [f"--{a}.*" if a in ALL_SECTIONS else "--" + a.replace("_", "-")
                     for a in command.resume_allows]
            listed = ", ".join(flags[:-1]) + " and " * (len(flags) > 1) + flags[-1] if flags else ""
            may = (f"only {listed} may change on --resume" if flags
                   else "--resume uses the run's own config")
            raise ConfigError(f"{field} differs from the config saved in "
                              f"{args.out / 'config.json'}; {may}")
    if args.out is None:
        args.out = command.default_out(args.preset or command.default_preset)
    check_out(args.out)
    return args, files.check(config)  # the opening set read before anything compiles


# The exit status of a job stopped by Ctrl-C (128 + SIGINT, as a shell reports it);
# by SIGTERM (`kill`, `timeout`, a batch scheduler) it is 128 + SIGTERM.
INTERRUPTED = 130
TERMINATED = 143


class Interrupts:
    """Ctrl-C and SIGTERM that cannot be lost, and that never cut a checkpoint.

    Python delivers SIGINT as KeyboardInterrupt wherever the main thread is,
    and one raised inside a garbage-collection callback (jax registers one) is
    printed as "Exception ignored" and swallowed: the run went on as if Ctrl-C
    had not been pressed. Inside this context the handler also records the
    interrupt, and ``check()`` raises it again at a safe point (the main job:
    each iteration's start); the one swallowed is not printed, since it is not
    lost. SIGTERM, whose default is to die on the spot, is
    handled the same way, so ``kill`` or a ``timeout`` stops a run as Ctrl-C
    does. Inside ``deferred()`` (the main job: writing a checkpoint) a signal
    is only recorded, and raised by the next ``check()``: the write commits
    first. A second signal there raises at once, for whoever will not wait. A
    handler other than Python's default (a background job's SIGINT ignored) is
    left alone. ``status`` is the exit status the signal asks for."""

    def __init__(self) -> None:
        self.pending = False
        self.signum: int | None = None
        self._deferring = False
        self._previous: dict = {}
        self._unraisablehook = None

    @property
    def status(self) -> int:
        import signal

        return TERMINATED if self.signum == signal.SIGTERM else INTERRUPTED

    def _handle(self, signum, frame):
        again = self.pending
        self.pending, self.signum = True, signum
        if not self._deferring or again:
            raise KeyboardInterrupt

    def check(self) -> None:
        if self.pending:
            raise KeyboardInterrupt

    def _unraisable(self, unraisable) -> None:
        # The interrupt raised inside a finalizer or gc callback is recorded in
        # ``pending``: no "Exception ignored ... Traceback" for it.
        if not (self.pending and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            self._unraisablehook(unraisable)

    @contextlib.contextmanager
    def deferred(self):
        """A section that a (first) signal does not cut: it is raised by the
        next ``check()``."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False

    def __enter__(self) -> Interrupts:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            # Each signal with Python's default handler (and no other) is taken over.
            for sig, default in ((signal.SIGINT, signal.default_int_handler),
                                 (signal.SIGTERM, signal.SIG_DFL)):
                if signal.getsignal(sig) is default:
                    self._previous[sig] = signal.signal(sig, self._handle)
            if self._previous:
                self._unraisablehook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, *exc) -> None:
        import signal

        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}
        if self._unraisablehook is not None:
            sys.unraisablehook, self._unraisablehook = self._unraisablehook, None


def leave(status: int) -> None:
    """Exit a command with ``status``. After Ctrl-C or SIGTERM (``INTERRUPTED``,
    ``TERMINATED``) the command has already committed its checkpoint and written its
    logs, so it exits at once rather than wait for work still in flight on other
    threads (a device computation, a background writer)."""
    if status in (INTERRUPTED, TERMINATED):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


def check_out(out: Path) -> None:
    """``--out`` must be a directory, or not exist yet."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a directory for the run")


def out_file_problem(out: Path, force: bool) -> str | None:
    """What stops a command writing its file ``--out`` (None if nothing): a
    directory, an existing file without ``force``, or a file where a parent
    directory goes."""
    if out.is_dir():
        return "is a directory; give a file name"
    if out.exists() and not force:
        return "exists; give another file, or --force to replace it"
    blocker = file_in_the_way(out.parent)
    if blocker is not None:
        return f"{blocker} is a file, not a directory; give another --out"
    return None


def file_in_the_way(path: Path) -> Path | None:
    """The file that keeps ``path`` from being (or being made) a directory: ``path``
    itself or the nearest folder above it that exists, when that is a file; None
    when nothing is in the way."""
    for place in (path, *path.parents):
        if place.exists():
            return None if place.is_dir() else place
    return None


def damaged_way_out(error, flag: str = "--resume-from") -> str:
    """The one-line message of a ``checkpoint.DamagedCheckpoint``, with the way out."""
    if error.intact is None:
        return f"{error}: start the run again with another --out"
    return (f"{error}: continue from it with --out {error.run_dir} {flag} {error.intact} "
            f"(checkpoint {error.step} then moves to {error.run_dir / 'damaged'})")



# ------------------------------------------------------------------------ override grids


def parse_value(text: str):
    """A JSON scalar (``32``, ``0.95``, ``true``) or else the string itself."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, (int, float, bool, str)) else text


def parse_assignment(text: str, flag: str, split: bool = True) -> tuple[str, list]:
    """``"search.num_simulations=32,64"`` -> (``"search.num_simulations"``, [32, 64]);
    with ``split`` False the value is taken whole (``movepred.levels=0,2``: one value)."""
    form = "FIELD=V1[,V2...]" if split else "FIELD=VALUE"
    key, eq, values = text.partition("=")
    key = key.strip().replace("-", "_")
    parts = [v.strip() for v in values.split(",")] if split else [values.strip()]
    if not eq or not key or not all(parts):
        raise ConfigError(f"{flag} must be {form}, got {text!r}")
    return key, [parse_value(v) for v in parts]


def grid_points(axes: Sequence[tuple[str, Sequence]]) -> list[tuple[tuple[str, Any], ...]]:
    """Every combination of the axes' values as ``((field, value), ...)``, the last axis
    fastest; ``[()]`` without axes."""
    keys = [k for k, _ in axes]
    return [tuple(zip(keys, values, strict=True))
            for values in itertools.product(*(v for _, v in axes))]
