"""Signals at random moments into the commands that start children (issue 30's floor):
"100 SIGTERMs and 100 SIGHUPs at random moments (0-3 s) into each repeat command: 0
processes left 2 s after the command exits; results written".

Run: ``python benchmarks/signal_storm.py [--count 100] [--commands run,profile,compare,
time]``. Each trial starts one command in a session of its own (with ``TMPDIR`` a fresh
folder), sends the signal after a uniformly random 0-3 s, waits for the command's exit,
and 2 s later counts the live processes of its session (every descendant, whatever
process groups they made) and what is left in its ``TMPDIR``. Results written: a
command that exits with ``128 + N`` must say how many runs were done, and then have
saved exactly those (``--save``; ``compare``: ``--save-a``); one that ended before the
signal must exit 0 with everything saved; one killed by the signal itself (``-N``: it
came while the interpreter started, before any handler was installed, or once the
command had written everything and was exiting) must have saved nothing or everything.

The program each command runs (``prog.py``) starts a grandchild (``sleep 60``) in its
group, computes for 0.2 s and sleeps 0.2 s: each repeat command runs it 5 times (about
2-4 s in all), so the signals land in a run, between runs, while a command starts and
after it ended. Not a speed figure: it holds on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

PROGRAM = """\
import subprocess, time
child = subprocess.Popen(["sleep", "60"])
end = time.perf_counter() + 0.2
while time.perf_counter() < end:
    sum(range(1000))
time.sleep(0.2)
child.kill()
child.wait()
"""
# Seconds after the command's exit at which its session must be empty.
AFTER = 2.0
REPEAT = 5


def _session(sid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(stat.parent.name))
    return found


def _argv(command: str, folder: Path) -> tuple[list[str], Path]:
    """The command line of a trial and the file it saves."""
    prog, saved = str(folder / "prog.py"), folder / "saved.json"
    rep = ["--repeat", str(REPEAT)]
    if command in ("run", "profile"):
        return [command, "-q", *rep, "--save", str(saved), prog], saved
    if command == "compare":
        side = f"python {prog}"
        return ["compare", "-q", "--a", side, "--b", side, *rep, "--save-a", str(saved)], saved
    stmt = "import time; time.sleep(0.01)"
    return [
        "time",
        "-q",
        "-p",
        str(REPEAT),
        "-n",
        "5",
        "-r",
        "3",
        "--save",
        str(saved),
        stmt,
    ], saved


def _runs_saved(command: str, saved: Path) -> int | None:
    """How many runs the saved file holds, None when there is none."""
    if not saved.exists():
        return None
    data = json.loads(saved.read_text())["data"]
    if command == "run":
        return len(data["runs"])
    if command == "time":
        return len(data["series"][0]["processes"])
    return len(data["profile"]["wall"] if "profile" in data else data["wall"])


def _runs_said(command: str, err: str) -> int | None:
    """How many runs the command says it kept when stopped (None: it did not say)."""
    if "no run ended" in err or "before a process finished" in err:
        return 0
    if "no comparison" in err:
        return None  # compare saves A's runs when it has some: checked by the file
    match = re.search(r"the (\d+) run\(s\) done|so far, (\d+) of \d+ processes", err)
    return int(match.group(1) or match.group(2)) if match else None


def trial(command: str, signum: int, delay: float, root: Path) -> dict[str, Any]:
    """One command, one signal after ``delay`` seconds."""
    folder = Path(tempfile.mkdtemp(dir=root))
    (folder / "prog.py").write_text(PROGRAM)
    tmp = folder / "tmp"
    tmp.mkdir()
    argv, saved = _argv(command, folder)
    cli = subprocess.Popen(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        cwd=folder, env=dict(os.environ, TMPDIR=str(tmp)), start_new_session=True,
    )  # fmt: skip
    time.sleep(delay)
    sent = cli.poll() is None
    if sent:
        cli.send_signal(signum)
    try:
        _, err = cli.communicate(timeout=120)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(cli.pid, signal.SIGKILL)
        _, err = cli.communicate()
        hung = True
    time.sleep(AFTER)
    left = _session(cli.pid)
    for pid in left:  # never leave them to the next trial
        os.kill(pid, signal.SIGKILL)
    written = _check_written(command, cli.returncode, signum, saved, err)
    return {
        "code": cli.returncode, "sent": sent, "hung": hung, "left": len(left),
        "tmp_left": len(os.listdir(tmp)), "written": written,
        "traceback": "Traceback" in err, "err": err[-300:], "held": _runs_saved(command, saved),
    }  # fmt: skip


def _check_written(command: str, code: int, signum: int, saved: Path, err: str) -> bool:
    held = _runs_saved(command, saved)
    if code == -signum:  # before the handlers were installed (nothing measured), or once
        return held in (None, REPEAT)  # the command had written everything and was exiting
    if code == 0:
        return held == REPEAT
    if code != 128 + signum:
        return False
    said = _runs_said(command, err)
    if "no comparison" in err:  # compare: A's runs saved when it had some
        return True
    if said is None:  # the signal came once the runs were over: everything written
        return held == REPEAT
    return held == (said or None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100, help="trials per command and signal")
    parser.add_argument("--commands", default="run,profile,compare,time")
    parser.add_argument("--seed", type=int, default=30)
    args = parser.parse_args()
    # The commands must receive the signals with their default dispositions: launched
    # under nohup (SIGHUP ignored, inherited across exec), every SIGHUP would be ignored.
    for signum in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    rng = random.Random(args.seed)
    started = datetime.now(timezone.utc)
    print(
        f"# {started:%Y-%m-%d %H:%M} UTC, {platform.platform()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}"
    )
    bad: list[str] = []
    with tempfile.TemporaryDirectory(prefix="signal-storm-") as root:
        for command in args.commands.split(","):
            for signum in (signal.SIGTERM, signal.SIGHUP):
                rows = [
                    trial(command, signum, rng.uniform(0.0, 3.0), Path(root))
                    for _ in range(args.count)
                ]
                _print(command, signum, rows, bad)
    print(f"# {(datetime.now(timezone.utc) - started).total_seconds() / 60:.1f} min, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for line in bad[:20]:
        print("  failed:", line)


def _print(command: str, signum: int, rows: list[dict[str, Any]], bad: list[str]) -> None:
    codes = Counter(r["code"] for r in rows)
    failed = [
        r for r in rows
        if r["left"] or r["tmp_left"] or r["hung"] or not r["written"] or r["traceback"]
    ]  # fmt: skip
    bad.extend(f"{command} {signal.Signals(signum).name}: {r}" for r in failed)
    name = signal.Signals(signum).name
    print(
        f"{command:8} {name:7} {len(rows):4} trials: exit codes {dict(sorted(codes.items()))}; "
        f"processes left {sum(r['left'] for r in rows)}, temporary files left "
        f"{sum(r['tmp_left'] for r in rows)}, hung {sum(r['hung'] for r in rows)}, results "
        f"written {sum(r['written'] for r in rows)}/{len(rows)}, tracebacks "
        f"{sum(r['traceback'] for r in rows)}",
        flush=True,
    )


if __name__ == "__main__":
    main()
