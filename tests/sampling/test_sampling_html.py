"""The sampled profile's page in headless Chromium: both views drawn, the hottest path
open, search, and names made of markup and script shown as text, never run."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from helpers import dump_dom, needs_browser

from onnxrt_backend_dev.monitoring._report.sampling import sample
from onnxrt_backend_dev.monitoring._sampling.model import SampledProfile, ThreadProfile
from onnxrt_backend_dev.monitoring._sampling.render_html import to_html
from onnxrt_backend_dev.monitoring._sampling.result import SamplingResult
from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame

EVIL_FILE = "</script><script>document.title='Y'</script>.py"
EVIL_NAME = "<img src=x onerror=document.title='X'>"
EVIL_THREAD = "<svg onload=document.title='Z'>\u2028&amp;"


def _hostile() -> SampledProfile:
    main = SampledFrame("main", "/home/me/app.py", 1, 2)
    evil = SampledFrame(EVIL_NAME, EVIL_FILE, 3, 4)
    other = SampledFrame("other", "/home/me/app.py", 10, 11)
    stacks: list[tuple[SampledFrame, ...]] = [(main, evil), (main, other)]
    thread = ThreadProfile(
        1, EVIL_THREAD, True, {0: [0.7, 0.7, 7], 1: [0.3, 0.3, 3]},
        [(0.0, 0.7, 0), (0.7, 0.3, 1)],
    )  # fmt: skip
    return SampledProfile(stacks, [thread], 0.002, "prof", 1.0, 1.0, 10, [EVIL_NAME])


def test_hostile_names_are_escaped_in_the_page_source() -> None:
    page = to_html(_hostile())
    assert "</script><script>" not in page
    assert EVIL_NAME not in page and "<svg" not in page
    assert "\u2028" not in page
    # AND the embedded data still reads back as the names
    data = re.search(r'id="profile-data">(.*?)</script>', page, re.S)
    assert data is not None
    doc = json.loads(data.group(1))
    assert doc["threads"][0]["rows"][2]["name"] == EVIL_NAME


def _view(dom: str, name: str) -> str:
    start = dom.index(f'id="view-{name}"')
    return dom[start:]


@needs_browser
@pytest.mark.parametrize("view", ["tree", "timeline"])
def test_hostile_names_render_inert_in_both_views(tmp_path: Path, view: str) -> None:
    # GIVEN a page of hostile names
    path = tmp_path / "evil.html"
    path.write_text(to_html(_hostile()), encoding="utf-8")
    written = re.search(r"<title>(.*?)</title>", path.read_text("utf-8"))
    assert written is not None
    # WHEN it is opened on either view
    dom = dump_dom(path.as_uri() + f"#{view}")
    # THEN no script of the profile ran: the title is the page's, the ready mark is set
    title = re.search(r"<title>(.*?)</title>", dom)
    assert title is not None and title.group(1) == written.group(1)
    assert 'data-ready="yes"' in dom
    # AND the names were drawn as text in the view shown
    part = _view(dom, view)
    assert "&lt;img src=x onerror=" in part
    assert "<img" not in dom and "<svg" not in dom
    if view == "timeline":
        assert 'class="box b-user"' in part


def _work(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sorted(range(2000), key=lambda x: -x)


@needs_browser
def test_a_real_run_opens_on_the_hottest_path(tmp_path: Path) -> None:
    # GIVEN a real run of _work
    result: SamplingResult = sample(_work, 0.2)
    path = tmp_path / "run.html"
    assert result.export(path) == "html"
    # WHEN opened THEN the user's function is drawn, visible (not hidden), on the tree
    dom = dump_dom(path.as_uri())
    rows = re.findall(r'<div class="row k-(\w+)( hidden)?"[^>]*>(.*?)</div>', dom)
    visible = [body for _kind, hidden, body in rows if not hidden]
    assert any(">_work<" in body for body in visible)
    # AND searching is wired: the page is drawn and the search box is there
    assert 'id="search"' in dom
