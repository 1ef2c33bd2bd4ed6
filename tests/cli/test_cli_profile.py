"""Tests for the ``profile`` subcommand (_cli/cmd_profile.py): in process, and once as a
subprocess."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import DATA as _DATA
from helpers import Terminal, run_cli, tree_rows

from onnxrt_backend_dev.monitoring._cli import cmd_profile as _cli_profile
from onnxrt_backend_dev.monitoring._cli import dispatch as _cli

DATA = str(_DATA)
SCRIPT = """\
import sys, time
print("argv", sys.argv[1:], __name__)

def busy():
    time.sleep({sleep})

busy()
if "fail" in sys.argv:
    raise ZeroDivisionError("on purpose")
if "exit" in sys.argv:
    sys.exit(int(sys.argv[-1]))
"""


# These tests are of the cProfile path (exact calls, the call graph): the sampled
# default has its own, tests/sampling/test_sampling_cli.py.
_main = functools.partial(run_cli, "profile", "--cprofile")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(SCRIPT.format(sleep=0.01), encoding="utf-8")
    return path


def test_command_is_registered() -> None:
    assert _cli_profile.COMMAND.name == "profile"
    _, commands = _cli.build_parser()
    assert "profile" in commands


def test_runs_script_as_main_with_its_argv(
    script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a script WHEN profiled THEN it runs as __main__ with its own arguments
    code, out, err = _main("-q", str(script), "a", "--b")
    assert code == 0 and err == ""
    assert "argv ['a', '--b'] __main__" in capsys.readouterr().out
    assert "busy" in out and "<module>" in out and out.startswith("Call tree of ")
    # WHEN asked for the reference view THEN its rows are the reference's
    code, out, err = _main("-q", "--view", "reference", str(script), "a", "--b")
    assert code == 0 and "busy" in out and " -- " in out and not out.startswith("Call")


def test_exit_code_and_exception_reported_profile_written(script: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "p.json"
    code, _, err = _main("-o", str(out_file), str(script), "exit", "3")
    assert code == 3 and "exited with code 3" in err
    assert "busy" in out_file.read_text()
    out_file.unlink()
    code, _, err = _main("-o", str(out_file), str(script), "fail")
    assert code == 1
    assert "ZeroDivisionError: on purpose" in err and "Traceback" in err
    assert "prog.py raised ZeroDivisionError" in err
    assert json.loads(out_file.read_text())["profile"]
    assert sys.getprofile() is None


def test_module_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "profmod_cli_test.py").write_text(SCRIPT.format(sleep=0.001))
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = _main("-q", "--format", "collapsed", "-m", "profmod_cli_test", "x")
    assert code == 0, err
    assert any("busy (" in line for line in out.splitlines())
    code, _, err = _main("-m", "no_such_module_xyz")
    assert code == 2 and "no_such_module_xyz" in err
    code, _, err = _main("-m", "email")  # a package without __main__
    assert code == 2 and "'email' is a package and has no __main__ module" in err


@pytest.mark.parametrize(
    ("fmt", "check"),
    [
        ("text", lambda s: "fct4" in s and s.startswith("Call tree of cprofile.prof")),
        ("json", lambda s: "profile" in json.loads(s)),
        ("speedscope", lambda s: json.loads(s)["profiles"][0]["type"] == "sampled"),
        ("collapsed", lambda s: ";" in s),
        ("html", lambda s: s.startswith("<!DOCTYPE html>")),
    ],
)
def test_show_formats(fmt: str, check: object) -> None:
    code, out, _ = _main("show", os.path.join(DATA, "cprofile.prof"), "--format", fmt)
    assert code == 0 and callable(check) and check(out)


def test_show_merges_files_filters_and_writes(tmp_path: Path) -> None:
    files = [os.path.join(DATA, f) for f in ("cprofile.prof", "yappi.prof")]
    code, out, _ = _main("--sort", "line", "show", *files, "--hide-stdlib", "--max-depth", "2")
    assert code == 0 and "fct3" in out and "runpy" not in out
    target = tmp_path / "merged.prof"
    code, _, err = _main("show", *files, "-o", str(target))
    assert code == 0 and "written to" in err and target.stat().st_size > 0
    code, out, _ = _main("show", str(target), "--focus", "fct3", "--view", "reference")
    assert out.startswith("fct3")
    code, out, _ = _main("show", str(target), "--focus", "fct3")
    # THEN the tree starts at fct3 (both files' fct3 at the top, nothing above them)
    top = [(name, rest) for depth, _, name, rest in tree_rows(out) if depth == 1]
    assert [name for name, _ in top] == ["fct3", "fct3"] and "fct4" not in out


def test_usage_errors(script: Path) -> None:
    code, _, err = _main("--format", "prof", str(script))
    assert code == 2 and "needs -o" in err
    code, _, err = _main("missing_script.py")
    assert code == 2 and "not found" in err
    code, _, err = _main()
    assert code == 2
    code, _, err = _main("show", __file__)
    assert code == 1 and err.startswith("error:") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("option", "message", "exit_code"),
    [
        (["--min-share", "5"], "error: --min-share must be in [0, 1], got 5.0\n", 2),
        (["--max-depth", "-2"], "error: --max-depth must be >= 0 or None, got -2\n", 2),
        (["--focus", ""], "error: --focus must be a non-empty string or None, got ''\n", 2),
        (["-o", "/nonexistent-folder/x.html"], "cannot write -o", 2),
        (["--fold-share", "1.5"], "error: --fold-share must be in [0, 1], got 1.5\n", 2),
    ],
)
def test_bad_options_are_refused_before_the_program_runs(
    tmp_path: Path, option: list[str], message: str, exit_code: int
) -> None:
    # GIVEN a script that leaves a trace when it runs
    trace = tmp_path / "ran"
    script = tmp_path / "leaves_a_trace.py"
    script.write_text(f"open({str(trace)!r}, 'w').close()\n", encoding="utf-8")
    # WHEN an option is wrong THEN one error line, and the script never ran
    # (exit code 2 for a bad value, as argparse's own checks; the option is named)
    for argv in ([*option, str(script)], ["show", os.path.join(DATA, "cprofile.prof"), *option]):
        code, out, err = _main(*argv)
        assert (code, out) == (exit_code, "")
        assert message in err and err.count("\n") == 1
    assert not trace.exists()


def test_help_tells_the_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert _main("--help")[0] == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "The exit code is the program's (sys.exit, os._exit), 1 if it raised" in text
    assert "-o FILE, --output FILE" in text and "--focus TEXT" in text


def test_show_help_is_not_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main("show", "--help")
    assert (code, err) == (0, "")
    assert "files" in capsys.readouterr().out
    code, _, err = _main("show")
    assert code == 2 and "error:" not in err  # argparse wrote its own line on stderr


def test_live_status_on_terminal_only(tmp_path: Path) -> None:
    slow = tmp_path / "slow.py"
    slow.write_text(SCRIPT.format(sleep=1.4))
    term = Terminal()
    code, _, _ = _main(str(slow), err=term)
    assert code == 0 and "profiling slow.py" in term.getvalue()
    quiet = Terminal()
    _main("-q", str(slow), err=quiet)
    assert quiet.getvalue() == ""


@pytest.mark.slow
def test_real_subprocess(script: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "out.speedscope.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "onnxrt_backend_dev.monitoring",
            "profile",
            "-o",
            str(out_file),
            str(script),
            "fail",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "ZeroDivisionError" in proc.stderr and "argv ['fail'] __main__" in proc.stdout
    doc = json.loads(out_file.read_text())
    assert doc["profiles"][0]["weights"]


def test_relative_output_ignores_the_scripts_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a relative -o and a script that changes the working folder
    (tmp_path / "elsewhere").mkdir()
    script = tmp_path / "moves.py"
    script.write_text("import os\nos.chdir('elsewhere')\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    # WHEN profiled THEN the profile is where the user asked, as with python -m cProfile
    code, _, err = _main("-o", "p.json", "moves.py")
    assert code == 0, err
    assert (tmp_path / "p.json").exists() and not (tmp_path / "elsewhere" / "p.json").exists()
    assert str(tmp_path / "p.json") in err


def test_script_runs_like_python_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a relative script path and a folder with a __main__.py importing a sibling
    (tmp_path / "rel.py").write_text("print('file', __file__)\n", encoding="utf-8")
    app = tmp_path / "app"
    app.mkdir()
    (app / "app_helper_xyz.py").write_text("VALUE = 7\n", encoding="utf-8")
    (app / "__main__.py").write_text(
        "import sys, app_helper_xyz as h\nprint('app', sys.argv, h.VALUE, __file__)\n",
        encoding="utf-8",
    )
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    # WHEN profiled THEN __file__ is absolute (python >= 3.9) and a folder runs its
    # __main__.py with the folder first on sys.path, as `python PATH` does
    assert _main("-q", "rel.py")[0] == 0
    assert f"file {tmp_path / 'rel.py'}" in capsys.readouterr().out
    code, _, err = _main("-q", "app", "x")
    sys.modules.pop("app_helper_xyz", None)
    assert code == 0, err
    assert f"app ['app', 'x'] 7 {app / '__main__.py'}" in capsys.readouterr().out
    code, _, err = _main("empty")
    assert code == 2 and err == "error: folder has no __main__.py: 'empty'\n"


@pytest.mark.slow
def test_os_exit_still_writes_the_profile(tmp_path: Path) -> None:
    # GIVEN a script ending with os._exit, which unwinds nothing and flushes nothing
    script = tmp_path / "hard_exit.py"
    script.write_text(
        "import os, sys, threading, time\n"
        "def work():\n    time.sleep(0.01)\n"
        "work()\n"
        "if 'thread' in sys.argv:\n"
        "    threading.Thread(target=os._exit, args=(6,)).start()\n    time.sleep(60)\n"
        "os._exit(5)\n",
        encoding="utf-8",
    )
    cmd = [*_PROFILE_CMD[:-1], str(script)]  # cProfile: a 10 ms run is too short to sample
    # WHEN profiled THEN its exit code is kept and the profile is written all the same
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    assert "work" in proc.stdout and "hard_exit.py exited with os._exit(5)" in proc.stderr
    # and from another thread, it says clearly that there is no profile
    proc = subprocess.run([*cmd, "thread"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 6
    assert proc.stderr.endswith("called os._exit(6) from a thread: the profile was not written\n")


def test_view_option_and_folding(tmp_path: Path) -> None:
    prof = os.path.join(DATA, "cprofile.prof")
    # GIVEN a profile WHEN shown by default THEN the call tree, small rows folded
    code, tree, _ = _main("show", prof)
    assert code == 0 and tree.startswith("Call tree of cprofile.prof: ")
    assert "(cProfile: every call timed" in tree.splitlines()[0]
    assert "fct4" in tree and "%  rec  " not in tree  # rec: 0.05 %, under the fold
    # WHEN --all THEN every row, none folded
    code, every, _ = _main("show", prof, "--all")
    assert code == 0 and " more" not in every
    assert len(every.splitlines()) > len(tree.splitlines()) and "%  rec  " in every
    # WHEN --view reference THEN the reference's rows
    code, ref, _ = _main("show", prof, "--view", "reference")
    assert code == 0 and ref.startswith("<built-in method builtins.exec>") and " -- " in ref
    # WHEN writing HTML THEN the tree page by default, the reference page on demand
    for view, marker in (("tree", '"schema": "onnxrt-sampling"'), ("reference", '"figures": [0,')):
        page = tmp_path / f"{view}.html"
        code, _, err = _main("show", prof, "--view", view, "-o", str(page))
        assert code == 0 and "written to" in err
        assert marker in page.read_text(encoding="utf-8").replace('"rows":[[0,', '"rows": [[0,')
    # WHEN the view is unknown THEN a usage error naming the choices
    code, _, err = _main("--view", "flat", "show", prof)
    assert code == 2


def test_a_new_format_is_one_registry_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxrt_backend_dev.monitoring._profiling.formats import FORMATS, Format

    # GIVEN one more entry in the registry
    def render_names(root: Any, **options: Any) -> str:
        return "\n".join(sorted({n.func_name for n in root if not n.virtual})) + "\n"

    entry = Format(render_names, ".names", "names", (".names", ".nm"))
    monkeypatch.setitem(FORMATS, "names", entry)
    prof = os.path.join(DATA, "cprofile.prof")
    # WHEN the command is asked for it, by name or by the output's suffix
    code, out, _ = _main("show", prof, "--format", "names")
    assert code == 0 and "fct4\n" in out
    target = tmp_path / "x.nm"
    code, _, err = _main("show", prof, "-o", str(target))
    # THEN it is rendered with no other change
    assert code == 0 and "(names)" in err and "fct3\n" in target.read_text()


# ---------------------------------------------------------------- program's stdout, signals

_PROFILE_CMD = [
    sys.executable,
    "-m",
    "onnxrt_backend_dev.monitoring",
    "profile",
    "--cprofile",
    "-q",
]


@pytest.mark.slow
def test_json_tool_closing_stdout_still_delivers_its_profile(tmp_path: Path) -> None:
    # GIVEN `-m json.tool FILE`, which closes sys.stdout when it is done
    data = tmp_path / "data.json"
    data.write_text(json.dumps([{"a": i} for i in range(3)]), encoding="utf-8")
    # WHEN profiled THEN its output, then the profile on the original stdout, code 0
    proc = subprocess.run(
        [*_PROFILE_CMD, "-m", "json.tool", str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("[\n    {\n") and proc.stderr == ""
    # (the program is a standard library module: its frames fold as a library's do)
    assert "%  <module>  json/tool.py:1  [" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "body",
    [
        "sys.stdout.close()",
        "sys.stdout = io.StringIO()",
        "sys.stdout.close(); sys.stdout = open(os.devnull, 'w')",
    ],
)
def test_a_program_closing_or_replacing_stdout_keeps_its_exit_code(
    tmp_path: Path, body: str
) -> None:
    script = tmp_path / "closer.py"
    script.write_text(
        f"import io, os, sys\nprint('before')\ndef work():\n    {body}\nwork()\nsys.exit(3)\n",
        encoding="utf-8",
    )
    # --all: work() takes microseconds beside print and the interpreter's start-up, so
    # its share depends on the machine's load; the row must not fold into 'N more'.
    proc = subprocess.run(
        [*_PROFILE_CMD, "--all", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith("before\n")
    assert re.search(r"\bwork +\S*closer\.py:3\n", proc.stdout), proc.stdout  # the tree's row


def test_closed_output_without_a_file_goes_to_stderr_with_a_note() -> None:
    import io

    from onnxrt_backend_dev.monitoring._cli.guard import kept_output

    out, err = io.StringIO(), io.StringIO()
    with kept_output(out) as kept:
        out.close()
        with kept.stream(err) as stream:
            stream.write("profile\n")
    assert err.getvalue() == (
        "note: the program closed stdout: the profile follows on stderr\nprofile\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_terminating_signal_writes_the_profile_then_exits_128_plus_signum(
    tmp_path: Path, signame: str
) -> None:
    import signal

    signum = getattr(signal, signame, None)
    if signum is None:
        pytest.skip(f"no {signame} on this platform")
    script = tmp_path / "sleeper.py"
    script.write_text(
        # 'ready' printed inside wait(): the signal comes while wait is on the stack
        "import time\ndef wait():\n    print('ready', flush=True)\n    time.sleep(60)\nwait()\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.txt"
    proc = subprocess.Popen(
        [*_PROFILE_CMD, "-o", str(out), str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signum, err
    assert err == f"sleeper.py terminated by {signame}\n"
    assert re.search(r"\bwait +\S*sleeper\.py:2\n", out.read_text("utf-8"))  # the tree's row


def test_show_text_keeps_the_share_column_the_reference_text_lacks() -> None:
    # The library's to_text() prints the reference's rows; the CLI opts in to the share.
    code, out, err = _main("show", os.path.join(DATA, "cprofile.prof"), "--sort", "line")
    assert code == 0, err
    assert all(line.endswith("%") for line in out.splitlines() if " -- " in line)


def test_terminating_signals_restore_handlers_and_leave_ignored_ones() -> None:
    import signal

    from onnxrt_backend_dev.monitoring._cli.guard import Terminated, terminating_signals

    if not hasattr(signal, "SIGHUP"):
        pytest.skip("no SIGHUP on this platform")
    before = signal.getsignal(signal.SIGTERM)
    old_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with terminating_signals() as state:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN  # nohup's choice kept
            with pytest.raises(Terminated, match="terminated by SIGTERM"):
                state.handler(signal.SIGTERM, None)
            state.handler(signal.SIGTERM, None)  # once over: remembered, not raised
        assert state.exit_code == 128 + signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        signal.signal(signal.SIGHUP, old_hup)


def test_an_output_suffix_no_format_claims_is_refused(script: Path, tmp_path: Path) -> None:
    # GIVEN -o out.png without --format WHEN profiling THEN refused before the run (no
    # text written into a .png), naming -o and the formats
    target = tmp_path / "out.png"
    code, out, err = _main("-o", str(target), str(script))
    assert (code, out) == (2, "") and "cannot tell the format of -o" in err
    assert err.count("\n") == 1 and not target.exists()
    # and a .txt (or no suffix) is text
    code, _, err = _main("-q", "-o", str(tmp_path / "out.txt"), str(script))
    assert code == 0, err
    assert (tmp_path / "out.txt").read_text("utf-8").startswith("Call tree of ")


def test_show_help_tells_its_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = _main("show", "--help")  # argparse prints the help on sys.stdout
    text = " ".join(capsys.readouterr().out.split())
    assert code == 0 and "Exit codes: 0 done, 1 a file that is not a readable profile" in text


def _marshal_file(tmp_path: Path, name: str, data: Any) -> str:
    import marshal

    path = tmp_path / name
    path.write_bytes(marshal.dumps(data))
    return str(path)


def _bad_profiles(tmp_path: Path) -> list[tuple[str, str]]:
    """(path, what the one-line error must say) for each kind of input that is no
    profile: bombs for marshal, special files, negative figures."""
    bomb = tmp_path / "bomb.prof"
    bomb.write_bytes(b"(\xff\xff\xff\x7f")  # a tuple of 2**31 items, 5 bytes
    list_bomb = tmp_path / "list_bomb.prof"
    list_bomb.write_bytes(b"[\xff\xff\xff\x7f")
    # The same bombs as the value of a dict: the file's ends are a pstats dump's
    nested = tmp_path / "nested_bomb.prof"
    nested.write_bytes(b"{i\x01\x00\x00\x00(\xff\xff\xff\x7f0")
    nested_list = tmp_path / "nested_list_bomb.prof"
    nested_list.write_bytes(b"{i\x01\x00\x00\x00[\xff\xff\xff\x7fi\x01\x00\x00\x000")
    sparse = tmp_path / "sparse.prof"
    with open(sparse, "wb") as f:  # 2 GB of zeros, sparse: never read whole
        f.truncate(2**31 - 1)
    fifo = tmp_path / "fifo.prof"
    os.mkfifo(fifo)
    key = ("a.py", 1, "f")
    return [
        (str(bomb), "does not start with a dictionary"),
        (str(list_bomb), "does not start with a dictionary"),
        (str(nested), "announces a container far larger than its 12 bytes could hold"),
        (str(nested_list), "announces a container far larger than its 17 bytes"),
        (str(sparse), "does not start with a dictionary"),
        ("/dev/zero", "it is a character device"),
        ("/dev/urandom", "it is a character device"),
        (str(fifo), "it is a named pipe (FIFO)"),
        (str(tmp_path), "it is a directory"),
        (_marshal_file(tmp_path, "neg_count.prof", {key: (-5, 1, 0.1, 0.1, {})}), ">= -1"),
        (_marshal_file(tmp_path, "neg_time.prof", {key: (1, 1, -0.1, 0.1, {})}), ">= 0"),
        (
            _marshal_file(
                tmp_path,
                "neg_edge.prof",
                {
                    key: (1, 1, 0.1, 0.1, {}),
                    ("a.py", 2, "g"): (1, 1, 0.1, 0.1, {key: (1, 1, -1.0, 0.1)}),
                },
            ),
            ">= 0",
        ),
    ]


def test_profile_show_refuses_what_is_no_profile_at_once(tmp_path: Path) -> None:
    import time

    for path, said in _bad_profiles(tmp_path):
        # WHEN each is shown
        start = time.perf_counter()
        code, out, err = _main("show", path)
        # THEN exit 1, one line naming the file and what it is, no traceback, quickly
        # (marshal took 16-31 s on the 5-byte bomb; 20 s holds at any load)
        assert time.perf_counter() - start < 20, path
        assert code == 1 and out == "", (path, err)
        assert err.count("\n") == 1 and repr(path) in err and said in err, (path, err)
        assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "code", "said", "shown"),
    [
        # a focus matching nothing: said, nothing made up, exit 1
        (["--focus", "no_such_fn"], 1, "--focus 'no_such_fn': no function name contains", ""),
        (["--focus", "no_such_fn", "--view", "reference"], 1, "no function name", ""),
        (["--focus", "no_such_fn", "--format", "json"], 1, "no function name", ""),
        # a file name is no function name: the script's <module> is not matched
        (["--focus", "profiled_script"], 1, "no function name", ""),
        # a leaf the default filter would hide is shown when focused on
        (["--focus", "sleep", "--view", "reference"], 0, "", "<built-in method time.sleep>"),
        (["--focus", "fct3"], 0, "", "fct3"),
    ],
)
def test_profile_show_focus(argv: list[str], code: int, said: str, shown: str) -> None:
    prof = os.path.join(DATA, "cprofile.prof")
    got, out, err = _main("show", prof, *argv)
    assert got == code, err
    assert said in err and (shown in out if shown else out == "")
    if shown:
        assert "<module>" not in out.splitlines()[0]


def test_profile_of_a_program_with_a_focus_matching_nothing_exits_1(script: Path) -> None:
    # GIVEN a program exiting 0 WHEN profiled with a focus matching no function
    code, _, err = _main("-q", "--focus", "no_such_fn", str(script))
    # THEN the program's output only, the error said, exit 1
    assert code == 1 and "no function name contains it" in err


_ASYNC_SCRIPT = """import asyncio

def cpu(n):
    return sum(i * i for i in range(n))

async def fetch(i):
    await asyncio.sleep(0.001)
    return cpu(20_000)

async def main():
    return await asyncio.gather(*(fetch(i) for i in range(3)))

asyncio.run(main())
"""
_AST_SCRIPT = """import ast

def work():
    src = "\\n".join(f"def f{i}(x):\\n    return [x + {i} for _ in range(3)]" for i in range(300))
    ast.unparse(ast.parse(src))

work()
"""


def test_the_tree_and_hide_stdlib_of_an_asyncio_program(tmp_path: Path) -> None:
    # GIVEN a real asyncio program: gather of coroutines calling a CPU function
    script = tmp_path / "aio.py"
    script.write_text(_ASYNC_SCRIPT, encoding="utf-8")
    # WHEN profiled (--all: no row folds, whatever the load)
    code, out, err = _main("-q", "--all", str(script))
    assert code == 0, err
    rows = tree_rows(out)
    depth = {name: d for d, _, name, _ in reversed(rows)}
    ms = {name: s for _, s, name, _ in reversed(rows)}
    # THEN asyncio's run is the row the script's code called, its frames folded into
    # it; the coroutines below it, cpu below fetch; asyncio's import one row
    assert depth["cpu"] > depth["fetch"] > depth["run"] > depth["<module>"], out
    assert "import asyncio" in depth and "_run_once" not in depth, out
    # AND the coroutines get their time, not a trickle (the time flowing down asyncio's
    # frames once went into import cycles and left fetch 0.3 ms of its 92 ms)
    assert ms["fetch"] >= 0.5 * (ms["run"] - ms.get("idle (event loop)", 0.0)), out
    # WHEN --hide-stdlib THEN no library frame: fetch right under the script, its time
    # kept, cpu below it
    code, out, err = _main("-q", "--hide-stdlib", "--all", str(script))
    assert code == 0, err
    rows = tree_rows(out)
    hidden = {name: (d, s) for d, s, name, _ in rows}
    assert set(hidden) <= {"<module>", "fetch", "cpu", "main", "<genexpr>"}, out
    assert hidden["fetch"][0] == 2 and hidden["cpu"][0] == 3, out
    # (the resumptions of the three coroutines are one row, holding their CPU work)
    assert [name for _, _, name, _ in rows].count("fetch") == 1, out
    assert hidden["cpu"][1] >= 0.5 * hidden["fetch"][1], out


def test_the_tree_keeps_the_library_call_that_takes_the_time(tmp_path: Path) -> None:
    # GIVEN a real program whose function spends its time in ast.parse and ast.unparse
    script = tmp_path / "astu.py"
    script.write_text(_AST_SCRIPT, encoding="utf-8")
    code, out, err = _main("-q", "--all", str(script))
    assert code == 0, err
    rows = tree_rows(out)
    # THEN work is no leaf: parse and unparse are its children, their library callees
    # folded into them (said as hidden frames), no library row under another
    work = next(i for i, (_, _, name, _) in enumerate(rows) if name == "work")
    below = {name: rest for d, _, name, rest in rows[work + 1 :] if d == rows[work][0] + 1}
    assert {"parse", "unparse"} <= set(below), out
    assert "frames hidden (ast, " in below["unparse"], out
    assert not any(name == "visit" for _, _, name, _ in rows), out
    # WHEN --show-library THEN the library frames are rows
    code, out, err = _main("-q", "--all", "--show-library", str(script))
    assert code == 0 and any(name == "visit" for _, _, name, _ in tree_rows(out)), err
    # WHEN --hide-stdlib THEN the library calls are left out: work holds their time
    code, out, err = _main("-q", "--all", "--hide-stdlib", str(script))
    assert code == 0, err
    names = [name for _, _, name, _ in tree_rows(out)]
    assert names[:2] == ["<module>", "work"] and "parse" not in names and "unparse" not in names


_STDLIB_WORK = """import statistics
import decimal


def work(n):
    data = [decimal.Decimal(i) / 7 for i in range(n)]
    return statistics.mean(data), statistics.pstdev(data)


def main():
    for _ in range(3):
        work(5_000)


main()
"""


@pytest.mark.slow
def test_a_real_program_opens_on_its_own_code(tmp_path: Path) -> None:
    # GIVEN a script importing standard library modules, then working with them, run
    # in a fresh interpreter (its imports load for real)
    (tmp_path / "stats.py").write_text(_STDLIB_WORK, encoding="utf-8")
    proc = subprocess.run(
        [*_PROFILE_CMD, "stats.py"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    rows = tree_rows(out)
    names = [name for _, _, name, _ in rows]
    # THEN the tree opens on the script: its <module>, then main, the hottest, then work,
    # whose library calls are one row each, their frames folded
    assert out.startswith("Call tree of stats.py: ") and "(cProfile: " in out.splitlines()[0]
    assert [(d, name) for d, _, name, _ in rows[:3]] == [(1, "<module>"), (2, "main"), (3, "work")]
    below = {name: rest for d, _, name, rest in rows[3:] if d == 4}
    assert "mean" in below and "frames hidden (" in below["mean"], out
    # AND an import is a row named by its module, importlib nowhere
    assert any(name.startswith("import ") for name in names), out
    assert not any(n in names for n in ("_find_and_load", "exec_module", "_load_unlocked")), out
    # AND the text is a few short rows (what a row hides, at most four package names, may
    # reach past 120 columns: this interpreter's import hooks are packages too)
    lines = out.splitlines()
    assert len(lines) <= 20 and max(len(line.split("  [")[0]) for line in lines) <= 120, out
    assert max(map(len, lines)) <= 160, out


@pytest.mark.parametrize(
    ("option", "code", "check"),
    [
        (["--focus", "no_such_fn"], 1, lambda names, out: out == ""),
        (["--focus", "work"], 0, lambda names, out: names[0] == "work" and "main" not in names),
        (["--max-depth", "0"], 0, lambda names, out: names == ["<module>"]),
        (["--max-depth", "1"], 0, lambda names, out: names[:2] == ["<module>", "main"]),
        (["--all"], 0, lambda names, out: " more" not in out and "_sum" not in names),
        (["--show-library"], 0, lambda names, out: "_sum" in names),
        (
            ["--hide-stdlib"],
            0,
            lambda names, out: names == ["<module>", "main", "work", "<listcomp>"],
        ),
        (["--min-share", "0.5"], 0, lambda names, out: "<listcomp>" not in names),
    ],
)
def test_tree_options_on_a_real_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: list[str], code: int, check: Any
) -> None:
    # GIVEN the script above WHEN profiled with an option of the tree
    (tmp_path / "stats.py").write_text(_STDLIB_WORK, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    got, out, err = _main("-q", *option, "stats.py")
    # THEN it behaves as --help says
    assert got == code, err
    names = [name for _, _, name, _ in tree_rows(out)]
    assert check(names, out), out


@pytest.mark.parametrize("output", [None, "p.json"])
def test_each_note_is_said_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                output: str | None) -> None:  # fmt: skip
    # GIVEN a profile to the terminal (its text holds the notes) or to a file
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text("import time\ntime.sleep(0.05)\n")
    code, out, err = run_cli("profile", *(["-o", output] if output else []), "s.py")
    # THEN each note reaches the reader once, not at the top and again at the bottom
    assert code == 0, err
    assert (out + err).count("note: collector:") == 1
