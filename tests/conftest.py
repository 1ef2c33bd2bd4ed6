"""Shared fixtures. This folder is put on ``sys.path`` by pytest (it holds this file and no
``__init__.py``), so every test imports the shared modules by name: ``helpers`` (CLI runs,
subprocesses, headless chromium, the data folder) and ``fakes`` (clock, probes, procfs,
NVML); the spy process imports ``fakes`` by name too, as its fake NVML module."""

from __future__ import annotations

import pytest
from fakes import FakeClock


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock at 0 s that only moves when the statement under test advances it."""
    return FakeClock()
