"""Every command over bad outputs: paths that cannot be written or would destroy a file,
writes failing after the work, and a standard output closed, full or gone.

Each case asserts: no traceback, the documented exit code (2 before any work, 1 after),
one line naming the option and the path, and no file of the user's lost or changed."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import DATA as _DATA
from helpers import run_cli

from onnxrt_backend_dev.monitoring._cli import common as _common
from onnxrt_backend_dev.monitoring._cli import dispatch as _cli

DATA = str(_DATA)
TIMEOUT = 60
CLI = [sys.executable, "-m", "onnxrt_backend_dev.monitoring"]


class Files:
    """A folder holding what the user has: a script leaving a trace when it runs, a
    profile, a text file, a sub-folder, a dangling link, a locked folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.trace = root / "ran"
        self.script = root / "script.py"
        self.script.write_text(f"open({str(self.trace)!r}, 'w').close()\n", encoding="utf-8")
        self.prof = root / "in.prof"
        shutil.copy(os.path.join(DATA, "cprofile.prof"), self.prof)
        self.text = root / "notes.txt"
        self.text.write_text("the user's notes\n", encoding="utf-8")
        self.folder = root / "folder"
        self.folder.mkdir()
        self.dangling = root / "dangling.png"
        self.dangling.symlink_to(root / "missing" / "target.png")
        self.link_to_script = root / "link.py"
        self.link_to_script.symlink_to(self.script)
        self.locked = root / "locked"
        self.locked.mkdir()

    def assert_kept(self, before: dict[str, str]) -> None:
        """Asserts that every file of ``before`` is still there, unchanged."""
        after = self.hashes()
        assert {name: after.get(name) for name in before} == before

    def hashes(self) -> dict[str, str]:
        """The content of every file (links not followed), to tell nothing changed."""
        return {
            str(p.relative_to(self.root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(self.root.rglob("*"))
            if p.is_file() and not p.is_symlink()
        }


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Files:
    f = Files(tmp_path)
    # Tests may run as root, who writes anywhere: the locked folder is faked.
    real_access = os.access
    locked = str(f.locked)
    monkeypatch.setattr(
        _common.os,
        "access",
        lambda p, mode: not str(p).startswith(locked) and real_access(p, mode),
    )
    return f


# --- output paths refused before any work ---------------------------------------------

# Kinds of bad output path, given the user's files (a .png, that --plot takes).
BAD_PATHS: dict[str, Callable[[Files], str]] = {
    "empty": lambda f: "",
    "a folder": lambda f: str(f.folder),
    "a new folder": lambda f: str(f.root / "new") + "/",
    "a dangling link": lambda f: str(f.dangling),
    "in a missing folder": lambda f: str(f.root / "missing" / "out.png"),
    "under a file": lambda f: str(f.text / "out.png"),
    "in a locked folder": lambda f: str(f.locked / "out.png"),
}

# Each command and option writing a file: argv given the output path and the files.
COMMANDS: dict[str, Callable[[str, Files], list[str]]] = {
    "spy --json": lambda p, f: ["spy", "-q", "--json", p, "--", "touch", str(f.trace)],
    "spy --csv": lambda p, f: ["spy", "-q", "--csv", p, "--", "touch", str(f.trace)],
    "spy --plot": lambda p, f: ["spy", "-q", "--plot", p, "--", "touch", str(f.trace)],
    "profile -o": lambda p, f: ["profile", "-o", p, str(f.script)],
    "profile show -o": lambda p, f: ["profile", "show", str(f.prof), "-o", p],
}


def _main(argv: list[str], out: io.StringIO | None = None) -> tuple[int, str, str]:
    out = io.StringIO() if out is None else out
    err = io.StringIO()
    code = _cli.main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _assert_refused(files: Files, argv: list[str], option: str, path: str) -> None:
    """Runs ``argv`` in process; asserts exit 2, one line naming option and path, and
    that nothing ran nor changed."""
    before = files.hashes()
    code, out, err = _main(argv)
    assert (code, out) == (2, ""), (argv, code, out, err)
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert f"{option} {path!r}" in err, err
    assert "Traceback" not in err
    assert not files.trace.exists(), "the program ran"
    assert files.hashes() == before


@pytest.mark.parametrize("kind", list(BAD_PATHS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_bad_output_path_is_refused_before_any_work(
    files: Files, command: str, kind: str
) -> None:
    path = BAD_PATHS[kind](files)
    argv = COMMANDS[command](path, files)
    _assert_refused(files, argv, command.split()[-1], path)


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("empty", lambda f: ""),
        ("a file", lambda f: str(f.text)),
        ("a dangling link", lambda f: str(f.dangling)),
        ("under a file", lambda f: str(f.text / "demo")),
        ("in a locked folder", lambda f: str(f.locked / "demo")),
        ("holding a folder where a file goes", lambda f: str(f.root)),
    ],
)
def test_demo_refuses_a_bad_out_folder(
    files: Files, kind: str, path: Callable[[Files], str]
) -> None:
    (files.root / "results.json").mkdir()  # what the last case is about
    target = path(files)
    expected = str(files.root / "results.json") if kind.startswith("holding") else target
    _assert_refused(files, ["demo", "--out", target], "--out", expected)


# The same file as an input or as another output, an unsupported suffix.
CLASHES: dict[str, Callable[[Files], tuple[list[str], str, str]]] = {
    "profile -o the script": lambda f: (
        ["profile", "-o", str(f.script), str(f.script)],
        "-o",
        str(f.script),
    ),
    "profile -o a link to the script": lambda f: (
        ["profile", "-o", str(f.link_to_script), str(f.script)],
        "-o",
        str(f.link_to_script),
    ),
    "profile -o an argument of the script": lambda f: (
        ["profile", "-o", str(f.text), str(f.script), str(f.text)],
        "-o",
        str(f.text),
    ),
    "profile -o the module": lambda f: (
        ["profile", "-o", os.path.join(DATA, "profiled_script.py"), "-m", "profiled_script"],
        "-o",
        os.path.join(DATA, "profiled_script.py"),
    ),
    "profile show -o its input": lambda f: (
        ["profile", "show", str(f.prof), "-o", str(f.prof)],
        "-o",
        str(f.prof),
    ),
    "profile show -o its input, relative": lambda f: (
        ["profile", "show", str(f.prof), "-o", os.path.relpath(f.prof)],
        "-o",
        os.path.relpath(f.prof),
    ),
    "spy --json --csv the same": lambda f: (
        ["spy", "--json", str(f.root / "x"), "--csv", str(f.root / "x"), "--", "true"],
        "--csv",
        str(f.root / "x"),
    ),
    "spy --json an argument of the command": lambda f: (
        ["spy", "--json", str(f.text), "--", "touch", str(f.trace), str(f.text)],
        "--json",
        str(f.text),
    ),
    "spy --plot without a suffix": lambda f: (
        ["spy", "--plot", str(f.root / "plot"), "--", "touch", str(f.trace)],
        "--plot",
        str(f.root / "plot"),
    ),
    "spy --plot a suffix matplotlib cannot write": lambda f: (
        ["spy", "--plot", str(f.root / "plot.xyz"), "--", "touch", str(f.trace)],
        "--plot",
        str(f.root / "plot.xyz"),
    ),
}


@pytest.mark.parametrize("case", list(CLASHES))
def test_an_output_clashing_with_a_file_is_refused(
    files: Files, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(DATA)  # for -m profiled_script
    argv, option, path = CLASHES[case](files)
    _assert_refused(files, argv, option, path)


def test_special_files_may_be_given_twice(files: Files) -> None:
    # /dev/null twice loses nothing: accepted, the command runs
    code, _, err = run_cli(
        "spy", "-q", "--json", os.devnull, "--csv", os.devnull, "--", "touch", str(files.trace)
    )
    assert code == 0, err
    assert files.trace.exists()


# --- a write failing after the work ---------------------------------------------------


@pytest.fixture
def fallback_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.mktemp("fallback")
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _saved_to(err: str) -> Path:
    match = re.search(r"saved to '([^']+)'", err)
    assert match, err
    return Path(match.group(1))


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (lambda f: ["spy", "-q", "--json", "/dev/full", "--", "true"], "--json"),
        (lambda f: ["spy", "-q", "--csv", "/dev/full", "--", "true"], "--csv"),
        (lambda f: ["profile", "-q", "-o", "/dev/full", "--format", "json", str(f.script)], "-o"),
        (lambda f: ["profile", "show", str(f.prof), "-o", "/dev/full"], "-o"),
        (lambda f: ["profile", "-o", "/dev/full", "--format", "prof", str(f.script)], "-o"),
    ],
)
def test_a_full_disk_after_the_work_saves_the_result_elsewhere(
    files: Files, fallback_dir: Path, argv: Callable[[Files], list[str]], option: str
) -> None:
    # GIVEN an output on a full disk (/dev/full) WHEN the command ran
    before = files.hashes()
    code, _, err = _main(argv(files))
    # THEN exit 1, one line naming the file and where the result went, which holds it
    assert code == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"cannot write {option} '/dev/full': No space left on device" in err
    saved = _saved_to(err)
    assert saved.parent == fallback_dir and saved.stat().st_size > 0
    files.assert_kept(before)


def test_demo_saves_a_file_it_cannot_write(
    tmp_path: Path, fallback_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the demo's folder filling up when results.json is written (a faked full disk)
    from onnxrt_backend_dev.monitoring._cli import cmd_demo

    monkeypatch.setattr(cmd_demo.DemoCommand, "_timing", lambda self, out: {"t": 1})
    monkeypatch.setattr(cmd_demo.DemoCommand, "_memory", lambda self, *a: {"m": 2})
    monkeypatch.setattr(cmd_demo.DemoCommand, "_profile", lambda self, *a: {"p": 3})
    real_open = open

    def full_open(path: str, *args: object, **kwargs: object) -> object:
        if str(path).endswith("results.json") and str(path).startswith(str(tmp_path / "demo")):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", full_open)
    code, _, err = run_cli("demo", "--out", str(tmp_path / "demo"))
    # THEN the demo names the file, and the results are in the fallback file
    assert code == 1 and err.count("\n") == 1, err
    assert "cannot write --out " in err and "results.json" in err
    saved = _saved_to(err)
    assert '"p": 3' in saved.read_text(encoding="utf-8")
    assert not (tmp_path / "demo" / "results.json").exists()  # no partial file


# --- the standard output closed, full or gone -----------------------------------------


class FullOutput(io.StringIO):
    """A standard output on a full disk."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


class GoneOutput(io.StringIO):
    """A standard output whose reader went away."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


# Every command, quick; each writes its result to the standard output.
STDOUT_COMMANDS: dict[str, Callable[[Files], list[str]]] = {
    "demo": lambda f: ["demo", "--out", str(f.root / "demo")],
    "time": lambda f: ["time", "-r", "2", "-n", "3", "pass"],
    "time --compare": lambda f: ["time", "-r", "3", "-n", "3", "pass", "--compare", "pass"],
    "time --json": lambda f: ["time", "--json", "-r", "2", "-n", "3", "pass"],
    "spy": lambda f: ["spy", "-q", "--", "true"],
    "profile": lambda f: ["profile", "-q", str(f.script)],
    "profile show": lambda f: ["profile", "show", str(f.prof)],
}


@pytest.mark.parametrize("command", list(STDOUT_COMMANDS))
def test_a_full_stdout_is_reported_as_such(files: Files, fallback_dir: Path, command: str) -> None:
    # GIVEN a full standard output WHEN a command writes its result (the demo its title)
    code, _, text = _main(STDOUT_COMMANDS[command](files), out=FullOutput())
    # THEN exit 1 and one line about the standard output, never "the statement raised"
    assert code == 1, text
    assert text.count("\n") == 1 and "Traceback" not in text
    assert text.startswith("error: cannot write the standard output: No space left on device")
    assert "raised" not in text
    assert _saved_to(text).read_text(encoding="utf-8")  # what was printed is kept


@pytest.mark.parametrize("command", list(STDOUT_COMMANDS))
def test_a_reader_gone_stops_every_command_quietly(files: Files, command: str) -> None:
    code, _, err = _main(STDOUT_COMMANDS[command](files), out=GoneOutput())
    assert (code, err) == (1, "")


# --- real processes: >&-, > /dev/full, | head -1 --------------------------------------


def _shell(line: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    return subprocess.run(
        ["bash", "-c", line],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _cli_line(*argv: str) -> str:
    return " ".join(shlex.quote(a) for a in [*CLI, *argv])


@pytest.mark.slow
def test_real_stdout_closed(tmp_path: Path) -> None:
    res = _shell(_cli_line("time", "-r", "2", "-n", "2", "pass") + " >&-", tmp_path)
    assert res.returncode == 1
    assert res.stderr == "error: the standard output is closed: nothing could be printed\n"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_real_stdout_full(tmp_path: Path) -> None:
    res = _shell(_cli_line("time", "-r", "2", "-n", "2", "pass") + " > /dev/full", tmp_path)
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert "cannot write the standard output: No space left on device" in res.stderr
    assert "pass: " in _saved_to(res.stderr).read_text(encoding="utf-8")


@pytest.mark.slow
def test_real_reader_gone(tmp_path: Path) -> None:
    # the statement prints far more than a pipe holds, to a reader that reads one line
    stmt = "print('x\\n' * 100_000)"
    line = _cli_line("time", "-r", "1", "-n", "1", stmt) + " | head -1; exit ${PIPESTATUS[0]}"
    res = _shell(line, tmp_path)
    assert res.returncode == 1
    assert res.stdout == "x\n" and res.stderr == ""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_real_full_disk_when_the_program_calls_os_exit(tmp_path: Path) -> None:
    # os._exit ends the program at once: the profile is still written, and where it went
    # when -o failed is said; the -o failure exits with 1, as documented
    script = tmp_path / "quits.py"
    script.write_text("import os\nos._exit(3)\n", encoding="utf-8")
    res = _shell(_cli_line("profile", "-o", "/dev/full", "--format", "json", str(script)), tmp_path)
    assert res.returncode == 1
    assert "error: cannot write -o '/dev/full': No space left on device" in res.stderr
    assert _saved_to(res.stderr).stat().st_size > 0
    assert "Traceback" not in res.stderr
