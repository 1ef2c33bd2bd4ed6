"""What every subcommand shares: the exit codes, the error to report as one line, the
checks of output paths before any work (:func:`check_outputs`) and the writing of an
output that survives a failure after the work (:func:`save_output`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TextIO

from .._errors import CommandError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# What --help says of the exit codes, for commands that do not tell their own.
EXIT_CODES_EPILOG = (
    "Exit codes: 0 done, 1 an error (one line on stderr), 2 a bad argument or output path "
    "(checked before any work starts), 130 interrupted."
)

# The suffixes matplotlib writes with its own backends (Agg, PDF, PS, SVG, PGF) and
# Pillow, a dependency of matplotlib: ``savefig`` refuses others after the work, and
# appends ``.png`` to a name without a suffix.
PLOT_SUFFIXES = (
    ".png",
    ".svg",
    ".pdf",
    ".svgz",
    ".eps",
    ".ps",
    ".pgf",
    ".jpg",
    ".jpeg",
    ".tif",
    ".tiff",
    ".webp",
    ".raw",
    ".rgba",
)

# The start of the name of a file saving an output that could not be written.
_FALLBACK_PREFIX = "onnxrt-monitoring-"
# Seconds a child run (--repeat, --processes, --counter, compare --a/--b) may take.
DEFAULT_TIMEOUT = 600.0
# The package whose ``__main__`` runs the command line (``python -m ...``), for children.
PACKAGE = __name__.rsplit(".", 2)[0]


def timeout_of(args: argparse.Namespace) -> float:
    """``--timeout``, :data:`DEFAULT_TIMEOUT` when not given."""
    return DEFAULT_TIMEOUT if args.timeout is None else float(args.timeout)


def unknown_suffix(output: str | None, formats: Iterable[str]) -> CommandError:
    """The usage error of an ``-o`` whose suffix names no format."""
    suffix = os.path.splitext(output or "")[1].lower()
    return CommandError(
        f"cannot tell the format of -o {output!r} from its suffix {suffix!r}: give "
        f"--format ({', '.join(formats)})",
        EXIT_USAGE,
    )


def _refused(option: str, path: str, reason: str) -> CommandError:
    return CommandError(f"cannot write {option} {path!r}: {reason}", EXIT_USAGE)


def _is_special(path: str) -> bool:
    """Tells whether ``path`` is an existing file that is not a regular one (``/dev/null``,
    a pipe): writing it twice, or reading and writing it, loses nothing."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _same_file(a: str, b: str) -> bool:
    """Tells whether two paths name the same file, through links, relative parts and hard
    links; paths that do not exist yet are compared once resolved."""
    if _is_special(a):
        return False
    with contextlib.suppress(OSError, ValueError):
        if os.path.samefile(a, b):
            return True
    return os.path.realpath(a) == os.path.realpath(b)


def _check_suffix(option: str, path: str, suffixes: Sequence[str] | None) -> None:
    if suffixes is None:
        return
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in suffixes:
        what = f"the suffix {suffix!r}" if suffix else "a name without a suffix"
        raise _refused(option, path, f"{what} is not supported, use one of {', '.join(suffixes)}")


def _check_named(option: str, path: str, kind: str) -> None:
    """Refuses an empty path, or a symbolic link to nothing."""
    if not path:
        raise _refused(option, path, "the path is empty")
    if os.path.islink(path) and not os.path.exists(path):
        raise _refused(option, path, f"a symbolic link to a {kind} that does not exist")


def _check_one(option: str, path: str, suffixes: Sequence[str] | None) -> None:
    """Refuses one output that cannot be created (see :func:`check_outputs`)."""
    _check_named(option, path, "file")
    if os.path.isdir(path) or path.endswith(("/", os.sep)):
        raise _refused(option, path, "it is a folder, give a file")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise _refused(option, path, f"the folder {folder!r} does not exist")
    _check_suffix(option, path, suffixes)
    if os.path.exists(path):
        writable = os.access(path, os.W_OK)
    else:
        writable = os.access(folder, os.W_OK | os.X_OK)
    if not writable:
        raise _refused(option, path, "permission denied")


def check_outputs(
    outputs: Mapping[str, str | None],
    inputs: Iterable[str] = (),
    suffixes: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Refuses, before any work starts, every output file that cannot be written or would
    destroy something: a long measure must not be lost at the end, nor overwrite what
    the user had.

    :param outputs: option -> the file it names (``{"--json": "x.json"}``); None when
        the option was not given
    :param inputs: files the command reads (a script, profiles, the arguments of the
        program it runs) that no output may overwrite; missing ones are ignored
    :param suffixes: option -> the suffixes it accepts (lower case, with the dot)
    :raises CommandError: exit code 2 and one line naming the option and the path, when a
        path is empty, a folder, a symbolic link to nothing, in a folder that does not
        exist or may not be written, has a suffix its option does not take, or is the
        same file as an input or another output (special files such as ``/dev/null``
        excepted)
    """
    given = [(option, path) for option, path in outputs.items() if path is not None]
    inputs = [p for p in inputs if p and os.path.exists(p)]
    for i, (option, path) in enumerate(given):
        _check_one(option, path, (suffixes or {}).get(option))
        for other_option, other in given[:i]:
            if _same_file(path, other):
                raise _refused(option, path, f"the same file as {other_option} {other!r}")
        for source in inputs:
            if _same_file(path, source):
                raise _refused(option, path, f"the same file as the input {source!r}")


def make_output_folder(path: str, option: str, files: Iterable[str] = ()) -> None:
    """Checks and creates an output folder (with its parents), before any work starts: one
    that passes the checks but cannot be made (``/proc/x``, a read-only mount seen as
    writable by root) is refused too.

    :param path: the folder
    :param option: the option that named it, for the message
    :param files: names of the files the command will write in it, checked when it exists
    :raises CommandError: exit code 2 and one line naming the option and the path
    """
    _check_named(option, path, "folder")
    if os.path.exists(path) and not os.path.isdir(path):
        raise _refused(option, path, "it is a file, give a folder")
    existing = os.path.abspath(path)
    while not os.path.exists(existing):  # the folder is created with its parents
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise _refused(option, path, f"{existing!r} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise _refused(option, path, "permission denied")
    if os.path.isdir(path):
        for name in files:
            check_outputs({option: os.path.join(path, name)})
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise _refused(option, path, f"the folder cannot be created ({e.strerror or e})") from None
    if not os.path.isdir(path):
        raise _refused(option, path, "it is not a folder")


def _fallback_suffix(path: str) -> str:
    """The suffix of ``path``, two parts deep (``.speedscope.json``) when the first is
    short, so the fallback file opens with the same tool."""
    name = os.path.basename(path)
    parts = name.split(".")[1:][-2:]
    if len(parts) == 2 and len(parts[0]) > 12:
        parts = parts[1:]
    return "".join("." + p for p in parts if p and len(p) <= 16)


def save_fallback(write: Callable[[str], object], suffix: str) -> str:
    """Writes an output that could not go where asked into a new file of the temporary
    folder (``$TMPDIR``, ``/tmp``).

    :param write: writes the output into the path it is given
    :param suffix: the file's suffix, with its dot
    :return: the file written
    :raises OSError: this failed too; nothing is left behind
    """
    import tempfile  # only when an output failed: every command imports this module

    fd, fallback = tempfile.mkstemp(prefix=_FALLBACK_PREFIX, suffix=suffix)
    os.close(fd)
    try:
        write(fallback)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(fallback)
        raise
    return fallback


def save_output(option: str, path: str, write: Callable[[str], object]) -> None:
    """Writes an output file after the work; if that fails (a full disk, a folder removed
    meanwhile), the result is saved into a fallback file instead, named in the error.

    :param option: the option naming the file, for the message
    :param path: the file
    :param write: writes the output into the path it is given (opens, writes, closes)
    :raises CommandError: exit code 1, naming the file, the reason and where the result
        went (or why it could not be saved at all)
    """
    existed = os.path.exists(path)
    try:
        write(path)
        return
    except OSError as e:
        reason = e.strerror or str(e)
    if not existed and not _is_special(path):  # a partial file is not the result
        with contextlib.suppress(OSError):
            os.remove(path)
    try:
        fallback = save_fallback(write, _fallback_suffix(path))
    except OSError as e:
        raise CommandError(
            f"cannot write {option} {path!r}: {reason}; the result could not be saved "
            f"elsewhere either ({e.strerror or e})"
        ) from None
    raise CommandError(
        f"cannot write {option} {path!r}: {reason}; the result was saved to {fallback!r}"
    )


def emit_text(text: str, output: str | None, out: TextIO, option: str = "-o") -> bool:
    """Writes a command's rendered output: to ``out`` when no file is named (ending with
    a line break, so that a shell's prompt starts a line of its own), else into the file
    through :func:`save_output`.

    :param text: what to write
    :param output: the file named by ``option``, None for ``out``
    :param out: the standard output
    :param option: the option naming the file, for messages
    :return: True when a file was written
    """
    if output is None:
        out.write(text if text.endswith("\n") or not text else text + "\n")
        return False
    save_output(option, output, text_writer(text))
    return True


def text_writer(text: str) -> Callable[[str], None]:
    """What writes ``text`` (UTF-8) to a file named later, as :func:`save_output` takes."""

    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    return write


def save_outputs(writes: Iterable[tuple[str, str | None, Callable[[str], object]]]) -> None:
    """Writes several output files with :func:`save_output`, all of them even when one
    fails.

    :param writes: ``(option, path, write)`` triples; those whose path is None are skipped
    :raises CommandError: exit code 1, one line naming every file that failed
    """
    failures = []
    for option, path, write in writes:
        if path is None:
            continue
        try:
            save_output(option, path, write)
        except CommandError as e:
            failures.append(str(e))
    if failures:
        raise CommandError("; ".join(failures))


class Command(Protocol):
    """What a subcommand provides. It may also define ``exit_codes``, a sentence for its
    ``--help`` (:data:`EXIT_CODES_EPILOG` otherwise), unless its parser has an epilog."""

    name: str
    help: str

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Adds the subcommand's arguments to ``parser``."""

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Runs the subcommand and returns its exit code."""


ALLOC_DEFAULT = 256 * 1024  # --alloc-sample: bytes between two sampled allocations


def alloc_size(text: str) -> int:
    """``--alloc-sample``: a size (``256KiB``, ``1MB``, ``65536``), 0 for off.

    :param text: the option's value
    :return: bytes
    :raises argparse.ArgumentTypeError: not a size, or out of range
    """
    from .._alloc.program import check_mean
    from .._format import parse_bytes

    try:
        return check_mean(parse_bytes(text.strip().replace(" ", "")))
    except (TypeError, ValueError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def check_alloc_switch(args: Any) -> None:
    """Refuses a value of ``ONNXRT_MONITORING_ALLOC`` that means neither on nor off
    (exit 2), where allocations would be tracked.

    :param args: the parsed options (``alloc_sample``)
    :raises CommandError: the variable's value is neither
    """
    from .._alloc.shim import check_switch

    if getattr(args, "alloc_sample", 0):
        try:
            check_switch(os.environ)
        except ValueError as e:
            raise CommandError(str(e), EXIT_USAGE) from None


def check_probes_open(names: Sequence[str]) -> None:
    """Refuses, before any work, a device probe that cannot be read here (no NVIDIA driver
    for ``nvml``): exit 2 and one line naming it, as an unknown probe is.

    :param names: the probes asked for (known to the registry)
    :raises CommandError: the first that cannot open
    """
    from .._memory.registry import get_spec, open_probe

    for name in names:
        spec = get_spec(name)
        if spec.inprocess:  # read inside the program, where it runs
            continue
        try:
            open_probe(spec.to_arg(), set).close()
        except Exception as e:  # a probe's own failure, whatever it is: said, not raised
            raise CommandError(f"--probe {name}: cannot be read here: {e}", EXIT_USAGE) from None


def refuse_ignored(rules: Sequence[tuple[bool, str]]) -> None:
    """Refuses, before any work, the first option that would be silently ignored: one
    line saying which and why, exit 2 (py-spy and memray refuse such pairs too).

    :param rules: ``(it would be ignored, the sentence)`` pairs
    :raises CommandError: the first rule that holds
    """
    for ignored, sentence in rules:
        if ignored:
            raise CommandError(sentence, EXIT_USAGE)


def program_inputs(args: argparse.Namespace) -> list[str]:
    """The files a command reads (the profiles shown, the program and its arguments), which
    its outputs must not overwrite.

    :param args: the parsed arguments of ``profile`` or ``run``
    :return: the paths
    """
    if getattr(args, "files", None) is not None:
        return list(args.files)
    if args.module:
        import importlib.util

        try:
            spec = importlib.util.find_spec(args.module[0])
        except (ImportError, ValueError):
            spec = None  # reported when the module is run
        return [*args.module[1:], *([spec.origin] if spec and spec.origin else [])]
    target = args.target or ""
    return [target, os.path.join(target, "__main__.py"), *args.args]
