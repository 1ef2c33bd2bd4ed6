"""``dump --pid PID``: every thread's Python stack of a running process, now, with the
thread holding the GIL and each thread's state, read from outside (nothing is stopped
or changed in the process), like ``py-spy dump``."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from .common import EXIT_USAGE, CommandError

_EPILOG = (
    "The process is read from outside with process_vm_readv: it is not stopped and runs "
    "no code of this tool. Exit codes: 0 printed; 1 the process cannot be read (it ended, "
    "a zombie, not a Python process this tool can read, a version without a known layout, "
    "or the system refused: run as the same user or root, or allow tracing); 2 a usage "
    "error (a --pid that is not a positive integer); 130 interrupted."
)
_STATES = {"R": "running", "S": "sleeping", "D": "waiting for I/O", "T": "stopped",
           "t": "stopped by a tracer", "Z": "zombie"}  # fmt: skip


def _state(pid: int, native_id: int) -> str:
    from .._observe.process import ProcFile, parse_stat

    if not native_id:
        return "unknown"
    f = ProcFile(f"/proc/{pid}/task/{native_id}/stat")
    try:
        stat = parse_stat(f.read(1024) or b"")
    finally:
        f.close()
    return _STATES.get(stat.state, stat.state) if stat else "ended"


def _name(reader: Any, sample: Any) -> str:
    """A thread's :mod:`threading` name ('' when it has none or it cannot be read)."""
    from .._errors import ReadError

    try:
        return str(reader.thread_name(sample))
    except (ReadError, IndexError, ValueError):
        return ""


def dump(pid: int) -> dict[str, Any]:
    """Every thread's stack of a process now.

    :param pid: the process
    :return: ``{"pid", "command", "python", "threads": [{"ident", "native_id", "name",
        "gil", "state", "main", "frames": [{"function", "file", "line"}] innermost
        first}]}`` (``name``: the :mod:`threading` name, '' for a thread started from C)
    """
    from .._observe.session import command_line_of, describe, open_target

    target = open_target(pid)
    reader = target.reader
    threads = []
    for s in reader.threads():
        frames = []
        for i in range(0, len(s.frames), 2):
            info = target.reader.infos[s.frames[i]]
            frames.append({"function": info.name, "file": info.file,
                           "line": info.line(s.frames[i + 1])})  # fmt: skip
        main = s.native_id == pid
        threads.append({
            "ident": s.ident, "native_id": s.native_id, "gil": s.gil, "main": main,
            "name": "MainThread" if main else _name(reader, s),
            "state": _state(pid, s.native_id), "complete": s.complete, "frames": frames,
        })  # fmt: skip
    return {"pid": pid, "command": command_line_of(pid), "python": describe(target),
            "threads": threads}  # fmt: skip


def to_text(found: dict[str, Any]) -> str:
    """A dump as text, py-spy's way: one block per thread, innermost frame first.

    :param found: from :func:`dump`
    :return: the text
    """
    from .._sampling.view import short_file

    command = " ".join(found["command"].split())  # a -c program's lines on one line
    if len(command) > 200:
        command = command[:199] + "…"
    lines = [f"Process {found['pid']}: {command}", f"{found['python']}", ""]
    for t in found["threads"]:
        tags = [t["state"]] + (["holds the GIL"] if t["gil"] else [])
        name = t["name"] or f"thread {t['native_id'] or hex(t['ident'])}"
        name = "".join(c if c.isprintable() else "?" for c in name)  # the program's text
        lines.append(f"Thread {t['native_id'] or '?'} ({', '.join(tags)}): {name}")
        if not t["frames"]:
            lines.append("    (no Python frame: not started, or in C code only)")
        for f in t["frames"]:
            lines.append(f"    {f['function']} ({short_file(f['file'])}:{f['line']})")
        if not t["complete"]:
            lines.append("    (the stack moved while read: its outer frames only)")
        lines.append("")
    return "\n".join(lines)


class DumpCommand:
    """The ``dump`` subcommand."""

    name = "dump"
    help = "print every thread's Python stack of a running process now (like py-spy dump)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Declares the options."""
        parser.epilog = _EPILOG
        parser.add_argument("--pid", type=int, required=True, help="the process to read")
        parser.add_argument("--json", action="store_true", help="print JSON")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Prints the stacks."""
        from .._errors import ObserveError
        from .._observe.attach import check_pid

        try:
            pid = check_pid(args.pid)
        except ValueError as e:
            raise CommandError(str(e), EXIT_USAGE) from e
        try:
            found = dump(pid)
        except ObserveError as e:
            raise CommandError(f"--pid {pid}: {e}") from e
        if args.json:
            import json

            out.write(json.dumps(found, indent=1) + "\n")
        else:
            out.write(to_text(found))
        return 0


COMMAND = DumpCommand()
