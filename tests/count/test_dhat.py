"""DHAT's output read as each Python function's allocated bytes (``--count-bytes``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._count.callgraph import INTERPRETER, read_dhat
from onnxrt_backend_dev.monitoring._errors import CounterError


def _files(tmp_path: Path, doc: object) -> tuple[str, str]:
    prog = tmp_path / "prog.py"
    prog.write_text("def main():\n    return f()\n\n\ndef f():\n    return [0] * 9\n")
    perf = tmp_path / "perf.map"
    perf.write_text(f"1000 10 py::main:{prog}\n2000 10 py::f:{prog}\n")
    out = tmp_path / "dhat.json"
    out.write_text(json.dumps(doc))
    return str(out), str(perf)


def test_the_innermost_trampoline_owns_the_bytes(tmp_path: Path) -> None:
    # GIVEN stacks listed from the allocator outwards: f's code under main's, main's
    # alone, and the interpreter's start (no trampoline)
    ftbl = ["[root]", "0x48417B4: malloc (in vgpreload_dhat.so)", "0x4B3FDDB: list_new",
            "0x2004: ???", "0x1003: ???", "0x4B2851C: Py_Initialize (pylifecycle.c:1)"]  # fmt: skip
    pps = [
        {"tb": 800, "tbk": 2, "fs": [1, 2, 3, 4]},
        {"tb": 50, "tbk": 1, "fs": [1, 4]},
        {"tb": 7, "tbk": 1, "fs": [1, 5]},
        {"tb": 100, "tbk": 1, "fs": [1, 2, 3]},
    ]
    path, perf = _files(tmp_path, {"pps": pps, "ftbl": ftbl})
    found = read_dhat(path, perf, cwd=str(tmp_path))
    # THEN f owns what was allocated under it, main its own, the rest the interpreter's
    prog = str(tmp_path / "prog.py")
    assert found == {(prog, 5, "f"): 900, (prog, 1, "main"): 50, INTERPRETER: 7}


@pytest.mark.parametrize(
    "doc",
    [{"pps": "x", "ftbl": []}, [1, 2], {"ftbl": []}],
)
def test_what_is_not_dhat_output_is_refused(tmp_path: Path, doc: object) -> None:
    path, perf = _files(tmp_path, doc)
    with pytest.raises(CounterError, match="not DHAT's output"):
        read_dhat(path, perf)


def test_malformed_entries_are_skipped_and_a_missing_file_named(tmp_path: Path) -> None:
    pps = [{"tb": "9", "fs": [1]}, {"tb": 5, "fs": [[1], "x", 99, 1]}, "pp", {"tb": -3, "fs": [1]}]
    path, perf = _files(tmp_path, {"pps": pps, "ftbl": ["[root]", "0x2001: ???"]})
    assert read_dhat(path, perf) == {(str(tmp_path / "prog.py"), 5, "f"): 5}
    with pytest.raises(CounterError, match=r"nothing\.json"):
        read_dhat(str(tmp_path / "nothing.json"), perf)
