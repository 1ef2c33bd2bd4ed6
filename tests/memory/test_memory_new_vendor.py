"""A new vendor is one module and one registry line: the fake AMD probe (``fakes.py``),
registered with :func:`register_probe` and nothing else, is read by every entry point that
chooses probes by name: the library, ``spy --probe``, ``%%spy --probe`` and the pytest
fixture."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli

from onnxrt_backend_dev.monitoring._memory import registry
from onnxrt_backend_dev.monitoring.memory_peak import register_probe, start_spying_on

REAL_TIMEOUT = 30
GIB = 2**30

pytest_plugins = ["pytester"]


@pytest.fixture
def fake_amd() -> Iterator[str]:
    # GIVEN the vendor's module (fakes.FakeAmdProbe) and its one registry line
    register_probe("fakeamd", "fakes:FakeAmdProbe", package="fake-amdsmi", extra="amd")
    try:
        yield "fakeamd"
    finally:
        registry.unregister("fakeamd")


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_library_reads_it_by_name(fake_amd: str) -> None:
    stat = start_spying_on(probes=(fake_amd,)).stop()
    assert [m.max_peak for m in stat["amd_gpus"]] == [GIB, 3 * GIB]
    assert list(stat["devices"]) == ["fakeamd:amd0", "fakeamd:amd1"]


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_spy_probe_reads_it_and_writes_it(fake_amd: str, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    code, out, err = run_cli("spy", "-q", "--probe", fake_amd, "--json", str(report), "--", "true")
    assert code == 0, err
    assert "amd1: peak 3.00 GiB" in out
    doc = json.loads(report.read_text(encoding="utf-8"))
    assert doc["amd1"]["peak"] == 3 * GIB


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_spy_magic_reads_it(fake_amd: str) -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell: Any = InteractiveShell.instance(config=config)
    shell.run_line_magic("load_ext", "onnxrt_backend_dev.monitoring")
    try:
        with capture_output() as out:
            stats = shell.run_cell_magic("spy", f"-o --no-plot --probe {fake_amd}", "x = 1\n")
    finally:
        shell.reset(new_session=False)
    assert [m.max_peak for m in stats["amd_gpus"]] == [GIB, 3 * GIB]
    assert "amd0: peak 1.00 GiB" in out.stdout


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_fixture_reads_it(fake_amd: str, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        f"""
        def test_block(monitor_memory):
            with monitor_memory("gpu", probes=("{fake_amd}",)) as m:
                pass
            assert [g.max_peak for g in m.stats["amd_gpus"]] == [2**30, 3 * 2**30]
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
