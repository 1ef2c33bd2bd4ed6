"""Every device and every per-process line, in every format, at every entry point (issue
31): two GPUs through the fake NVML (device-wide and this process's usage of each) and
the fake torch allocator (allocated and reserved on each), never cut, the CUDA context
named where it is measured apart. The spy's results (text, JSON, CSV, the plot), the
report of ``monitor()`` and ``run`` (text, HTML, JSON), the magics and the pytest
fixture."""

from __future__ import annotations

import csv
import html
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli

from onnxrt_backend_dev.monitoring._memory.series import CONTEXT_WORDS
from onnxrt_backend_dev.monitoring._report.build import build_report
from onnxrt_backend_dev.monitoring._report.model import Ending
from onnxrt_backend_dev.monitoring._report.render_html import to_html
from onnxrt_backend_dev.monitoring._report.render_json import from_json, to_json
from onnxrt_backend_dev.monitoring._report.render_text import to_text
from onnxrt_backend_dev.monitoring._report.session import facts_of, monitor
from onnxrt_backend_dev.monitoring._sampling.aggregate import Aggregator
from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

MIB = 2**20
GIB = 2**30
REAL_TIMEOUT = 60
NVML = ["nvml:gpu0", "nvml:gpu1", "nvml:gpu0:process", "nvml:gpu1:process"]
TORCH = ["torch:cuda0", "torch:cuda1", "torch:cuda0:reserved", "torch:cuda1:reserved"]

pytest_plugins = ["pytester"]


# --- the report's renderers, from plain facts -------------------------------------------------


def _facts_report() -> Any:
    """A report whose facts hold two GPUs seen by NVML (from the spy) and by torch (from
    the program), as ``run`` gathers them from two processes."""
    uuid = "00000000-0000-0000-0000-00000000000{}".format

    def extras(role: str, device: int, prefix: str = "") -> dict[str, Any]:
        return {"role": role, "uuid": prefix + uuid(device)}

    nvml = [
        ("nvml:gpu0", 3.81 * GIB, GIB, GIB, extras("device", 0, "GPU-")),
        ("nvml:gpu1", 2 * GIB, GIB, GIB, extras("device", 1, "GPU-")),
        ("nvml:gpu0:process", 3.4 * GIB, 0, 900 * MIB, extras("process", 0, "GPU-")),
        ("nvml:gpu1:process", 600 * MIB, 0, 600 * MIB, extras("process", 1, "GPU-")),
    ]
    site = ("train_step", "train.py", 12)
    torch = [
        ("torch:cuda0", 3000 * MIB, 0, 100 * MIB, {**extras("allocated", 0), "site": site}),
        ("torch:cuda1", 10 * MIB, 0, 10 * MIB, extras("allocated", 1)),
        ("torch:cuda0:reserved", 3100 * MIB, 0, 400 * MIB, extras("reserved", 0)),
        ("torch:cuda1:reserved", 100 * MIB, 0, 100 * MIB, extras("reserved", 1)),
    ]
    curves = [(d[0], [0.0, 1.0], [float(d[2]), float(d[1])], "x") for d in nvml + torch]
    facts = {"devices": nvml + torch, "curves": curves, "wall": 1.0, "cpu": 0.5, "t0": 0.0}
    return build_report(Aggregator(), facts_of("train.py", 0.005, Ending("exit", 0, "ok"), facts))


def test_every_device_channel_in_the_report_text() -> None:
    text = to_text(_facts_report())
    lines = text.splitlines()
    # THEN one line for each of the 8 channels, named by what it measures
    for name in NVML + TORCH:
        assert sum(line.startswith(f"{name} (") for line in lines) == 1, (name, text)
    assert "nvml:gpu0 (device-wide, every process): peak 3.81 GiB" in text
    assert "nvml:gpu1:process (this process): peak 600 MiB" in text
    # AND the CUDA context measured apart: NVML's 900 MiB less torch's 400 MiB reserved
    assert f"nvml:gpu0:process (this process): peak 3.40 GiB, begin 0 B, end 900 MiB, of which " \
        f"500 MiB {CONTEXT_WORDS}" in text  # fmt: skip
    assert f"of which 500 MiB {CONTEXT_WORDS}" in text
    # AND the line where torch's peak rose
    assert "torch:cuda0 (allocated, the allocator's exact peak): peak 2.93 GiB" in text
    assert "the peak rose in train_step (train.py:12)" in text


def test_every_device_channel_in_the_report_html() -> None:
    page = html.unescape(to_html(_facts_report()))
    assert "<h2>Devices</h2>" in page
    for name in NVML + TORCH:
        assert f'<td class="l">{name}</td>' in page, name  # the table
        assert f"{name} (peak" in page, name  # the curves' legend
    assert f"of which 500 MiB {CONTEXT_WORDS}" in page
    assert "the peak rose in train_step (train.py:12)" in page


def test_every_device_channel_in_the_report_json() -> None:
    report = _facts_report()
    doc = json.loads(to_json(report))
    assert [d["name"] for d in doc["devices"]] == NVML + TORCH
    by_name = {d["name"]: d for d in doc["devices"]}
    assert by_name["nvml:gpu0:process"]["context"] == 500 * MIB
    assert by_name["nvml:gpu1:process"]["context"] == 500 * MIB
    assert by_name["torch:cuda0"]["site"]["function"] == "train_step"
    assert by_name["nvml:gpu0"]["role"] == "device" and by_name["nvml:gpu0"]["context"] is None
    assert from_json(to_json(report)) == report


def test_a_report_written_before_the_roles_still_reads() -> None:
    doc = json.loads(to_json(_facts_report()))
    for device in doc["devices"]:
        for key in ("role", "context", "site", "uuid"):
            device.pop(key)
    report = from_json(json.dumps(doc))
    assert [d.name for d in report.devices] == NVML + TORCH
    assert "nvml:gpu1:process: peak 600 MiB" in to_text(report)


def test_many_devices_are_never_cut_from_the_text() -> None:
    # GIVEN 8 GPUs, each with 4 channels: 32 lines of devices, and 40 notes
    facts = {
        "devices": [(f"p:gpu{i}:{k}", GIB, 0, 0) for i in range(8) for k in range(4)],
        "notes": [f"n{i}" for i in range(40)],
    }
    report = build_report(Aggregator(), facts_of("x", 0.005, Ending("exit", 0, "ok"), facts))
    text = to_text(report)
    # THEN every device line is there; what follows is cut, and says so
    assert all(f"p:gpu{i}:{k}: peak" in text for i in range(8) for k in range(4))
    assert text.rstrip().splitlines()[-1].startswith("... ")


# --- the report of monitor(), end to end ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_monitor_reads_nvml_and_torch_and_shows_every_channel(
    fake_nvml: str, fake_torch: Any
) -> None:
    # GIVEN a block allocating through torch, with a spike on GPU 1
    with monitor("train", probes=("nvml", "torch")) as m:
        fake_torch.alloc(100 * MIB)
        fake_torch.spike(3000 * MIB, device=1)
    report = m.report
    assert report is not None
    # THEN the report has every channel of both probes, the torch peak exact
    names = [d.name for d in report.devices]
    assert names == NVML + TORCH
    by_name = {d.name: d for d in report.devices}
    assert by_name["torch:cuda1"].peak == fake_torch.max_memory_allocated(1) == 3000 * MIB
    # AND the context: the fake NVML's 256 MiB of this process less torch's reserved
    assert by_name["nvml:gpu0:process"].context == 256 * MIB - fake_torch.memory_reserved(0)
    # AND the line where the spike was seen is this test's (the block's thread)
    site = by_name["torch:cuda1"].site
    assert site is not None and site.file.endswith("test_memory_every_device.py")
    # AND every format shows them all
    text, page = to_text(report), html.unescape(to_html(report))
    doc = json.loads(to_json(report))
    for name in names:
        assert f"{name} (" in text and f'<td class="l">{name}</td>' in page
    assert [d["name"] for d in doc["devices"]] == names
    # AND the reading thread is the tool's: not in the report's threads
    assert "memory-spy-devices" not in text


# --- the spy's results: the library, the command ------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_spy_result_shows_every_channel_in_text_rows_and_plot(
    fake_nvml: str, fake_torch: Any
) -> None:
    stat = start_spying_on(cuda=True, probes=["torch"]).stop()
    text = str(stat)
    for name in ("gpu0", "gpu1", "gpu0:process", "gpu1:process", "cuda0", "cuda1",
                 "cuda0:reserved", "cuda1:reserved"):  # fmt: skip
        assert sum(line.startswith(f"{name}: peak") for line in text.splitlines()) == 1, name
    assert "gpu0:process: peak 256 MiB" in text and CONTEXT_WORDS in text
    channels = {row["channel"] for row in stat.to_rows()}
    assert {"gpu1:process", "cuda1:reserved"} <= channels
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    ax = stat.plot(ax=Figure().subplots())
    labels = ax.get_legend_handles_labels()[1]
    assert {*NVML, *TORCH} <= set(labels)


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_spy_command_shows_every_gpu_line_in_text_json_and_csv(
    fake_nvml: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN a command whose GPU usage the fake NVML reports (it is a child of this process)
    import os

    monkeypatch.setenv("FAKE_NVML_PID", f"children-of:{os.getpid()}")
    report, rows = tmp_path / "r.json", tmp_path / "r.csv"
    code, out, err = run_cli(
        "spy", "-q", "--cuda", "--json", str(report), "--csv", str(rows), "--",
        sys.executable, "-c", "import time; time.sleep(0.2)",
    )  # fmt: skip
    assert code == 0, err
    for name in ("gpu0", "gpu1", "gpu0:process", "gpu1:process"):
        assert f"\n{name}: peak" in out, (name, out)
    assert "gpu0:process: peak 256 MiB" in out
    doc = json.loads(report.read_text(encoding="utf-8"))
    assert doc["gpu0:process"]["peak"] == 256 * MIB and doc["gpu1:process"]["peak"] == 0
    with open(rows, newline="", encoding="utf-8") as f:
        channels = {row["channel"] for row in csv.DictReader(f)}
    assert {"gpu0", "gpu1", "gpu0:process", "gpu1:process"} <= channels


# --- the magics and the pytest fixture --------------------------------------------------------


def _shell() -> Any:
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    shell.run_line_magic("load_ext", "onnxrt_backend_dev.monitoring")
    return shell


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_magics_show_every_channel(fake_nvml: str, fake_torch: Any) -> None:
    pytest.importorskip("IPython")
    from IPython.utils.capture import capture_output

    shell = _shell()
    shell.user_ns["fake"] = fake_torch
    try:
        with capture_output() as spied:
            stats = shell.run_cell_magic(
                "spy", "-o --no-plot --cuda --probe torch", "fake.spike(2**30, device=1)\n"
            )
        with capture_output() as monitored:
            report = shell.run_cell_magic(
                "monitor", "-o --probe nvml --probe torch", "fake.spike(2**29)\n"
            )
    finally:
        shell.reset(new_session=False)
    assert stats["torch"][1].max_peak == GIB
    for name in ("gpu1:process", "cuda1", "cuda1:reserved"):
        assert f"\n{name}: peak" in spied.stdout, spied.stdout
    assert [d.name for d in report.devices] == NVML + TORCH
    for name in NVML + TORCH:
        assert f"{name} (" in monitored.stdout, monitored.stdout
    assert "torch:cuda0 (allocated, the allocator's exact peak): peak 512 MiB" in monitored.stdout


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_fixture_shows_every_channel(
    fake_nvml: str, fake_torch: Any, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        """
        import fake_torch_cuda

        def test_block(monitor_memory):
            with monitor_memory("gpu", probes=("nvml", "torch")) as m:
                fake_torch_cuda.spike(2**30, device=1)
            assert m.stats["torch"][1].max_peak == 2**30
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    for name in NVML + TORCH:
        assert f"  {name}: peak" in text, (name, text)
