"""The real-GPU check (``benchmarks/gpu_check.py``): run on a GPU (the test marked
``gpu``, skipped elsewhere), and its logic here through a fake driver library: the
ladder's allocations, the driver's errors named, no GPU said in one line."""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
MIB = 2**20
TIMEOUT = 60


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses and annotations look it up
    spec.loader.exec_module(module)
    return module


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        _script().Driver.load()
    except Exception:
        return False
    return True


class FakeCuda:
    """The driver calls the check makes, over Python objects: pointers handed out by
    ``cuMemAlloc_v2``, an error for a device index past ``count``."""

    def __init__(self, count: int = 1) -> None:
        self.count = count
        self.live: dict[int, int] = {}
        self.peak = 0
        self.next = 0x1000

    @staticmethod
    def _set(ref: Any, value: Any) -> None:
        ref._obj.value = value  # ctypes.byref(x)._obj is x

    def cuInit(self, flags: Any) -> int:
        return 0

    def cuDeviceGetCount(self, ref: Any) -> int:
        self._set(ref, self.count)
        return 0

    def cuDeviceGet(self, ref: Any, index: Any) -> int:
        if not 0 <= index.value < self.count:
            return 101  # CUDA_ERROR_INVALID_DEVICE
        self._set(ref, index.value)
        return 0

    def cuDevicePrimaryCtxRetain(self, ref: Any, device: Any) -> int:
        self._set(ref, 0xC0)
        return 0

    def cuCtxSetCurrent(self, context: Any) -> int:
        return 0

    def cuDevicePrimaryCtxRelease_v2(self, device: Any) -> int:
        return 0

    def cuMemAlloc_v2(self, ref: Any, size: Any) -> int:
        self.next += size.value
        self.live[self.next] = size.value
        self.peak = max(self.peak, sum(self.live.values()))
        self._set(ref, self.next)
        return 0

    def cuMemFree_v2(self, pointer: Any) -> int:
        return 0 if self.live.pop(pointer.value, None) is not None else 1

    def cuGetErrorName(self, code: int, ref: Any) -> int:
        names = {101: b"CUDA_ERROR_INVALID_DEVICE", 1: b"CUDA_ERROR_INVALID_VALUE"}
        self._set(ref, names.get(code, b"CUDA_ERROR_UNKNOWN"))
        return 0

    def cuGetErrorString(self, code: int, ref: Any) -> int:
        self._set(ref, b"invalid device ordinal" if code == 101 else b"invalid argument")
        return 0


def test_the_ladder_climbs_to_the_top_and_frees_everything() -> None:
    gpu_check = _script()
    lib = FakeCuda()
    driver = gpu_check.Driver(lib)
    driver.open(0)
    peak = gpu_check.ladder(driver, 256 * MIB, 4096 * MIB, pause=0)
    assert peak == lib.peak == 4096 * MIB and lib.live == {}


def test_a_device_index_that_does_not_exist_is_named_by_the_driver() -> None:
    gpu_check = _script()
    driver = gpu_check.Driver(FakeCuda(count=2))
    with pytest.raises(gpu_check.CudaError) as info:
        driver.open(9)
    assert str(info.value) == "cuDeviceGet(&, 9): CUDA_ERROR_INVALID_DEVICE: invalid device ordinal"


def test_the_context_is_taken_off_the_peak_within_3_percent() -> None:
    gpu_check = _script()
    ok = gpu_check._within(4096 * MIB + 500 * MIB + 40 * MIB, 500 * MIB, 4096 * MIB)
    off = gpu_check._within(4096 * MIB + 500 * MIB, 0, 4096 * MIB)
    assert ok["ok"] and not off["ok"]  # the context left in: 12 % over


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.skipif(_has_gpu(), reason="a GPU is here: the check runs for real")
def test_without_a_gpu_the_check_says_so_in_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith("gpu_check: no GPU here: ") and proc.stdout.count("\n") == 1
    assert proc.stderr == ""


def test_the_driver_library_missing_is_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu_check = _script()

    def missing(name: str) -> Any:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    with pytest.raises(gpu_check.NoGpu, match=r"libcuda\.so cannot be loaded"):
        gpu_check.Driver.load()


@pytest.fixture
def fake_driver(tmp_path: Path) -> dict[str, str]:
    """The environment of a dry run: the fake ``libcuda.so.1`` built from
    ``tests/data/fake_gpu/fake_libcuda.c`` and the fake ``pynvml`` reading what it
    publishes (skipped without a C compiler)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the fake driver")
    fake = ROOT / "tests" / "data" / "fake_gpu"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(tmp_path / "libcuda.so.1"),
         str(fake / "fake_libcuda.c")],
        check=True, timeout=TIMEOUT,
    )  # fmt: skip
    shutil.copy(fake / "fake_pynvml.py", tmp_path / "pynvml.py")
    (tmp_path / "state").mkdir()
    return {
        "FAKE_CUDA_DIR": str(tmp_path / "state"),
        "LD_LIBRARY_PATH": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_dry_run_on_a_fake_driver_passes_every_check(
    fake_driver: dict[str, str], tmp_path: Path
) -> None:
    # GIVEN a fake driver (a 300 MiB context, allocations published per process) and a
    # fake NVML reading them: the plumbing of every check, without a GPU
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        # One step held 0.5 s: NVML samples (no high-water mark), so at load 8 the
        # spy must get the CPU at least once while it is held
        [
            sys.executable,
            str(SCRIPT),
            "--quick",
            "--step",
            "512",
            "--top",
            "512",
            "--pause",
            "500",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=170,
        cwd=ROOT,
        env={**os.environ, **fake_driver},
    )
    # THEN each entry point sees the ladder's peak once the context is taken off
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    for check in ("library", "spy_command", "run_command"):
        assert doc[check]["ok"] and doc[check]["context"] == 300 * MIB, doc[check]
        assert doc[check]["peak_less_context"] == 512 * MIB
    assert doc["run_command"]["devices"] == ["nvml:gpu0", "nvml:gpu0:process"]
    assert doc["bad_device"]["driver_error"] == (
        "cuDeviceGet(&, 8): CUDA_ERROR_INVALID_DEVICE: invalid device ordinal"
    )
    assert doc["bad_device"]["spy_exit_code"] == 1
    assert doc["latency"]["start_median"] > 0 and set(doc["spikes"]["caught"]) == {"10 ms", "2 ms"}


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU and its driver")
def test_real_gpu_ladder_peaks_within_3_percent(tmp_path: Path) -> None:
    pytest.importorskip("pynvml")
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--top", "1024", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    failed = {k: v for k, v in doc.items() if isinstance(v, dict) and v.get("ok") is False}
    assert not failed, failed
