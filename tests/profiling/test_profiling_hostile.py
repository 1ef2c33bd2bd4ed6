"""Hostile and broken profiles: refused with one error naming the file, or rendered
inert (checked in a real browser); nothing of them reaches a page unescaped."""

from __future__ import annotations

import cProfile
import io
import marshal
import math
import os
import pickle
import random
import re
import tempfile
from pathlib import Path
from pstats import Stats
from typing import Any

import pytest
from helpers import DATA as _DATA
from helpers import dump_dom, needs_browser, run_cli

from onnxrt_backend_dev.monitoring._profiling.load import (
    ProfileFormatError,
    _all_valid,
    validate_stats,
)
from onnxrt_backend_dev.monitoring._profiling.render_forest_html import safe_count, safe_time
from onnxrt_backend_dev.monitoring.profiling import (
    ProfileNode,
    profile2df,
    profile2graph,
    to_html,
    to_speedscope,
)

XSS = "<img src=x onerror=\"document.title='X'\">"
MAIN = ("prog.py", 1, "main")
WORK = ("prog.py", 5, "work")


def _good() -> dict[Any, Any]:
    """A small well-formed profile: main -> work."""
    return {
        MAIN: (1, 1, 0.5, 2.0, {}),
        WORK: (3, 3, 1.5, 1.5, {MAIN: (3, 3, 1.5, 1.5)}),
    }


def _with(change: Any) -> bytes:
    stats = _good()
    change(stats)
    return marshal.dumps(stats)


def _real_dump() -> bytes:
    pr = cProfile.Profile()
    pr.enable()
    sorted(range(100), key=str)
    pr.disable()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.prof")
        Stats(pr).dump_stats(path)
        return Path(path).read_bytes()


def _set(key: Any, value: Any) -> Any:
    def change(stats: dict[Any, Any]) -> None:
        stats[key] = value

    return change


# name -> (file content, what the message says)
BAD_FILES: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "the file is empty"),
    "truncated": (_real_dump()[:-40], "not a marshal dump of pstats data"),
    "random": (random.Random(5).randbytes(3000), "cannot read profile"),
    "pickled": (pickle.dumps(_good(), protocol=4), "it is a pickle"),
    "text": (b"def f():\n    return 1\n", "cannot read profile"),
    "a list": (marshal.dumps([1, 2, 3]), "not a marshal dump of pstats data (it does not start"),
    "no function": (marshal.dumps({}), "the profile holds no function"),
    "string count in a caller entry": (
        _with(_set(WORK, (3, 3, 1.5, 1.5, {MAIN: (XSS, 3, 1.5, 1.5)}))),
        "the first call count of the call ('prog.py', 1, 'main') -> ('prog.py', 5, 'work') "
        "must be an int, got str",
    ),
    "string count": (_with(_set(MAIN, ("1", 1, 0.5, 2.0, {}))), "must be an int, got str"),
    "bool count": (_with(_set(MAIN, (True, 1, 0.5, 2.0, {}))), "must be an int, got bool"),
    "NaN time": (
        _with(_set(MAIN, (1, 1, math.nan, 2.0, {}))),
        "the own time of ('prog.py', 1, 'main') must be a finite number, got nan",
    ),
    "infinite time": (
        _with(_set(WORK, (3, 3, 1.5, 1.5, {MAIN: (3, 3, 1.5, math.inf)}))),
        "must be a finite number, got inf",
    ),
    "short entry": (_with(_set(MAIN, (1, 1, 0.5))), "must be a (cc, nc, tt, ct, callers) tuple"),
    "key not a tuple": (_with(_set("main", (1, 1, 0.5, 2.0, {}))), "a function key must be"),
    "callers not a dict": (_with(_set(MAIN, (1, 1, 0.5, 2.0, [1]))), "must be a dict, got list"),
    "edge of 3 figures": (
        _with(_set(WORK, (3, 3, 1.5, 1.5, {MAIN: (3, 3, 1.5)}))),
        "must be a count or a (nc, cc, tt, ct) tuple",
    ),
}


@pytest.fixture(params=sorted(BAD_FILES))
def bad_file(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    content, message = BAD_FILES[request.param]
    path = tmp_path / "bad.prof"
    path.write_bytes(content)
    return path, message


def test_bad_profile_is_one_error_naming_the_file(
    bad_file: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, message = bad_file
    for load in (profile2graph, profile2df, to_html):
        with pytest.raises(ProfileFormatError) as info:
            load(str(path))
        assert str(info.value).startswith(f"cannot read profile {str(path)!r}: ")
        assert message in str(info.value)
    # pstats never read the file: nothing printed
    assert capsys.readouterr() == ("", "")


def test_bad_profile_in_profile_show(
    bad_file: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, message = bad_file
    code, out, err = run_cli("profile", "show", str(path))
    assert (code, out) == (1, "")
    assert err.startswith(f"error: cannot read profile {str(path)!r}: ")
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert capsys.readouterr() == ("", "")  # nothing on the real stdout either


def test_the_fast_check_agrees_with_the_slow_one() -> None:
    # validate_stats checks column by column first; anything it doubts goes through the
    # value-by-value check that names the problem: the fast one never accepts bad data
    for content, _ in BAD_FILES.values():
        try:
            data = marshal.loads(content)
        except (EOFError, ValueError, TypeError):
            continue
        if isinstance(data, dict) and data:
            assert not _all_valid(data)
    good = marshal.loads(_real_dump())
    assert _all_valid(good) and _all_valid(_good())
    profile_module = marshal.loads((_DATA / "profile_module.prof").read_bytes())
    assert _all_valid(profile_module)


def test_missing_profile_in_profile_show(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.prof")
    code, out, err = run_cli("profile", "show", missing)
    assert (code, out) == (1, "")
    assert err == f"error: cannot read profile {missing!r}: No such file or directory\n"


def test_second_bad_file_is_named(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.prof", tmp_path / "bad.prof"
    good.write_bytes(marshal.dumps(_good()))
    bad.write_bytes(b"\x00\x01")
    code, _, err = run_cli("profile", "show", str(good), str(bad))
    assert code == 1 and f"{str(bad)!r}" in err and "good.prof" not in err


class _Stats:
    def __init__(self, stats: dict[Any, Any]) -> None:
        self.stats = stats


def test_in_memory_stats_are_validated_too() -> None:
    stats = _good()
    stats[MAIN] = (1, 1, 0.5, math.inf, {})
    with pytest.raises(ProfileFormatError, match=r"cannot read profile 'ps': .* got inf"):
        profile2graph(_Stats(stats))
    with pytest.raises(ProfileFormatError, match=r"'ps\[1\]'"):
        profile2graph([_Stats(_good()), _Stats(stats)])
    assert validate_stats(_good()) == _good()


def test_the_profile_modules_code_object_names_load() -> None:
    stats = _good()
    code = compile("1", "x.py", "exec")
    stats[("profile", 0, code)] = (1, 1, 0.0, 0.0, {})
    _, nodes = profile2graph(_Stats(stats))
    assert any("code object" in k for k in nodes)


# ---------------------------------------------------------------- hand-made graphs


def test_hand_made_graph_with_a_bad_count_is_refused_in_html() -> None:
    node = ProfileNode("a.py", 1, "f", XSS, 1, 0.1, 0.2)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        to_html(node)
    node = ProfileNode("a.py", 1, "f", 1.5, 1, 0.1, 0.2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"nc1 of 'a.py:1:f' must be an integer, got float"):
        to_html(node)


def test_hand_made_graph_with_infinite_times_gives_no_infinity_token() -> None:
    node = ProfileNode("a.py", 1, "f", 1, 1, 0.1, math.inf)
    with pytest.raises(ValueError):
        to_html(node)
    with pytest.raises(ValueError, match="Out of range float"):
        node.to_json()


def test_safe_helpers() -> None:
    assert safe_count(3) == 3 and safe_count(3.0) == 3
    for bad in ("3", 1.5, math.nan, math.inf, True, None):
        with pytest.raises(ValueError, match="must be an integer"):
            safe_count(bad)
    assert safe_time(1) == 1.0
    for bad in ("1", math.nan, -math.inf, False):
        with pytest.raises(ValueError, match="must be a finite number"):
            safe_time(bad)


# ---------------------------------------------------------------- text rows


def test_to_text_fct_width_is_bounded() -> None:
    root, _ = profile2graph(_Stats(_good()))
    for bad in (-1, 1001, 10**9, "60", 60.0, True, None):
        with pytest.raises(ValueError, match=r"fct_width must be an int in \[0, 1000\], got"):
            root.to_text(fct_width=bad)  # type: ignore[arg-type]
    assert root.to_text(fct_width=0).startswith("main -- ")
    assert len(root.to_text(fct_width=1000).splitlines()[0]) > 1000


def test_a_name_with_a_newline_stays_on_its_row() -> None:
    stats = _good()
    odd = ("pro\ng.py", 9, "evil\nname\r\u2028x\tend")
    stats[odd] = (1, 1, 0.25, 0.25, {MAIN: (1, 1, 0.25, 0.25)})
    root, _ = profile2graph(_Stats(stats))
    lines = root.to_text().splitlines()
    assert len(lines) == 3
    row = next(ln for ln in lines if "evil" in ln)
    assert row.lstrip().startswith("evil\\nname\\r\\u2028x\\tend ")
    assert row.endswith(
        " -- pro\\ng.py:9:evil\\nname\\r\\u2028x\\tend (evil\\nname\\r\\u2028x\\tend)"
    )


# ---------------------------------------------------------------- in a browser


def _dump_dom(url: str) -> str:
    """The DOM after the page's scripts ran (and image errors fired)."""
    return dump_dom(url, virtual_time_ms=2000)


def _hostile_names_file(path: Path) -> None:
    stats = _good()
    evil_file = "</script><script>document.title='Y'</script>.py"
    stats[(evil_file, 3, XSS)] = (2, 2, 0.75, 0.75, {MAIN: (2, 2, 0.75, 0.75)})
    stats[("x.py", 4, "a\u2028b&amp;<svg onload=document.title='Z'>")] = (
        1,
        1,
        0.5,
        0.5,
        {MAIN: (1, 1, 0.5, 0.5)},
    )
    path.write_bytes(marshal.dumps(stats))


@pytest.mark.slow
@needs_browser
@pytest.mark.parametrize("view", ["tree", "reference"])
def test_hostile_names_render_inert_in_a_browser(tmp_path: Path, view: str) -> None:
    # GIVEN a profile whose names are markup and script, rendered by `profile show`
    prof, page = tmp_path / "evil.prof", tmp_path / "evil.html"
    _hostile_names_file(prof)
    code, _, err = run_cli("profile", "show", str(prof), "-o", str(page), "-q", "--view", view)
    assert code == 0, err
    html = page.read_text("utf-8")
    assert "</script><script>" not in html and XSS not in html
    written = re.search(r"<title>(.*?)</title>", html)
    assert written is not None and written.group(1).startswith("Call tree")
    # WHEN the page is opened THEN no script of the profile ran (the title is the page's)
    dom = _dump_dom(page.as_uri())
    title = re.search(r"<title>(.*?)</title>", dom)
    assert title is not None and title.group(1) == written.group(1)
    # and the names show as text: the tree was drawn, escaped
    tree = dom[dom.index('<div id="view-tree">' if view == "tree" else '<div id="tree">') :]
    assert "&lt;img src=x onerror=" in tree and "&lt;svg onload=" in tree
    assert "<img" not in tree and "<svg" not in tree
    # GIVEN the same markup as a call count in a caller entry THEN no page: refused
    bad, bad_page = tmp_path / "count.prof", tmp_path / "count.html"
    bad.write_bytes(BAD_FILES["string count in a caller entry"][0])
    code, _, err = run_cli("profile", "show", str(bad), "-o", str(bad_page), "-q")
    assert code == 1 and "must be an int, got str" in err and not bad_page.exists()


def test_speedscope_and_json_of_hostile_names_are_valid_json(tmp_path: Path) -> None:
    import json

    prof = tmp_path / "evil.prof"
    _hostile_names_file(prof)
    doc = json.loads(str(to_speedscope(str(prof))))
    names = {f["name"] for f in doc["shared"]["frames"]}
    assert XSS in names
    root, _ = profile2graph(str(prof))
    stack, fcts = [json.loads(str(root.to_json()))["profile"]], set()
    while stack:
        for item in stack.pop().values():
            fcts.add(item["details"]["fct"])
            stack.append(item.get("calls", {}))
    assert XSS in fcts
    text = io.StringIO()
    text.write(root.to_text())
    assert len(text.getvalue().splitlines()) == 4


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="the cap needs Linux")
def test_a_bomb_inside_a_dict_is_refused_and_the_limit_put_back(tmp_path: Path) -> None:
    import resource

    from onnxrt_backend_dev.monitoring._profiling import load

    # GIVEN a dict whose value announces a tuple of 2**31 items (12 bytes), a real profile
    bomb = tmp_path / "bomb.prof"
    bomb.write_bytes(b"{i\x01\x00\x00\x00(\xff\xff\xff\x7f0")
    real = tmp_path / "real.prof"
    profiler = cProfile.Profile()
    profiler.runcall(sorted, range(100))
    profiler.dump_stats(str(real))
    before = resource.getrlimit(resource.RLIMIT_AS)
    # WHEN read THEN the bomb is refused by name, the profile read, the limit as it was
    with pytest.raises(ProfileFormatError, match=r"'.*bomb\.prof': it announces a container"):
        load.read_profile_file(bomb)
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    assert load.read_profile_file(real).stats
    assert resource.getrlimit(resource.RLIMIT_AS) == before


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="the cap needs Linux")
def test_the_cap_keeps_a_tighter_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    from onnxrt_backend_dev.monitoring._profiling import load

    # GIVEN a soft limit already below the cap (faked: root could not lower it back)
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "getrlimit", lambda _what: (1024, resource.RLIM_INFINITY))
    monkeypatch.setattr(resource, "setrlimit", lambda _what, limits: calls.append(limits))
    # WHEN a read is capped THEN the limit is left alone
    with load._address_space_capped(2**30):
        pass
    assert calls == []
    # AND with no limit, the cap is set then the previous limit put back
    monkeypatch.setattr(resource, "getrlimit", lambda _what: (-1, -1))
    monkeypatch.setattr(resource, "RLIM_INFINITY", -1)
    with load._address_space_capped(2**30):
        assert len(calls) == 1 and calls[0][0] > 2**30 and calls[0][1] == -1
    assert calls[1] == (-1, -1)
