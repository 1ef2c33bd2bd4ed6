"""Names a program gives its own functions (or a crafted file holds) never break a row
of a text output nor reach the terminal raw: newlines, NUL bytes and escape sequences
are written escaped by every text renderer (``_format.one_line``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli

EVIL = "evil\nrow\x00\x1b[31m\r"
SCRIPT = f"""\
import time

def work():
    end = time.perf_counter() + 0.4
    while time.perf_counter() < end:
        sum(range(1000))

code = work.__code__.replace(co_name={EVIL!r})
if hasattr(code, "co_qualname"):
    code = code.replace(co_qualname={EVIL!r})
work.__code__ = code
work()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ["profile"],
        ["profile", "--cprofile", "--view", "tree"],
        ["profile", "--cprofile", "--view", "reference"],
        ["run"],
        ["spy", "--where"],
    ],
    ids=lambda a: " ".join(a),
)
def test_a_crafted_function_name_stays_on_its_row(tmp_path: Path, argv: list[str]) -> None:
    script = tmp_path / "evil.py"
    script.write_text(SCRIPT, encoding="utf-8")
    code, out, err = run_cli(*argv, str(script))
    assert code == 0, err
    # THEN nothing unprintable reaches the terminal, and the name is there, escaped
    for line in out.splitlines():
        assert line.isprintable(), repr(line)
    assert "evil\\nrow\\x00\\x1b[31m" in out, out


@pytest.mark.slow
def test_a_file_name_holding_a_nul_is_no_source_line(tmp_path: Path) -> None:
    # GIVEN a function whose code names a file with a NUL (no path holds one: stat and
    # linecache raise ValueError on it)
    script = tmp_path / "evil.py"
    script.write_text(
        SCRIPT.split("code = ")[0]
        + "work.__code__ = work.__code__.replace(co_filename='/a\\x00b.py')\nwork()\n",
        encoding="utf-8",
    )
    # WHEN profiled, THEN the profile is made (the function is there), no error
    code, out, err = run_cli("profile", str(script))
    assert code == 0 and "null byte" not in err, err
    assert "work" in out, out
