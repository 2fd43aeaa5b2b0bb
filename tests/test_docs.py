"""The README and docs cannot drift from the code.

- Every relative Markdown link in README.md, docs/**/*.md and the model cards
  names a file or folder that exists (``#anchor`` stripped; http(s), mailto and
  anchor-only links skipped); a link's ``#anchor`` into a Markdown file names
  one of its headings (GitHub's slugs).
- Every command that README.md (and the docs and model cards) shows, in a
  code block (fenced, or indented and starting like a command) or in inline
  code: ``python -m MODULE`` names a module that ``python -m`` can run, and every
  ``--flag`` on the same command line is one that the command's ``--help``
  lists (for ``python -m experiments.training.campaign export ...``, the subcommand's);
  the same for the console scripts of pyproject.toml (``pbrain-agz``); ``make
  TARGET`` names a target of the Makefile (read at test time), and the flags in
  its ``ARGS=...`` are the flags of the module the target's recipe runs.

The ``--help`` texts come from one subprocess that runs each command with
``--help`` through ``runpy`` (what ``python -m`` does), so jax is imported once.
The checkers are plain functions of a text; the last tests feed them a small
made-up README with a broken link, an unknown flag, module and make target.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def doc_files() -> list[Path]:
    """README.md, every Markdown file under docs/ and the model cards."""
    return [README, *sorted((ROOT / "docs").rglob("*.md")),
            *sorted(ROOT.glob("models/*/MODEL_CARD.md"))]


def label(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


# ----------------------------------------------------------------------- Markdown text

FENCE = re.compile(r"^ {0,3}(```+|~~~+)")
INLINE = re.compile(r"(`+)(.+?)\1", re.S)
SHELL_START = re.compile(r"(\$ |(?:\S*/)?python[\d.]*\s|make\b|bash\s|for\s|[A-Z_]+=\S*\s|"
                         r"\S*/\S*\s|[\w.-]+-agz\b)")


def split_code(text: str, blank_inline: bool = True
               ) -> tuple[str, list[tuple[int, str]], list[tuple[int, str]]]:
    """(prose, block lines, inline spans) of a Markdown text.

    prose is the text with fenced blocks and (with blank_inline) inline code
    blanked (same line numbers, so links found in it keep theirs); block lines are (line number,
    line) of the fenced code blocks; inline spans are (line number, code) with
    a span's line breaks as spaces. Line numbers count from 1.
    """
    lines = text.split("\n")
    blocks: list[tuple[int, str]] = []
    fence = None
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * 3
            lines[i] = ""
        elif fence is not None:
            if line.lstrip().startswith(fence):
                fence = None
            else:
                blocks.append((i + 1, line))
            lines[i] = ""
    # Indented code blocks: after a blank line, lines indented by 4 or more whose
    # first one starts like a shell command (in a list, such lines can be prose).
    i = 0
    while i < len(lines):
        if (lines[i].startswith(("    ", "\t")) and (i == 0 or not lines[i - 1].strip())
                and SHELL_START.match(lines[i].strip())):
            while i < len(lines) and (lines[i].startswith(("    ", "\t"))
                                      or not lines[i].strip()):
                if lines[i].strip():
                    blocks.append((i + 1, lines[i]))
                lines[i] = ""
                i += 1
        i += 1
    blocks.sort()
    prose = "\n".join(lines)
    spans = []
    for m in INLINE.finditer(prose):
        spans.append((prose.count("\n", 0, m.start()) + 1, " ".join(m.group(2).split())))
    if blank_inline:
        prose = INLINE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)
    return prose, blocks, spans


# ----------------------------------------------------------------------------- links

LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of the inline links and images outside code."""
    prose, _, _ = split_code(text)
    return [(prose.count("\n", 0, m.start()) + 1, m.group(1)) for m in LINK.finditer(prose)]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text, lower case, punctuation dropped,
    spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    keep = "".join(c for c in text if c.isalnum() or c in "-_ "
                   or unicodedata.category(c).startswith("M"))
    return keep.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown text's headings (a repeated one as -1, -2, ...)."""
    prose, _, _ = split_code(text, blank_inline=False)  # code in a heading is its text
    seen: dict[str, int] = {}
    out = set()
    for line in prose.split("\n"):
        m = re.match(r" {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    out |= set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return out


def external(target: str) -> bool:
    return re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) is not None  # http:, mailto:, ...


def check_links(text: str, base: Path, where: str, root: Path = ROOT) -> list[str]:
    """Problems of the relative links of a Markdown text whose file is in ``base``."""
    problems = []
    for line, target in links(text):
        if external(target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0].split("?", 1)[0]
        resolved = (base / path).resolve()
        if not resolved.exists():
            problems.append(f"{where}:{line}: link to {target!r}: {label(resolved)} does "
                            "not exist")
        elif not resolved.is_relative_to(root):
            problems.append(f"{where}:{line}: link to {target!r} leaves the repository")
    return problems


def check_anchors(text: str, base: Path, where: str) -> list[str]:
    """Problems of the ``#anchor`` parts of links into Markdown files (this one
    included)."""
    problems = []
    for line, target in links(text):
        if external(target) or "#" not in target:
            continue
        path, anchor = target.split("#", 1)
        file = (base / path).resolve() if path else None
        if file is not None and (file.suffix != ".md" or not file.is_file()):
            continue  # a missing file is check_links's finding
        known = anchors(file.read_text() if file else text)
        if anchor not in known:
            near = difflib.get_close_matches(anchor, sorted(known), n=1)
            hint = f" (a heading's is {near[0]!r})" if near else ""
            problems.append(f"{where}:{line}: link to {target!r}: no heading with anchor "
                            f"#{anchor} in {label(file) if file else where}{hint}")
    return problems


# -------------------------------------------------------------------------- commands

@dataclass
class Command:
    """One command shown in a Markdown text."""

    line: int
    text: str  # the command as shown, for messages
    kind: str  # "module" (python -m), "script" (a console script), "make"
    name: str  # the module, script or first make target
    args: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)  # make only
    assigns: dict[str, str] = field(default_factory=dict)  # make only


PYTHON = re.compile(r"(?:.*/)?python(?:3(?:\.\d+)?)?$|\$\(PY\)$")
SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", ";;", "|&"}


def _tokens(code: str) -> list[str]:
    code = re.sub(r"(^|\s)#.*$", "", code)  # a shell comment
    lexer = shlex.shlex(code, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote: prose, not a command
        return code.split()


def _logical_lines(block: list[tuple[int, str]]) -> Iterable[tuple[int, str]]:
    """A code block's lines with backslash continuations joined; a ``$ `` prompt
    dropped."""
    start, parts = None, []
    for number, line in block:
        if start is None:
            start = number
        parts.append(line.rstrip()[:-1] if line.rstrip().endswith("\\") else line)
        if not line.rstrip().endswith("\\"):
            yield start, re.sub(r"^\s*\$ ", "", " ".join(parts))
            start, parts = None, []
    if parts:
        yield start, " ".join(parts)


def parse_commands(code: str, line: int, scripts: dict[str, str]) -> list[Command]:
    """The python -m, console-script and make commands of one line of shell."""
    tokens = _tokens(code)
    out = []
    pieces: list[list[str]] = [[]]
    for token in tokens:
        if token in SEPARATORS:
            pieces.append([])
        else:
            pieces[-1].append(token)
    for piece in pieces:
        while piece and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", piece[0]):
            piece = piece[1:]  # VAR=value before the command
        while piece and piece[0] in {"do", "then", "else", "sudo", "time", "exec", "nice"}:
            piece = piece[1:]
        if not piece:
            continue
        shown = " ".join(piece)
        m = next((i for i, t in enumerate(piece[:-1]) if t == "-m" and i > 0
                  and PYTHON.match(piece[i - 1])), None)
        if m is not None:
            out.append(Command(line, shown, "module", piece[m + 1], piece[m + 2:]))
        elif Path(piece[0]).name in scripts:
            out.append(Command(line, shown, "script", Path(piece[0]).name, piece[1:]))
        elif piece[0] == "make":
            assigns = dict(t.split("=", 1) for t in piece[1:] if "=" in t
                           and not t.startswith("-"))
            targets = [t for t in piece[1:] if "=" not in t and not t.startswith("-")]
            out.append(Command(line, shown, "make", targets[0] if targets else "", [],
                               targets, assigns))
    return out


def commands(text: str, scripts: dict[str, str]) -> list[Command]:
    """Every command of a Markdown text's code blocks and inline code."""
    _, block_lines, spans = split_code(text)
    blocks: list[list[tuple[int, str]]] = []
    for number, line in block_lines:
        if blocks and blocks[-1][-1][0] == number - 1:
            blocks[-1].append((number, line))
        else:
            blocks.append([(number, line)])
    out = []
    for block in blocks:
        for number, line in _logical_lines(block):
            out += parse_commands(line, number, scripts)
    for number, code in spans:
        out += parse_commands(code, number, scripts)
    return out


def flags(args: Iterable[str]) -> list[str]:
    """The long flags among a command's arguments, as a parser spells them (a
    dotted flag's underscores as hyphens, as agz_jax.training.cli reads them)."""
    out = []
    for arg in args:
        if arg == "--":
            break
        if re.match(r"--[A-Za-z]", arg):
            name = arg.split("=", 1)[0]
            out.append(name.replace("_", "-") if "." in name else name)
    return out


def subcommand(args: list[str]) -> str | None:
    """A first argument that may be a subcommand (a lower-case word)."""
    return args[0] if args and re.fullmatch(r"[a-z][a-z0-9_-]*", args[0]) else None


def runnable(module: str) -> bool:
    """Whether ``python -m module`` finds something to run (from the repository root)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(module + ".__main__")
    except (ImportError, ValueError):
        return False
    return spec is not None


def ours(module: str) -> bool:
    return module.split(".")[0] in {"experiments", "agz_jax"}


@dataclass
class Makefile:
    targets: set[str]
    modules: dict[str, str]  # target -> the python module its recipe runs

    @classmethod
    def read(cls, text: str) -> Makefile:
        targets, modules, current = set(), {}, []
        for line in text.split("\n"):
            if line.startswith("\t"):
                m = re.search(r"-m\s+([A-Za-z_][\w.]*)", line)
                for target in current:
                    if m and target not in modules:
                        modules[target] = m.group(1)
                continue
            m = re.match(r"([^\s:#=$][^:#=]*?)\s*::?(?![=])(.*)$", line)
            if m and not re.match(r"\s*[:+?!]?=", line[m.end(1):]):
                current = [t for t in m.group(1).split() if not t.startswith(".")]
                targets |= set(current)
            elif line.strip() and not line.startswith("#"):
                current = []
        return cls(targets, modules)


def check_commands(text: str, where: str, help_flags: Callable[[str, str | None], set[str]],
                   makefile: Makefile, scripts: dict[str, str]) -> list[str]:
    """Problems of the commands a Markdown text shows.

    help_flags(module_or_entry, subcommand) is the set of flags that the
    command's ``--help`` lists; scripts maps a console script to its entry point.
    """
    problems = []

    def check_flags(cmd: Command, target: str, args: list[str], what: str) -> None:
        known = help_flags(target, subcommand(args))
        for flag in dict.fromkeys(flags(args)):
            if flag not in known:
                near = difflib.get_close_matches(flag, sorted(known), n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                problems.append(f"{where}:{cmd.line}: `{cmd.text}`: {what} has no flag "
                                f"{flag}{hint}")

    for cmd in commands(text, scripts):
        if cmd.kind == "module":
            if not runnable(cmd.name):
                problems.append(f"{where}:{cmd.line}: `{cmd.text}`: no module {cmd.name} "
                                "to run with python -m")
            elif ours(cmd.name):
                check_flags(cmd, cmd.name, cmd.args, f"python -m {cmd.name}")
        elif cmd.kind == "script":
            check_flags(cmd, scripts[cmd.name], cmd.args, cmd.name)
        else:
            if not cmd.targets:
                continue  # plain `make`: the first target
            for target in cmd.targets:
                if target not in makefile.targets:
                    near = difflib.get_close_matches(target, sorted(makefile.targets), n=1)
                    hint = f" (did you mean {near[0]}?)" if near else ""
                    problems.append(f"{where}:{cmd.line}: `{cmd.text}`: the Makefile has no "
                                    f"target {target}{hint}")
            module = makefile.modules.get(cmd.targets[0])
            if "ARGS" in cmd.assigns and module and ours(module):
                check_flags(cmd, module, _tokens(cmd.assigns["ARGS"]),
                            f"python -m {module} (make {cmd.targets[0]}'s ARGS)")
    return problems


# --------------------------------------------------------------------- --help texts

HELP_RUNNER = r"""
import contextlib, importlib, io, json, runpy, signal, sys
sys.path.insert(0, ".")
def too_long(signum, frame):  # a command that does not stop at --help
    raise TimeoutError("still running after 30 s: does it read --help?")
signal.signal(signal.SIGALRM, too_long)
out = {}
for key, target, sub in json.loads(sys.argv[1]):
    buf = io.StringIO()
    argv, sys.argv = sys.argv, [target] + ([sub] if sub else []) + ["--help"]
    signal.alarm(30)
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            if ":" in target:  # a console script's entry point, module:function
                module, func = target.split(":")
                getattr(importlib.import_module(module), func)()
            else:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    except Exception as e:
        buf.write(f"\n{type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
        sys.argv = argv
    out[key] = buf.getvalue()
print("\nHELP-JSON " + json.dumps(out))
"""


def help_texts(jobs: set[tuple[str, str | None]], timeout: float = 120) -> dict:
    """{(target, subcommand): its --help text}, from one subprocess."""
    keyed = [[f"{t}|{s or ''}", t, s] for t, s in sorted(jobs, key=str)]
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    try:
        done = subprocess.run([sys.executable, "-c", HELP_RUNNER, json.dumps(keyed)],
                              cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the --help of {len(keyed)} commands took over {timeout:.0f} s")
    marker = done.stdout.rfind("\nHELP-JSON ")
    assert marker >= 0, f"the --help runner failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    texts = json.loads(done.stdout[marker + len("\nHELP-JSON "):])
    return {(t, s): texts[k] for k, t, s in keyed}


def known_flags(help_text: str) -> set[str]:
    return set(re.findall(r"--[A-Za-z][\w.-]*", help_text))


def console_scripts() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(project.get("scripts", {}))


@pytest.fixture(scope="module")
def project():
    """(makefile, scripts, help_flags) of the repository as it is now."""
    makefile = Makefile.read((ROOT / "Makefile").read_text())
    scripts = console_scripts()
    jobs = set()
    for cmd in (c for path in doc_files() for c in commands(path.read_text(), scripts)):
        if cmd.kind == "module" and ours(cmd.name) and runnable(cmd.name):
            jobs.add((cmd.name, subcommand(cmd.args)))
        elif cmd.kind == "script":
            jobs.add((scripts[cmd.name], subcommand(cmd.args)))
        elif cmd.kind == "make" and "ARGS" in cmd.assigns and cmd.targets:
            module = makefile.modules.get(cmd.targets[0])
            if module and ours(module):
                jobs.add((module, subcommand(_tokens(cmd.assigns["ARGS"]))))
    texts = help_texts(jobs)

    def help_flags(target: str, sub: str | None) -> set[str]:
        text = texts[(target, sub)]
        shown = " ".join(filter(None, [target, sub, "--help"]))
        assert "usage:" in text, f"`{shown}` printed no argparse usage:\n{text[-2000:]}"
        return known_flags(text)

    return makefile, scripts, help_flags


# ------------------------------------------------------------------------------ tests

def test_relative_links_name_existing_files():
    problems = []
    for path in doc_files():
        problems += check_links(path.read_text(), path.parent, label(path))
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_link_anchors_name_headings():
    problems = []
    for path in doc_files():
        problems += check_anchors(path.read_text(), path.parent, label(path))
    assert not problems, "links to missing headings:\n" + "\n".join(problems)


def test_readme_commands_exist(project):
    makefile, scripts, help_flags = project
    problems = check_commands(README.read_text(), "README.md", help_flags, makefile, scripts)
    assert not problems, "README.md shows commands the code does not have:\n" + "\n".join(
        problems)


def test_doc_commands_exist(project):
    """The same for the commands in docs/ and the model cards."""
    makefile, scripts, help_flags = project
    problems = []
    for path in doc_files()[1:]:
        problems += check_commands(path.read_text(), label(path), help_flags, makefile,
                                   scripts)
    assert not problems, "the docs show commands the code does not have:\n" + "\n".join(
        problems)


def test_readme_shows_commands():
    """The checker sees the README's commands (a parser that found none would pass)."""
    found = commands(README.read_text(), console_scripts())
    kinds = {c.kind for c in found}
    modules = {c.name for c in found if c.kind == "module"}
    assert kinds == {"module", "script", "make"}, kinds
    assert {"experiments.selfplay", "experiments.play.outside",
            "agz_jax.play.brain"} <= modules, modules
    assert any("--turn-ms" in c.args for c in found)  # and their flags


FAKE_README = """\
# fake

See [the design](docs/design.md), [nothing](docs/no-such-page.md#top) and
[a heading](docs/design.md#no-such-heading), [web](https://example.org/x.md).

```sh
python -m experiments.selfplay --preset cpu --search.num-simulations 32 \\
    --no-such-flag 3           # a comment: --not-a-flag
python -m experiments.no_such_module --x
make selfplay ARGS="--iterations 3 --zzz-qqq"
make no-such-target
```

Or `python -m experiments.training.campaign status --model campaign --devcie cpu` and
`pbrain-agz --modle default`.
"""


def fake_help(target: str, sub: str | None) -> set[str]:
    return {("experiments.selfplay", None): {"--preset", "--out", "--iterations",
                                             "--search.num-simulations"},
            ("experiments.training.campaign", "status"): {"--model"},
            ("agz_jax.play.brain:main", None): {"--model", "--sims"}}[(target, sub)]


def test_checkers_catch_drift():
    links_found = check_links(FAKE_README, ROOT, "FAKE.md")
    assert links_found == ["FAKE.md:3: link to 'docs/no-such-page.md#top': "
                           "docs/no-such-page.md does not exist"]
    anchors_found = check_anchors(FAKE_README, ROOT, "FAKE.md")
    assert len(anchors_found) == 1 and "#no-such-heading" in anchors_found[0]
    assert anchors_found[0].startswith("FAKE.md:4: ")

    makefile = Makefile.read("PY := x\nselfplay: $(STAMP)\n\t$(PY) -m experiments.selfplay "
                             "--preset cpu $(ARGS)\ntest: install\n\tpytest\n")
    assert makefile.targets == {"selfplay", "test"}
    problems = check_commands(FAKE_README, "FAKE.md", fake_help, makefile,
                              {"pbrain-agz": "agz_jax.play.brain:main"})
    assert problems == [
        "FAKE.md:7: `python -m experiments.selfplay --preset cpu --search.num-simulations 32 "
        "--no-such-flag 3`: python -m experiments.selfplay has no flag --no-such-flag",
        "FAKE.md:9: `python -m experiments.no_such_module --x`: no module "
        "experiments.no_such_module to run with python -m",
        "FAKE.md:10: `make selfplay ARGS=--iterations 3 --zzz-qqq`: python -m "
        "experiments.selfplay (make selfplay's ARGS) has no flag --zzz-qqq",
        "FAKE.md:11: `make no-such-target`: the Makefile has no target no-such-target",
        "FAKE.md:14: `python -m experiments.training.campaign status --model campaign "
        "--devcie cpu`: python -m experiments.training.campaign has no flag --devcie",
        "FAKE.md:15: `pbrain-agz --modle default`: pbrain-agz has no flag --modle "
        "(did you mean --model?)",
    ], problems


def test_markdown_pieces():
    assert slug("The second GPU window (run 36, 2026-11-27, one NVIDIA H100)") == (
        "the-second-gpu-window-run-36-2026-11-27-one-nvidia-h100")
    assert slug("`models/curriculum` against the mentors (the paper's Fig. 4)") == (
        "modelscurriculum-against-the-mentors-the-papers-fig-4")
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}
    text = "x `python -m\nagz_jax.play.brain --sims 4` y\n\n```\nmake a \\\n  b  # c\n```\n"
    found = commands(text, {})
    assert [(c.line, c.kind, c.name, c.args, c.targets) for c in found] == [
        (5, "make", "a", [], ["a", "b"]), (1, "module", "agz_jax.play.brain", ["--sims", "4"], [])]
    indented = "para\n\n    python -m a.b --c \\\n        --d\n\n    | x |\n- item\n\n    text\n"
    assert [(c.line, c.name, c.args) for c in commands(indented, {})] == [
        (3, "a.b", ["--c", "--d"])]
    assert flags(["--a.b_c=1", "--d_e", "x", "-n", "--", "--f"]) == ["--a.b-c", "--d_e"]
    makefile = Makefile.read(".PHONY: a b\nV := 1\nW ?= 2\na b: c\n\t$(PY) -m m.n $(ARGS)\n"
                             "$(STAMP): x\n\ttouch y\n# c: d\nrapfi:\n\techo\n")
    assert makefile.targets == {"a", "b", "rapfi"}
    assert makefile.modules == {"a": "m.n", "b": "m.n"}
