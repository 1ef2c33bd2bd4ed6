"""Tests for the ``demo`` subcommand: the README's main job."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._cli import main

EXPECTED_FILES = {
    "memory.png",
    "profile.png",
    "calltree.html",
    "profile.speedscope.json",
    "results.json",
}


def test_demo_prints_the_three_examples_and_writes_its_files(tmp_path: Path) -> None:
    # GIVEN an empty output folder WHEN the demo runs in process
    out, err = io.StringIO(), io.StringIO()
    code = main(["demo", "--out", str(tmp_path / "demo")], out=out, err=err)
    # THEN it succeeds, prints each example's result and lists each file it wrote
    assert code == 0, err.getvalue()
    text = out.getvalue()
    assert "'min_exec':" in text and "cos(0.5): " in text
    assert "cpu: peak " in text and "MiB" in text
    assert "fct4" in text and "+++" in text
    # the call tree, the first picture a newcomer sees, shows the calls, not one row
    tree = text.split("its call tree")[1].split("==")[1]
    assert "hidden" not in tree and all(f"fct{i}  cmd_demo.py" in tree for i in range(5))
    folder = tmp_path / "demo"
    page = (folder / "calltree.html").read_text(encoding="utf-8")
    assert "fct3" in page and "frames hidden" not in page
    assert {p.name for p in folder.iterdir()} == EXPECTED_FILES
    for name in EXPECTED_FILES:
        assert f"wrote {folder / name}" in text
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    assert set(results) == {"timing", "memory", "profile"}
    assert results["timing"]["min_exec"] <= results["timing"]["average"]
    # three 64 MiB blocks were alive together
    assert results["memory"]["cpu_MiB"]["peak"] - results["memory"]["cpu_MiB"]["begin"] >= 150
    assert any(row["fct"] == "fct4" for row in results["profile"])
    speedscope = json.loads((folder / "profile.speedscope.json").read_text(encoding="utf-8"))
    assert speedscope["$schema"].startswith("https://www.speedscope.app/")
    assert (folder / "memory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_demo_as_a_real_subprocess(tmp_path: Path) -> None:
    # The README's first command ends with this; it must work from any folder.
    res = subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert "demo finished in" in res.stdout
    assert (tmp_path / "monitoring-demo" / "calltree.html").exists()


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("/proc/onnxrt-monitoring-x", "the folder cannot be created"),
        ("/proc/self/onnxrt-monitoring-x/y", ""),
        ("{tmp}/a-file", "it is a file, give a folder"),
        ("{tmp}/a-file/below", "is not a folder"),
        ("", "the path is empty"),
    ],
)
def test_a_bad_out_is_refused_naming_it_before_any_work(
    tmp_path: Path, where: str, reason: str
) -> None:
    # GIVEN an --out folder that cannot be made (a kernel file system, below a file...)
    (tmp_path / "a-file").write_text("x")
    folder = where.format(tmp=tmp_path)
    out, err = io.StringIO(), io.StringIO()
    # WHEN the demo runs THEN exit 2, one line naming --out and the path, nothing done
    code = main(["demo", "--out", folder], out=out, err=err)
    assert (code, out.getvalue()) == (2, "")
    line = err.getvalue()
    assert line.startswith(f"error: cannot write --out {folder!r}: "), line
    assert reason in line and line.count("\n") == 1
