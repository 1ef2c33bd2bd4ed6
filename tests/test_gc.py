"""The shared pause of the cyclic garbage collector: restored as it was, exceptions
included, and held where the bulk stages of a comparison run."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from results_data import profile_doc

from onnxrt_backend_dev.monitoring._gc import gc_paused
from onnxrt_backend_dev.monitoring._results import compare, store


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:  # as it was before the test, whatever the test left
        gc.enable()
    else:
        gc.disable()


def test_paused_inside_and_restored_after(collector_on: None) -> None:
    # GIVEN the collector on WHEN a block runs paused, nested, then raises
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        # THEN the inner block leaves it off for the outer one
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError), gc_paused():
        raise KeyError("x")
    # THEN an exception restores it too
    assert gc.isenabled()


def test_a_collector_turned_off_stays_off(collector_on: None) -> None:
    # GIVEN the user turned the collector off WHEN a paused block ends THEN it stays off
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_loading_and_comparing_run_paused(
    collector_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two profiles, and a spy on the comparison's profile section and on the check
    text, b = store.json.dumps(profile_doc(5, seed=1)), profile_doc(5, seed=2)
    seen: dict[str, bool] = {}
    section, check = compare._SECTIONS["profile"], store.check_result

    def spy_section(*args: Any) -> Any:
        seen["compare"] = gc.isenabled()
        return section(*args)

    def spy_check(doc: Any) -> Any:
        seen["load"] = gc.isenabled()
        return check(doc)

    monkeypatch.setitem(compare._SECTIONS, "profile", spy_section)
    monkeypatch.setattr(store, "check_result", spy_check)
    # WHEN a saved profile is parsed and two are compared
    compare.compare_results(store.parse_result(text), b)
    # THEN both bulk stages ran with the collector paused, and it is back on after
    assert seen == {"load": False, "compare": False}
    assert gc.isenabled()
