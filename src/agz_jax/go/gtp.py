"""A minimal client for a Go engine speaking GTP (Go Text Protocol, version 2)
over a pipe, such as GnuGo 3.8 (``gnugo --mode gtp``).

Only what the referee needs: send one command, read its one response, raise
``GtpError`` on a ``?`` answer. Vertices use GTP's letters (A..T without I) and
numbers (1 at the bottom); ``agz_jax.go.rules.point``/``vertex`` convert.
"""

from __future__ import annotations

import shutil
import subprocess

GNUGO_PATHS = ("gnugo", "/usr/games/gnugo")
"""Where Debian's ``gnugo`` package puts the program (``/usr/games`` is not
always on PATH)."""


class GtpError(RuntimeError):
    """The engine answered ``?`` (or died)."""


def find_gnugo() -> str | None:
    """The path of the ``gnugo`` program, or None when it is not installed."""
    for name in GNUGO_PATHS:
        found = shutil.which(name)
        if found:
            return found
    return None


class GtpEngine:
    """One engine process. Use as a context manager, or call ``close``."""

    def __init__(self, argv: list[str]):
        self.argv = list(argv)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def send(self, command: str) -> str:
        """The response to ``command`` (without the leading ``= ``)."""
        if self.proc.poll() is not None:
            raise GtpError(f"{self.argv[0]} has exited (code {self.proc.returncode})")
        self.proc.stdin.write(command.strip() + "\n")
        self.proc.stdin.flush()
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise GtpError(f"{self.argv[0]} closed its output after {command!r}"
                               + self._exit_text())
            line = line.rstrip("\r\n")
            if not line and lines:
                break
            if line or lines:
                lines.append(line)
        text = "\n".join(lines)
        if text.startswith("?"):
            raise GtpError(f"{command!r}: {text[1:].strip()}")
        if not text.startswith("="):
            raise GtpError(f"{command!r}: not a GTP response: {text!r}")
        return text[1:].strip()

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc.poll() is None

    def _exit_text(self) -> str:
        """" (exit code N)" once the process has ended (waiting a moment for
        it), "" while it runs."""
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return ""
        return f" (exit code {code})"

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def gnugo(superko: bool = True, komi: float = 7.5, path: str | None = None) -> GtpEngine:
    """GnuGo 3.8 as a referee: Chinese (area) rules, suicide forbidden, and
    positional superko (or simple ko). Raises FileNotFoundError when absent."""
    path = path or find_gnugo()
    if path is None:
        raise FileNotFoundError("gnugo is not installed (Debian: apt-get install gnugo; "
                                "or `make gnugo` as root)")
    argv = [path, "--mode", "gtp", "--chinese-rules", "--forbid-suicide",
            "--positional-superko" if superko else "--simple-ko", "--komi", str(komi)]
    return GtpEngine(argv)
