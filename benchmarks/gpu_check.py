"""Real-GPU check of the memory spy (issue 31), for a session that draws a GPU machine.

Prepared and tried here without a GPU (it must say so in one line and exit 3); it has not
run on a GPU yet. Device memory is allocated through the CUDA driver API with ctypes on
``libcuda.so`` (``cuInit``, a primary context, ``cuMemAlloc``/``cuMemFree``: no torch,
no CUDA toolkit), in steps of 256 MiB up to 4 GiB and back, 50 ms apart, under the three
entry points that read NVML:

1. ``start_spying_on(cuda=True)`` in this process;
2. ``spy --cuda -- python gpu_check.py --child`` (the ladder in a child process);
3. ``run --probe nvml -o report.json gpu_check.py --child``.

Each records the monitor's peak against the allocated peak: NVML counts the CUDA context
too, so the context's own memory is measured apart (NVML's usage of the process once the
context exists, before the first allocation) and the peak less it must be within 3 % of
the allocated peak. Then: the spy's start and stop latency (median of 10), the shortest
spike caught at ``delay=0.01`` (1 GiB held 100, 50, 20, 10, 5, 2, 1 ms; 10 tries each),
the per-process attribution (this process's line against the device-wide one, and the
command's pid under ``spy`` and ``run``), and a device index that does not exist (the
driver's error, named; the spy measuring a command that fails on it).

On the device machine (no package registry there): carry the wheel of nvidia-ml-py,
``pip download nvidia-ml-py -d wheels/`` here, then there::

    python -m pip install --no-index --target /tmp/pylib wheels/nvidia_ml_py-*.whl
    PYTHONPATH=.:/tmp/pylib timeout 300 python benchmarks/gpu_check.py --json gpu.json

Exit code 0 when every check holds, 1 when one fails (the figures are printed anyway),
3 when there is no GPU (no ``libcuda.so``, or no device). ``--top`` and ``--step`` (MiB)
shrink the ladder, ``--pause`` (ms) spaces its steps, ``--quick`` cuts the spike and
latency repeats (what the test marked ``gpu`` runs). ``tests/memory/test_memory_gpu.py``
dry-runs it here on a fake driver (``tests/data/fake_gpu``).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

MIB = 2**20
GIB = 2**30
TOLERANCE = 0.03  # the monitor's peak less the context, against the allocated peak
EXIT_NO_GPU = 3
CHILD_TIMEOUT = 120.0
_PACKAGE = "onnxrt_backend_dev.monitoring"


class NoGpu(RuntimeError):
    """No CUDA driver library, or no device: the check cannot run here."""


class CudaError(RuntimeError):
    """A driver call failed; the message names the call, the error's name and its text."""


class Driver:
    """The few CUDA driver API calls the check needs, through ctypes.

    :param lib: the loaded ``libcuda.so``
    """

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.context = ctypes.c_void_p()
        self.device: int | None = None

    @classmethod
    def load(cls) -> Driver:
        """Loads the driver library and initializes it.

        :raises NoGpu: no driver library, or it cannot initialize (no device)
        """
        lib = None
        for name in ("libcuda.so.1", "libcuda.so"):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if lib is None:
            raise NoGpu("no NVIDIA driver here: libcuda.so cannot be loaded")
        driver = cls(lib)
        try:
            driver.call("cuInit", ctypes.c_uint(0))
        except CudaError as e:
            raise NoGpu(f"the CUDA driver cannot start: {e}") from None
        if driver.device_count() < 1:
            raise NoGpu("the CUDA driver sees no device")
        return driver

    def _error(self, code: int) -> str:
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self.lib.cuGetErrorName(code, ctypes.byref(name))
        self.lib.cuGetErrorString(code, ctypes.byref(text))
        return f"{_text(name)}: {_text(text)}"

    def call(self, function: str, *args: Any) -> None:
        """Calls a driver function.

        :raises CudaError: it did not return CUDA_SUCCESS
        """
        code = getattr(self.lib, function)(*args)
        if code != 0:
            shown = ", ".join(
                "&" if type(a).__name__ == "CArgObject" else str(getattr(a, "value", a))
                for a in args
            )  # a pointer to an output as "&"
            raise CudaError(f"{function}({shown}): {self._error(code)}")

    def device_count(self) -> int:
        count = ctypes.c_int()
        self.call("cuDeviceGetCount", ctypes.byref(count))
        return count.value

    def version(self) -> str:
        version = ctypes.c_int()
        self.call("cuDriverGetVersion", ctypes.byref(version))
        return f"{version.value // 1000}.{version.value % 1000 // 10}"

    def name(self, index: int) -> str:
        device, name = ctypes.c_int(), ctypes.create_string_buffer(256)
        self.call("cuDeviceGet", ctypes.byref(device), ctypes.c_int(index))
        self.call("cuDeviceGetName", name, ctypes.c_int(256), device)
        return name.value.decode()

    def open(self, index: int = 0) -> None:
        """Retains device ``index``'s primary context and makes it current.

        :raises CudaError: no such device (``CUDA_ERROR_INVALID_DEVICE``)
        """
        device = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(device), ctypes.c_int(index))
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(self.context), device)
        self.call("cuCtxSetCurrent", self.context)
        self.device = device.value

    def alloc(self, nbytes: int) -> int:
        pointer = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(pointer), ctypes.c_size_t(nbytes))
        return pointer.value

    def free(self, pointer: int) -> None:
        self.call("cuMemFree_v2", ctypes.c_uint64(pointer))

    def close(self) -> None:
        if self.device is not None:
            self.lib.cuDevicePrimaryCtxRelease_v2(ctypes.c_int(self.device))
            self.device = None


def _text(pointer: ctypes.c_char_p) -> str:
    return pointer.value.decode(errors="replace") if pointer.value else "?"


def ladder(driver: Driver, step: int, top: int, pause: float = 0.05) -> int:
    """Allocates ``step`` bytes at a time up to ``top``, then frees them back, ``pause``
    seconds apart.

    :return: the allocated peak, bytes
    """
    held: list[int] = []
    try:
        while len(held) * step < top:
            held.append(driver.alloc(step))
            time.sleep(pause)
        peak = len(held) * step
        while held:
            driver.free(held.pop())
            time.sleep(pause)
    finally:
        for pointer in held:
            driver.free(pointer)
    return peak


def spike(driver: Driver, nbytes: int, hold: float) -> None:
    """Allocates ``nbytes``, holds them ``hold`` seconds, frees them."""
    pointer = driver.alloc(nbytes)
    try:
        end = time.perf_counter() + hold
        while time.perf_counter() < end:  # busy: a sleep this short overshoots
            pass
    finally:
        driver.free(pointer)


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _child_line(stdout: str) -> dict[str, Any]:
    """The child's own figures: its one JSON line among what the command printed."""
    line = next((s for s in stdout.splitlines() if s.startswith("{")), "{}")
    doc = json.loads(line)
    return doc if isinstance(doc, dict) else {}


def nvml_facts() -> dict[str, Any]:
    """The GPU's model, the driver version and this process's usage per GPU (NVML)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        version = pynvml.nvmlSystemGetDriverVersion()
        return {
            "gpu": name.decode() if isinstance(name, bytes) else name,
            "driver": version.decode() if isinstance(version, bytes) else version,
            "count": pynvml.nvmlDeviceGetCount(),
        }
    finally:
        pynvml.nvmlShutdown()


def process_usage(pid: int, index: int = 0) -> float | None:
    """NVML's usage of one process on GPU ``index`` (None if the driver does not say)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        used = [p.usedGpuMemory for p in procs if p.pid == pid]
        return None if not used or used[0] is None else float(used[0])
    finally:
        pynvml.nvmlShutdown()


def _within(peak: float, context: float, allocated: float) -> dict[str, Any]:
    net = peak - context
    error = net / allocated - 1.0 if allocated else float("nan")
    return {
        "peak": peak,
        "context": context,
        "peak_less_context": net,
        "allocated": allocated,
        "error": error,
        "ok": abs(error) <= TOLERANCE,
    }


# --- the checks ---------------------------------------------------------------------------


def check_library(driver: Driver, step: int, top: int, pause: float) -> dict[str, Any]:
    """The ladder under ``start_spying_on(cuda=True)`` in this process: the process's
    line (its context measured apart: its usage when the spy starts) and the device's."""
    from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

    spy = start_spying_on(cuda=True)
    allocated = ladder(driver, step, top, pause)
    stat = spy.stop()
    process, device = stat["gpus_process"][0], stat["gpus"][0]
    doc = _within(process.max_peak, process.begin, allocated)
    doc["device_peak_less_begin"] = device.max_peak - device.begin
    doc["process_line"] = process.summary()
    doc["device_line"] = device.summary()
    return doc


def _child_command(step: int, top: int, pause: float = 0.05, device: int = 0) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), "--child", "--step", str(step // MIB),
            "--top", str(top // MIB), "--pause", str(pause * 1e3),
            "--device", str(device)]  # fmt: skip


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", _PACKAGE, *args],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )


def check_spy_command(step: int, top: int, pause: float, folder: str) -> dict[str, Any]:
    """The ladder in a child under ``spy --cuda``: its line is the command's."""
    path = os.path.join(folder, "spy.json")
    proc = _cli("spy", "-q", "--cuda", "--json", path, "--", *_child_command(step, top, pause))
    if proc.returncode != 0:
        return {"ok": False, "error": proc.stderr.strip()[-2000:]}
    doc = _read_json(path)
    child = _child_line(proc.stdout)
    if "allocated" not in child:
        return {"ok": False, "error": f"the child printed no figures: {proc.stdout[-500:]}"}
    out = _within(doc["gpu0:process"]["peak"], child["context"], child["allocated"])
    out["device_peak"] = doc["gpu0"]["peak"]
    return out


def check_run_command(step: int, top: int, pause: float, folder: str) -> dict[str, Any]:
    """The ladder as a program under ``run --probe nvml``: the report's process line."""
    path = os.path.join(folder, "run.json")
    child = _child_command(step, top, pause)
    proc = _cli("run", "-q", "--probe", "nvml", "-o", path, child[1], *child[2:])
    if proc.returncode != 0:
        return {"ok": False, "error": proc.stderr.strip()[-2000:]}
    report = _read_json(path)
    devices = {d["name"]: d for d in report["devices"]}
    facts = _child_line(proc.stdout)
    process = devices.get("nvml:gpu0:process")
    if process is None or "allocated" not in facts:
        return {
            "ok": False,
            "error": f"no process line: {sorted(devices)}",
            "notes": report["notes"],
        }
    out = _within(process["peak"], facts["context"], facts["allocated"])
    out["devices"] = sorted(devices)
    return out


def check_latency(repeat: int) -> dict[str, Any]:
    """Median seconds from ``start_spying_on(cuda=True)`` to ready, and of ``stop()``."""
    from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

    starts, stops = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        spy = start_spying_on(cuda=True)
        t1 = time.perf_counter()
        spy.stop()
        stops.append(time.perf_counter() - t1)
        starts.append(t1 - t0)
    return {"start_median": statistics.median(starts), "stop_median": statistics.median(stops),
            "start_max": max(starts), "stop_max": max(stops), "repeat": repeat}  # fmt: skip


def check_spikes(driver: Driver, holds: list[float], tries: int) -> dict[str, Any]:
    """How often a 1 GiB spike held ``hold`` seconds is caught at ``delay=0.01``."""
    from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

    caught: dict[str, int] = {}
    for hold in holds:
        hits = 0
        for _ in range(tries):
            spy = start_spying_on(cuda=True, delay=0.01)
            time.sleep(0.02)  # a tick or two before the spike
            spike(driver, GIB, hold)
            time.sleep(0.02)
            process = spy.stop()["gpus_process"][0]
            hits += process.max_peak - process.begin >= 0.9 * GIB
        caught[f"{hold * 1e3:g} ms"] = hits
    always = [h for h in holds if caught[f"{h * 1e3:g} ms"] == tries]
    return {"caught": caught, "tries": tries, "shortest_always_caught_ms":
            min(always) * 1e3 if always else None}  # fmt: skip


def check_bad_device(driver: Driver, folder: str) -> dict[str, Any]:
    """A device index that does not exist: the driver's error named; ``spy --cuda``
    measuring a command that fails on it reports the command's exit code."""
    index = driver.device_count() + 7
    try:
        Driver(driver.lib).open(index)
        error = "no error"
    except CudaError as e:
        error = str(e)
    proc = _cli("spy", "-q", "--cuda", "--", *_child_command(256 * MIB, 256 * MIB, device=index))
    return {
        "index": index,
        "driver_error": error,
        "clear": "INVALID_DEVICE" in error,
        "spy_exit_code": proc.returncode,
        "spy_stderr": proc.stderr.strip()[-500:],
        "ok": "INVALID_DEVICE" in error and proc.returncode == 1,
    }


def child(step: int, top: int, pause: float, index: int) -> int:
    """The ladder alone (``--child``): prints its own figures as one JSON line (the
    context measured through NVML before the first allocation)."""
    try:
        driver = Driver.load()
        driver.open(index)
    except (NoGpu, CudaError) as e:
        sys.stderr.write(f"gpu_check --child: {e}\n")
        return 1
    time.sleep(0.1)  # the spy's first ticks see the context alone
    context = process_usage(os.getpid(), index) or 0.0
    allocated = ladder(driver, step, top, pause)
    print(json.dumps({"pid": os.getpid(), "context": context, "allocated": allocated}))
    driver.close()
    return 0


def run_checks(step: int, top: int, pause: float, quick: bool) -> dict[str, Any]:
    """Every check; raises :class:`NoGpu` without a GPU."""
    driver = Driver.load()
    try:
        import pynvml  # noqa: F401
    except ImportError:
        raise NoGpu("nvidia-ml-py is not installed (carry its wheel: see the module)") from None
    facts = {**nvml_facts(), "cuda_driver_api": driver.version(), "device0": driver.name(0)}
    driver.open(0)
    results: dict[str, Any] = {"machine": platform.node(), "facts": facts,
                               "date": time.strftime("%Y-%m-%d")}  # fmt: skip
    steps: list[tuple[str, Callable[[], dict[str, Any]]]]
    with tempfile.TemporaryDirectory() as folder:
        steps = [
            ("library", lambda: check_library(driver, step, top, pause)),
            ("spy_command", lambda: check_spy_command(step, top, pause, folder)),
            ("run_command", lambda: check_run_command(step, top, pause, folder)),
            ("latency", lambda: check_latency(3 if quick else 10)),
            ("spikes", lambda: check_spikes(
                driver, [0.01, 0.002] if quick else [0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001],
                3 if quick else 10)),
            ("bad_device", lambda: check_bad_device(driver, folder)),
        ]  # fmt: skip
        for name, check in steps:
            t0 = time.perf_counter()
            try:
                results[name] = check()
            except Exception as e:  # one check failing must not hide the others' figures
                results[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            results[name]["seconds"] = round(time.perf_counter() - t0, 2)
            print(f"{name}: {json.dumps(results[name])}", flush=True)
    driver.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", action="store_true", help="run the ladder alone")
    parser.add_argument("--step", type=int, default=256, help="MiB per allocation (256)")
    parser.add_argument("--top", type=int, default=4096, help="MiB at the top (4096)")
    parser.add_argument("--pause", type=float, default=50.0, help="ms between two steps (50)")
    parser.add_argument("--device", type=int, default=0, help="--child: the device index")
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--json", default=None, help="also write the figures there")
    args = parser.parse_args(argv)
    if args.child:
        return child(args.step * MIB, args.top * MIB, args.pause / 1e3, args.device)
    try:
        results = run_checks(args.step * MIB, args.top * MIB, args.pause / 1e3, args.quick)
    except NoGpu as e:
        print(f"gpu_check: no GPU here: {e}")
        return EXIT_NO_GPU
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    checks = [v for v in results.values() if isinstance(v, dict) and "ok" in v]
    return 0 if all(c["ok"] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
