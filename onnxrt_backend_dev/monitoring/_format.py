"""Durations, counts and byte sizes for humans (one table of units each), and untrusted
text made fit for one row of a terminal (:func:`one_line`, :func:`cut_source`)."""

from __future__ import annotations

import math
import re

from ._errors import BadType, BadValue

# (factor in the base unit, symbol), smallest first.
_TIME_UNITS: tuple[tuple[float, str], ...] = ((1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1.0, "s"))
_TIME_FACTORS = {symbol: factor for factor, symbol in _TIME_UNITS}
# Binary multiples, as memory is allocated in pages; names are IEC.
_BYTE_UNITS = tuple((1024.0**i, s) for i, s in enumerate(("B", "KiB", "MiB", "GiB", "TiB")))
# Counts (instructions): decimal multiples.
_COUNT_UNITS = tuple((1000.0**i, s) for i, s in enumerate(("", "k", "M", "G", "T")))
# Accepted by parse_bytes; like pytest-memray, kB/MB/GB count in powers of 1024.
_BYTE_SUFFIXES: dict[str, float] = {"": 1.0, "b": 1.0} | {
    prefix + end: 1024.0**i for i, prefix in enumerate("kmgt", 1) for end in ("", "b", "ib")
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def _pick(value: float, units: tuple[tuple[float, str], ...]) -> tuple[float, str]:
    """Returns the largest unit in which ``abs(value)`` is at least 1."""
    factor, symbol = units[0]
    for f, s in units:
        if abs(value) >= f * 0.9995:  # 999.96 ns reads better as 1.00 µs
            factor, symbol = f, s
    return factor, symbol


def _digits(scaled: float, significant: int) -> str:
    """Formats ``scaled`` with ``significant`` significant digits, never in exponent form."""
    if scaled == 0 or not math.isfinite(scaled):
        return f"{scaled:.{max(significant - 1, 0)}f}"
    magnitude = math.floor(math.log10(abs(scaled))) + 1
    decimals = max(significant - magnitude, 0)
    if abs(round(scaled, decimals)) >= 10.0**magnitude:
        # Rounding carried into a new digit (0.99996 -> 1.000): one decimal fewer.
        decimals = max(decimals - 1, 0)
    return f"{scaled:.{decimals}f}"


def format_duration(seconds: float, significant: int = 3, unit: str | None = None) -> str:
    """Formats a duration in the unit that reads best, e.g. ``24.1 ns`` or ``1.52 s``.

    :param seconds: duration in seconds
    :param significant: number of significant digits
    :param unit: force a unit (``ns``, ``µs``, ``ms``, ``s``; ``us`` is accepted)
    :return: the formatted string
    """
    if unit is not None:
        symbol = "µs" if unit == "us" else unit
        if symbol not in _TIME_FACTORS:
            raise BadValue(f"unit must be one of {sorted(_TIME_FACTORS)}, got {unit!r}")
        factor = _TIME_FACTORS[symbol]
    else:
        factor, symbol = _pick(seconds, _TIME_UNITS)
    return f"{_digits(seconds / factor, significant)} {symbol}"


def format_duration_like(seconds: float, like: str) -> str:
    """Formats ``seconds`` in the unit and with the decimals of ``like``, a duration
    :func:`format_duration` wrote: ``format_duration_like(6e-10, "24.1 ns")`` is
    ``0.6 ns``, so that figures printed side by side line up.

    :param seconds: duration in seconds
    :param like: a formatted duration such as ``24.1 ns`` or ``1.52 s``
    :return: the formatted string
    :raises ValueError: ``like`` is not a number followed by ``ns``, ``µs``, ``ms`` or ``s``
    """
    number, _, unit = like.partition(" ")
    if unit not in _TIME_FACTORS:
        raise BadValue(f"like must be a duration such as '24.1 ns', got {like!r}")
    decimals = len(number.split(".")[1]) if "." in number else 0
    return f"{seconds / _TIME_FACTORS[unit]:.{decimals}f} {unit}"


def format_count(n: float, significant: int = 3, unit: str = "instr") -> str:
    """Formats a count of instructions, e.g. ``373 instr``, ``6.04 G instr``.

    :param n: the count
    :param significant: number of significant digits above a thousand
    :param unit: what is counted
    :return: the formatted string
    """
    factor, symbol = _pick(n, _COUNT_UNITS)
    if factor == 1.0:
        return (
            f"{n:,.0f} {unit}" if abs(n - round(n)) < 0.05 or abs(n) >= 100 else f"{n:.3g} {unit}"
        )
    return f"{_digits(n / factor, significant)} {symbol} {unit}"


def format_bytes(n: float, significant: int = 3) -> str:
    """Formats a number of bytes with a binary unit, e.g. ``300 MiB``.

    :param n: number of bytes
    :param significant: number of significant digits
    :return: the formatted string
    """
    factor, symbol = _pick(n, _BYTE_UNITS)
    if factor == 1.0:
        return f"{round(n)} B"
    return f"{_digits(n / factor, significant)} {symbol}"


_TOO_BIG = float(2**63)  # bytes: no size beyond (an infinite one would be OverflowError)


def parse_bytes(text: str | int | float) -> int:
    """Parses a size such as ``"200 MB"``, ``"1.5GiB"`` or ``4096`` into bytes.

    ``kB``, ``MB``, ``GB`` count in powers of 1024, as ``KiB``, ``MiB``, ``GiB`` do
    (the convention of pytest-memray's ``limit_memory``).

    :param text: the size
    :return: the number of bytes
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if not 0 <= text < _TOO_BIG:  # NaN too
            raise BadValue(f"size must be >= 0 and finite, got {text!r}")
        return int(text)
    if not isinstance(text, str):
        raise BadType(f"size must be a str, int or float, got {type(text).__name__}")
    m = _SIZE_RE.match(text)
    suffix = m.group(2).lower() if m else None
    if m is None or suffix not in _BYTE_SUFFIXES:
        raise BadValue(
            f"size must be a number followed by B, KB, MB, GB, TB (or KiB...), got {text!r}"
        )
    size = float(m.group(1)) * _BYTE_SUFFIXES[suffix]
    if not size < _TOO_BIG:  # "1e400 MB" is infinite
        raise BadValue(f"size must be finite, got {text!r}")
    return int(size)


def one_line(text: str) -> str:
    """``text`` with its unprintable characters (line breaks, NUL, escape sequences,
    U+2028...) written as backslash escapes, so that an untrusted name stays on its row
    and sends nothing to the terminal.

    :param text: a name, a path, a line of a table
    :return: printable text
    """
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


# Python's tokens that end nothing a reader would miss.
_SKIPPED_TOKENS = ("NEWLINE", "NL", "ENDMARKER", "INDENT", "DEDENT")
# A boundary between words, for a line that is not Python.
_WORD_END = re.compile(r"\w\b|\W")


def cut_source(line: str, width: int) -> str:
    """A source line cut to ``width`` characters at a token's end, with an ellipsis:
    ``total = compute_everything(ar…`` becomes ``total = compute_everything(…``.

    :param line: the line (stripped here)
    :param width: characters at most, ellipsis included (>= 2)
    :return: the line, whole or cut
    """
    text = line.strip()
    if len(text) <= width:
        return text
    import io  # here: the renderers that never cut a line import no tokenizer
    import tokenize

    skipped = {getattr(tokenize, name) for name in _SKIPPED_TOKENS}
    limit = max(width - 1, 1)  # the ellipsis takes one
    cut = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.end[0] > 1 or token.end[1] > limit:
                break
            if token.type not in skipped:
                cut = token.end[1]
    except (tokenize.TokenError, SyntaxError):  # an open bracket or string: so far is fine
        pass
    if cut == 0:  # not Python, or one long first token: at a word's end
        ends = [m.end() for m in _WORD_END.finditer(text, 0, limit)]
        cut = ends[-1] if ends else limit
    return text[:cut].rstrip() + "…"
