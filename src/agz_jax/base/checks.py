"""Declared checks of config values: a field says what its value must be
(``setting(default, check)``) and ``validate`` checks every such field of a
section, raising a ``ConfigError`` that names the field
(``search.num_simulations must be a positive integer, got 0``).
``agz_jax.config.schema`` declares its sections with them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ConfigError(ValueError):
    """A config value is out of range; the message names the field."""


def is_int(x) -> bool:
    """An int that is not a bool."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_num(x) -> bool:
    """An int or a float that is not a bool."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def require(cond: bool, name: str, says: str, value: Any) -> None:
    """ConfigError ``"<name> <says>, got <value!r>"`` unless ``cond``: the one shape
    of every config error."""
    if not cond:
        raise ConfigError(f"{name} {says}, got {value!r}")


@dataclass(frozen=True)
class Check:
    """What a field's value must be: ``ok(value)``, else ``"<field> <says>, got <value>"``."""

    ok: Callable[[Any], bool]
    says: str
    choices: tuple | None = None  # for ``one_of``: the values (a command line shows them)


def integer(lo: int = 0, hi: int | None = None, *, even: bool = False, note: str = "",
            says: str | None = None) -> Check:
    """An int in ``lo..hi`` (``hi`` None: no upper bound), even if ``even``."""
    kind = "an even integer" if even else "an integer"
    if says is None:
        if hi is not None:
            says = f"must be {kind} in {lo}..{hi}"
        elif lo == 1 and not even:
            says = "must be a positive integer"
        else:
            says = f"must be {kind} >= {lo}"
        says += f" ({note})" if note else ""
    return Check(lambda v: is_int(v) and v >= lo and (hi is None or v <= hi)
                 and (not even or v % 2 == 0), says)


def number(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           hi_open: bool = False) -> Check:
    """An int or float in the interval from ``lo`` to ``hi`` (open ends as said)."""
    def ok(v) -> bool:
        return is_num(v) and (lo is None or (v > lo if lo_open else v >= lo)) and (
            hi is None or (v < hi if hi_open else v <= hi))

    if lo is not None and hi is not None:
        says = f"must be in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    elif lo is not None:
        says = f"must be {'>' if lo_open else '>='} {lo}"
    else:
        says = f"must be {'<' if hi_open else '<='} {hi}"
    return Check(ok, says)


def one_of(choices: tuple) -> Check:
    return Check(lambda v: v in choices, f"must be one of {choices}", tuple(choices))


FLAG = Check(lambda v: isinstance(v, bool), "must be true or false")


TEXT = Check(lambda v: isinstance(v, str), "must be a string")


def setting(default: Any, check: Check | None = None) -> Any:
    """A config field with its default and what its value must be (``validate``)."""
    return field(default=default, metadata={} if check is None else {"check": check})


def validate(section: Any, prefix: str) -> None:
    """Check every field of the dataclass ``section`` declared with a ``Check``;
    a ConfigError names the first bad one as ``<prefix>.<field>``."""
    for f in dataclasses.fields(section):
        check = f.metadata.get("check")
        if check is not None:
            value = getattr(section, f.name)
            require(check.ok(value), f"{prefix}.{f.name}" if prefix else f.name, check.says,
                    value)


class Section:
    """Base of a config section (a frozen dataclass): after construction its
    declared checks run (``validate``), then ``cross_check``, its checks across
    fields. ``section`` is the prefix its errors name."""

    section = ""

    def __post_init__(self):
        validate(self, self.section)
        self.cross_check()

    def cross_check(self) -> None:
        """Checks that involve several fields (none by default)."""
