"""The shared test helpers that decide verdicts: the browser's retry and skip rules."""

from __future__ import annotations

from pathlib import Path

import helpers
import pytest

# A stand-in browser: its behaviour per page is read from files beside it, so each test
# states what a hung or a working chromium does without starting one.
FAKE_BROWSER = """#!/bin/sh
here=$(dirname "$0")
for arg; do url=$arg; done
echo try >> "$here/tries"
case $url in
data:*) mode=$(cat "$here/trivial") ;;
*) mode=$(head -n 1 "$here/page"); tail -n +2 "$here/page" > "$here/page.next"
   [ -s "$here/page.next" ] && mv "$here/page.next" "$here/page" ;;
esac
case $mode in
ok) echo "<html><body>$url</body></html>" ;;
hang) exec sleep 30 ;;
print-then-hang) echo "<html><body>printed</body></html>"; exec sleep 30 ;;
esac
"""


@pytest.fixture
def fake_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "chromium"
    script.write_text(FAKE_BROWSER)
    script.chmod(0o755)
    monkeypatch.setattr(helpers, "browser", lambda: str(script))
    return tmp_path


def _behave(folder: Path, page: list[str], trivial: str = "ok") -> None:
    (folder / "page").write_text("\n".join(page) + "\n")
    (folder / "trivial").write_text(trivial + "\n")


def _tries(folder: Path) -> int:
    return len((folder / "tries").read_text().split())


def test_a_browser_hanging_once_is_retried_with_a_fresh_profile(fake_browser: Path) -> None:
    # GIVEN a browser that hangs on its first start, then works
    _behave(fake_browser, ["hang", "ok"])
    # WHEN a page is loaded THEN the second try's DOM comes back
    assert "file:///page" in helpers.dump_dom("file:///page", timeout=1)
    assert _tries(fake_browser) == 2


def test_a_browser_that_printed_the_dom_and_hangs_on_exit_did_its_job(
    fake_browser: Path,
) -> None:
    _behave(fake_browser, ["print-then-hang"])
    assert "printed" in helpers.dump_dom("file:///page", timeout=1)
    assert _tries(fake_browser) == 1


def test_a_browser_hanging_on_a_trivial_page_too_skips_the_test(fake_browser: Path) -> None:
    # GIVEN a browser that hangs on every page THEN that is the machine: a skip, with why
    _behave(fake_browser, ["hang"], trivial="hang")
    with pytest.raises(pytest.skip.Exception, match="trivial page too"):
        helpers.dump_dom("file:///page", timeout=1)


def test_a_page_that_hangs_where_a_trivial_one_loads_fails(fake_browser: Path) -> None:
    # GIVEN a browser that loads a trivial page but never settles on ours THEN a failure
    _behave(fake_browser, ["hang"])
    with pytest.raises(AssertionError, match="never settled"):
        helpers.dump_dom("file:///page", timeout=1)
    assert _tries(fake_browser) == 4
