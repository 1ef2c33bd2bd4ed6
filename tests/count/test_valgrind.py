"""The counted run: valgrind's options, the interpreter's probe, the files a run leaves
(one per process), and a few real counts where valgrind is installed."""

from __future__ import annotations

import fnmatch
import os
import shutil
import string
import sys
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._count import valgrind
from onnxrt_backend_dev.monitoring._count.valgrind import (
    INSTALL,
    Run,
    check_counter,
    count,
    environment,
    interpreter,
    skip_patterns,
)
from onnxrt_backend_dev.monitoring._errors import BadValue, CounterError, RunFailed
from onnxrt_backend_dev.monitoring._run.supervise import Supervisor

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="no valgrind")
# valgrind runs a program 20 to 100 times slower: minutes at load 8
pytestmark = pytest.mark.timeout(600)


def per_function_python() -> str | None:
    """An interpreter whose functions can be counted (Python >= 3.12 with perf
    trampolines): this one, one beside it (pyenv's versions), or one found in PATH."""
    import glob

    versions = os.path.dirname(sys.base_prefix)
    beside = sorted(glob.glob(os.path.join(versions, "*", "bin", "python3.1[2-9]")))
    for name in (sys.executable, *beside, "python3.13", "python3.12"):
        found = shutil.which(name) or name
        try:
            if interpreter(found).per_function:
                return found
        except CounterError:
            continue
    return None


def test_skip_patterns_keep_the_trampolines_and_the_stacks_bottoms() -> None:
    patterns = skip_patterns()
    kept = ["0x000000000547c7bc", "_dl_runtime_resolve_xsave", "start_thread", "clone3",
            "malloc", "PyObject_Malloc", "PyObject_Calloc", "PyMem_Realloc"]  # fmt: skip
    # A name that is only the start of a kept one (PyObject_Call, PyObject_Calloc's) is
    # skipped: a kept C function between two Python functions would merge the graph.
    skipped = ["_PyEval_EvalFrameDefault", "PyObject_Call", "PyObject_Ca", "mallo", "__memcpy_avx",
               "(below main)", "_start", "ld.so", "x", "P"]  # fmt: skip
    for name in kept:
        assert not any(fnmatch.fnmatchcase(name, p) for p in patterns), name
    for name in skipped:
        assert any(fnmatch.fnmatchcase(name, p) for p in patterns), name
    # Every first character of a symbol is covered, none of the kept prefixes.
    firsts = {p[0] for p in patterns}
    assert set(string.ascii_letters + string.digits) <= firsts | {"0"}


def test_check_counter() -> None:
    assert check_counter("instructions") == "instructions" and check_counter(None) is None
    with pytest.raises(BadValue, match="counter must be one of instructions, got 'cycles'"):
        check_counter("cycles")


def test_environment_fixes_the_hash_seed_unless_set() -> None:
    assert environment({"PATH": "/bin"})["PYTHONHASHSEED"] == "0"
    assert environment({"PYTHONHASHSEED": "7"})["PYTHONHASHSEED"] == "7"
    assert "PYTHONPERFSUPPORT" not in environment({"PYTHONPERFSUPPORT": "1"})


def test_valgrind_missing_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(valgrind.shutil, "which", lambda name: None)
    with pytest.raises(CounterError) as e:
        valgrind.find_valgrind()
    assert str(e.value) == INSTALL and "apt-get install valgrind" in INSTALL and e.value.usage


def test_a_launcher_script_is_not_an_interpreter(tmp_path: Path) -> None:
    # GIVEN a shell script that runs python (a pyenv shim, a wrapper), whose probe
    # reports the script itself as the executable
    script = tmp_path / "python"
    probe = f'import json; print(json.dumps(["{script}", [3, 12], 1]))'
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -c '{probe}'\n")
    script.chmod(0o755)
    with pytest.raises(CounterError, match="not a native program"):
        interpreter(str(script))
    with pytest.raises(CounterError, match="cannot probe"):
        interpreter(str(tmp_path / "missing"))


def test_one_output_per_process_is_required(tmp_path: Path) -> None:
    run = Run(["prog"], what="prog.py")
    (tmp_path / "count.1").write_text("summary: 5\n")
    (tmp_path / "count.2").write_text("summary: 6\n")
    with pytest.raises(CounterError, match=r"prog\.py forked 1 process"):
        valgrind._read(str(tmp_path / "count"), run, 1.0)
    with pytest.raises(CounterError, match="no count"):
        valgrind._read(str(tmp_path / "nothing"), run, 1.0)


@needs_valgrind
def test_a_run_counts_the_same_twice_and_fails_as_the_program(tmp_path: Path) -> None:
    # GIVEN a small program
    prog = tmp_path / "prog.py"
    prog.write_text("s = sum(i * i for i in range(20000))\n", encoding="utf-8")
    binary = interpreter(sys.executable).binary
    with Supervisor() as sup, sup.folder("count-test-") as folder:
        # WHEN counted twice, THEN the same instructions to the last one
        first = count(Run([binary, str(prog)]), folder, sup)
        second = count(Run([binary, str(prog)]), folder, sup)
        assert first is not None and second is not None and first.total == second.total > 10**6
        assert first.functions is None and os.listdir(folder) == []
        # AND a program that fails is the program's failure, with its error
        bad = tmp_path / "bad.py"
        bad.write_text("raise SystemExit('no input')\n", encoding="utf-8")
        with pytest.raises(RunFailed, match="exited with 1: no input"):
            count(Run([binary, str(bad)], what="bad.py"), folder, sup)


@needs_valgrind
def test_each_python_function_is_counted(tmp_path: Path) -> None:
    python = per_function_python()
    if python is None:
        pytest.skip("no Python >= 3.12 with perf trampolines")
    prog = tmp_path / "prog.py"
    prog.write_text(
        "def spin(n):\n    return sum(i * i for i in range(n))\n"
        "def a():\n    return spin(20000)\n"
        "def b():\n    return spin(60000)\n"
        "a(); b()\n",
        encoding="utf-8",
    )
    with Supervisor() as sup, sup.folder("count-test-") as folder:
        run = Run([interpreter(python).binary, str(prog)], True, str(tmp_path), count_bytes=True)
        counted = count(run, folder, sup)
    assert counted is not None and counted.functions is not None, counted and counted.notes
    rows = {k[2]: v for k, v in counted.functions.items() if k[0] == str(prog)}
    assert rows["a"][3] * 2.5 < rows["b"][3] < rows["a"][3] * 3.5  # 3 times the work
    assert rows["spin"][1] == 2 and rows["spin"][0:1] == [2]
    assert rows["a"][0:2] == [1, 1] and ("spin" in {k[2] for k in rows["spin"][4]}) is False
    assert sum(v[2] for v in counted.functions.values()) == counted.total
    # AND the bytes each function allocated (DHAT): the generator's ints, 80,000 of them
    sizes = {k[2]: v for k, v in (counted.alloc_bytes or {}).items() if k[0] == str(prog)}
    assert 80_000 * 28 <= sizes["spin.<locals>.<genexpr>"] <= 80_000 * 64, sizes
    assert not list(Path("/tmp").glob("perf-*.map")) or all(
        int(p.stem.split("-")[1]) != os.getpid() for p in Path("/tmp").glob("perf-*.map")
    )
