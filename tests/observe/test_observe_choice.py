"""The one choice of collector (``_observe.session.choose``): the observer where it can
run, the in-process fallback otherwise, and why; the one note it gives."""

from __future__ import annotations

import sys

import pytest

from onnxrt_backend_dev.monitoring._errors import BadValue
from onnxrt_backend_dev.monitoring._observe import session


@pytest.mark.parametrize(
    ("asked", "inside", "ok", "python", "observer", "why"),
    [
        ("auto", "", True, None, True, ""),
        ("observer", "", True, None, True, ""),
        ("auto", "", False, None, False, "refused here"),
        ("in-process", "", True, None, False, "collector in-process asked for"),
        ("auto", "--timer real", True, None, False, "--timer real"),
        ("auto", "", True, "/no/python9", False, "'/no/python9' is not"),
        ("auto", "", True, sys.executable, True, ""),
    ],
)
def test_the_choice_and_its_reason(
    monkeypatch: pytest.MonkeyPatch,
    asked: str, inside: str, ok: bool, python: str | None, observer: bool, why: str,
) -> None:  # fmt: skip
    # GIVEN a machine where the observer can run or not
    found = session.Availability(ok, "" if ok else "refused here")
    monkeypatch.setattr(session, "availability", lambda: found)
    # WHEN a face asks THEN the observer is chosen where it can run, the reason otherwise
    choice = session.choose(asked, inside, python)
    assert choice.observer is observer and choice.why.startswith(why)
    # AND the one note names the fallback and the reason, none for the observer
    assert choice.note() == (
        "" if observer else f"collector: the in-process sampler ({choice.why})"
    )


@pytest.mark.parametrize("inside", ["", "--probe torch reads counters inside"])
def test_the_observer_asked_where_it_cannot_run_is_refused(
    monkeypatch: pytest.MonkeyPatch, inside: str
) -> None:
    # GIVEN a machine where it cannot run (or a reason to sample inside)
    found = session.Availability(not inside, "" if inside else "no way")
    monkeypatch.setattr(session, "availability", lambda: found)
    # WHEN the observer is asked for THEN a refusal names the request and why
    with pytest.raises(BadValue, match="--collector 'observer' cannot run here: "):
        session.choose("observer", inside, name="--collector")


def test_the_faces_ask_the_one_choice() -> None:
    # GIVEN the package's source THEN only the choice itself reads the availability
    from helpers import ROOT

    package = ROOT / "onnxrt_backend_dev" / "monitoring"
    readers = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if "availability()" in p.read_text(encoding="utf-8")
    )
    assert readers == ["_observe/session.py"]
