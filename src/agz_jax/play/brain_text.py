"""The Piskvork protocol's text, for ``pbrain-agz`` (``agz_jax.play.brain``): reading
a line of at most ``MAX_LINE`` bytes from a binary stream (``read_line``), what
makes a line unreadable (``damage``), its command word and fields (ASCII words
and integers only, padded by spaces and tabs), and quoting input in a message.
Bad input raises ``ProtocolError``, whose message is sent as ``ERROR <message>``.
"""

from __future__ import annotations

import re

MAX_LINE = 4096  # bytes a line may hold, its line ending not counted


INT_DIGITS = 12  # the most digits an integer may have: more is out of range
INT = re.compile(rf"[+-]?[0-9]{{1,{INT_DIGITS}}}")  # ASCII digits only (fullmatch)
DIGITS = re.compile(r"[+-]?[0-9]+")  # an integer of any length (fullmatch)


WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")  # a command word (fullmatch): ASCII only


SPACE = " \t"  # the only padding stripped from lines and fields


class ProtocolError(Exception):
    """Bad input: the message is sent as ``ERROR <message>``."""


def parse_int(text: str, what: str) -> int:
    text = text.strip(SPACE)
    if not INT.fullmatch(text):
        if DIGITS.fullmatch(text):
            raise ProtocolError(f"{what} is out of range (at most {INT_DIGITS} digits), "
                                f"got {show(text)}")
        raise ProtocolError(f"{what} must be an integer, got {show(text)}")
    return int(text)


def parse_coords(arg: str, what: str, count: int = 2) -> list[int]:
    parts = arg.split(",")
    if len(parts) != count:
        raise ProtocolError(f"{what}: expected {count} comma-separated integers, got {show(arg)}")
    return [parse_int(p, what) for p in parts]


def split_command(line: str) -> tuple[str, str]:
    """A line stripped of spaces and tabs -> (its first word, the rest). A NUL,
    CR or LF ends the word too, so that a damaged line's command is known."""
    for i, c in enumerate(line):
        if c in " \t\r\n\x00":
            return line[:i], line[i:].strip(SPACE)
    return line, ""


def command_word(word: str) -> str | None:
    """The upper-cased command word, or None if it is not ASCII letters."""
    return word.upper() if WORD.fullmatch(word) else None


def damage(line: str) -> str | None:
    """What makes a line (without its line ending) unreadable, or None."""
    if "\x00" in line:
        return "the line contains a NUL byte"
    if "\r" in line:
        return "the line contains a CR (0x0d) inside it: lines end with LF or CR LF"
    if "\n" in line:
        return "the line contains an LF (0x0a) inside it"
    return None


def show(text: str, limit: int = 40) -> str:
    """A quoted, ASCII-only excerpt of input for a message."""
    return ascii(text if len(text) <= limit else text[:limit] + "...")


def one_line(text: str) -> str:
    """One line of printable ASCII, at most 500 characters."""
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())[:500]


def read_line(stream, limit: int = MAX_LINE) -> tuple[bytes, int] | None:
    """The next line of the binary ``stream`` without its ending (LF or CR LF),
    and its length in bytes; None at the end of input. At most ``limit`` bytes
    of a longer line are returned: the rest is read and dropped, never buffered."""
    chunk = stream.readline(limit + 2)
    if not chunk:
        return None
    first, total, tail = chunk, len(chunk), chunk[-2:]
    while not chunk.endswith(b"\n"):
        chunk = stream.readline(1 << 16)
        if not chunk:
            break
        total += len(chunk)
        tail = (tail + chunk)[-2:]
    ending = 0 if not tail.endswith(b"\n") else 2 if tail == b"\r\n" else 1
    length = total - ending
    return first[:min(length, limit)], length
