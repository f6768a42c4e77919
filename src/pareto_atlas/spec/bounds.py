"""What each number of a study may be, by what it means: strict types and the bounds one host,
one engine context and a sane clock allow. Shared by the study, traces and price strings.

Each checker returns the value or raises a one-line ValueError saying the value and what is allowed;
the caller (pydantic, a loader) names the field.
"""

from __future__ import annotations

import math
import re
from functools import partial
from typing import Annotated, Any

from pydantic import BeforeValidator

# One host runs the load generator and (for local engines) the engine: a closed loop of more
# clients than this, or more sequences decoded together, is not something one machine serves.
MAX_CLIENTS = 1024
MAX_SLOTS = 256
MAX_REQUESTS = 100_000  # requests of one anchor
MAX_THREADS = 1024
MAX_CTX = 1_048_576  # tokens of one request's context (the longest a shipped card holds is far less)
MAX_TIMEOUT_S = 3600.0  # one request's timeout: an hour
MAX_THINK_MS = 600_000.0  # one client's mean pause: ten minutes
MAX_RATE_RPS = 10_000.0
MIN_RATE_RPS = 0.001  # one request every ~17 min
MAX_ARRIVALS_S = 86_400.0  # a Poisson arm's expected span (requests / rate) or a trace's: one day
MAX_SIM_CLIENTS = 65_536  # clients of one simulated closed loop
MAX_PRICE = 10_000.0  # $/hour for one device
MAX_NAME = 120
# Names that become folder and file names (a study's atlas-out/<name>): no separators, no leading dot.
SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


class PriceError(ValueError):
    """A price string (`pick --price HARDWARE=DOLLARS_PER_HOUR`) breaks the format."""


def check_int(value: Any, lo: int, hi: int, what: str = "") -> int:
    """An integer (not a bool, not 2.0, not "2") in lo..hi."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{show(value)} is not allowed: an integer {lo}..{hi}{_why(what)}")
    if not lo <= value <= hi:
        raise ValueError(f"{show(value)} is not allowed: {lo}..{hi}{_why(what)}")
    return value


def check_real(value: Any, lo: float, hi: float, what: str = "", lo_open: bool = False) -> float:
    """A finite number (an integer or a float, not a bool) in [lo, hi] ((lo, hi] when lo_open)."""
    rng = f"{'>' if lo_open else '>='} {lo:g} and <= {hi:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{show(value)} is not allowed: a number {rng}{_why(what)}")
    try:
        v = float(value)
    except OverflowError:  # an integer past any float
        v = math.inf
    if not (math.isfinite(v) and (v > lo if lo_open else v >= lo) and v <= hi):
        raise ValueError(f"{show(value)} is not allowed: {rng}{_why(what)}")
    return v


def check_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{show(value)} is not allowed: true or false")
    return value


def check_name(value: Any, slug: bool = False) -> str:
    """A non-empty single-line name of at most MAX_NAME characters; `slug`: usable as a folder name."""
    if not isinstance(value, str):
        raise ValueError(f"{show(value)} is not allowed: a name (a string)")
    if not value.strip() or len(value) > MAX_NAME or not value.isprintable():
        raise ValueError(f"{show(value)} is not allowed: a non-empty printable name of at most {MAX_NAME} characters")
    if slug and not SLUG.match(value):
        raise ValueError(
            f"{show(value)} is not allowed: letters, digits and . _ + - only, not starting "
            f"with . _ + - (it names the output folder)"
        )
    return value


def show(value: Any) -> str:
    """A value as an error quotes it: its repr, cut to 60 characters (a hostile file's 10 MB string is not echoed)."""
    try:
        r = repr(value)
    except ValueError:  # an integer past Python's 4300-digit limit for printing
        return "an integer of over 4300 digits"
    return r if len(r) <= 60 else r[:57] + "..."


def _why(what: str) -> str:
    return f" ({what})" if what else ""


def _opt(fn, value):
    return None if value is None else fn(value)


def Int(lo: int, hi: int, what: str = "", optional: bool = False):
    """A pydantic field type: a strict integer in lo..hi (or None when optional)."""
    fn = partial(check_int, lo=lo, hi=hi, what=what)
    return (
        Annotated[int | None, BeforeValidator(partial(_opt, fn))] if optional else Annotated[int, BeforeValidator(fn)]
    )


def Real(lo: float, hi: float, what: str = "", lo_open: bool = False, optional: bool = False):
    """A pydantic field type: a finite number in [lo, hi] (or (lo, hi]; or None when optional)."""
    fn = partial(check_real, lo=lo, hi=hi, what=what, lo_open=lo_open)
    return (
        Annotated[float | None, BeforeValidator(partial(_opt, fn))]
        if optional
        else Annotated[float, BeforeValidator(fn)]
    )


Bool = Annotated[bool, BeforeValidator(check_bool)]
Name = Annotated[str, BeforeValidator(check_name)]
Slug = Annotated[str, BeforeValidator(partial(check_name, slug=True))]
Price = Real(0.0, MAX_PRICE, "$/hour of one device", lo_open=True)


def unique(names: list[str], what: str) -> None:
    """A one-line ValueError naming the first name used twice."""
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValueError(f"{what} {show(n)} is listed twice; each must be unique")
        seen.add(n)


def parse_prices(items: list[str], flag: str = "--price") -> dict[str, float]:
    """HARDWARE=DOLLARS_PER_HOUR strings as a map, each price finite and in (0, MAX_PRICE]."""
    out: dict[str, float] = {}
    for it in items:
        name, sep, val = str(it).partition("=")
        name = name.strip()
        try:
            price = check_real(float(val), 0.0, MAX_PRICE, lo_open=True) if sep and name else None
        except ValueError:
            price = None
        if price is None:
            raise PriceError(
                f"{flag} {show(str(it))}: expected HARDWARE=DOLLARS_PER_HOUR with a price > 0 "
                f"and <= {MAX_PRICE:g}, e.g. A100-80G-PCIe=2.085"
            )
        if name in out:
            raise PriceError(f"{flag} {show(name)}: priced twice")
        out[name] = price
    return out
