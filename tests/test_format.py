"""Tests for the human formatting of durations and sizes."""

from __future__ import annotations

import pytest

from onnxrt_backend_dev.monitoring._format import (
    format_bytes,
    format_duration,
    format_duration_like,
    parse_bytes,
)


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (24.1e-9, "24.1 ns"),
        (0.6e-9, "0.600 ns"),
        (999.96e-9, "1.00 µs"),
        (1.5e-6, "1.50 µs"),
        (0.0123, "12.3 ms"),
        (1.52, "1.52 s"),
        (125.0, "125 s"),
        (0.0, "0.00 ns"),
    ],
)
def test_format_duration_picks_the_readable_unit(seconds: float, expected: str) -> None:
    assert format_duration(seconds) == expected


def test_format_duration_forced_unit() -> None:
    assert format_duration(2.5e-6, unit="ns") == "2500 ns"
    assert format_duration(2.5e-6, unit="us") == "2.50 µs"
    with pytest.raises(ValueError, match="unit must be one of"):
        format_duration(1.0, unit="min")


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (2048, "2.00 KiB"),
        (300 * 1024**2, "300 MiB"),
        (1.5 * 1024**3, "1.50 GiB"),
    ],
)
def test_format_bytes(n: float, expected: str) -> None:
    assert format_bytes(n) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("200 MB", 200 * 1024**2),
        ("200MiB", 200 * 1024**2),
        ("1.5 GB", int(1.5 * 1024**3)),
        ("4096", 4096),
        ("10 kb", 10240),
        (123, 123),
        (1e3, 1000),
    ],
)
def test_parse_bytes(text: str | int | float, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("bad", ["", "MB", "12 parsecs", "-3 MB"])
def test_parse_bytes_rejects_nonsense(bad: str) -> None:
    with pytest.raises(ValueError, match="size must be"):
        parse_bytes(bad)


def test_parse_bytes_rejects_negative_numbers_and_wrong_types() -> None:
    with pytest.raises(ValueError, match="size must be >= 0 and finite, got -1"):
        parse_bytes(-1)
    with pytest.raises(TypeError, match="got list"):
        parse_bytes([1])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seconds", "like", "expected"),
    [
        (0.6e-9, "24.1 ns", "0.6 ns"),
        (24.04e-9, "24.1 ns", "24.0 ns"),
        (1.5e-6, "1.52 µs", "1.50 µs"),
        (2.0, "250 ms", "2000 ms"),
        (0.0, "1.00 s", "0.00 s"),
    ],
)
def test_format_duration_like_takes_the_unit_and_decimals(
    seconds: float, like: str, expected: str
) -> None:
    # GIVEN a duration formatted by format_duration WHEN another one is formatted like it
    # THEN same unit, same decimals: figures printed side by side line up
    assert format_duration_like(seconds, like) == expected


@pytest.mark.parametrize("like", ["24.1", "24.1 min", "", "ns"])
def test_format_duration_like_refuses_what_is_not_a_duration(like: str) -> None:
    with pytest.raises(ValueError, match=r"like must be a duration such as '24\.1 ns'"):
        format_duration_like(1.0, like)


# --- untrusted text made fit for one row ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain name", "plain name"),
        ("two\nlines", "two\\nlines"),
        ("nul\x00byte", "nul\\x00byte"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("back\rspace\ttab", "back\\rspace\\ttab"),
        ("line\u2028sep", "line\\u2028sep"),
        ("µs ± é", "µs ± é"),
    ],
)
def test_one_line_escapes_what_would_break_a_row(text: str, expected: str) -> None:
    from onnxrt_backend_dev.monitoring._format import one_line

    assert one_line(text) == expected


@pytest.mark.parametrize(
    ("line", "width", "expected"),
    [
        ("x = 1", 60, "x = 1"),
        ("    x = 1   ", 60, "x = 1"),
        (
            "total = compute_everything(arguments, more_arguments)",
            32,
            "total = compute_everything(…",
        ),
        ("result = frame.groupby(['a', 'b']).agg(fn)", 25, "result = frame.groupby([…"),
        ("x = 'a long string literal, closed'", 20, "x =…"),
        ("call(x, [1, 2, 3", 12, "call(x, [1,…"),
        ("a_single_identifier_that_is_far_too_long", 10, "a_single_…"),
        ("not python: ¡ voilà ! encore", 16, "not python: ¡…"),
    ],
)
def test_cut_source_cuts_at_a_token_end_with_an_ellipsis(
    line: str, width: int, expected: str
) -> None:
    from onnxrt_backend_dev.monitoring._format import cut_source

    cut = cut_source(line, width)
    assert cut == expected and len(cut) <= width
