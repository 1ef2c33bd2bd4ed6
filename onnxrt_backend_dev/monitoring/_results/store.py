"""Saving and loading results: :func:`make_result` wraps a payload with the schema, the
environment and the command; :func:`save_result` writes it (never over an existing file
unless asked, atomically so that a baseline is never left half written);
:func:`load_result` reads it back, checked, and names the file in every error."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import BadValue, ResultFormatError
from .._gc import gc_paused
from .._validate import check_bool, check_choice
from . import environment
from .schema import KINDS, SCHEMA, VERSION, check_result

# A saved result larger than this is refused before it is read (20 runs of a
# 20,000-function profile take about 15 MB).
MAX_FILE_SIZE = 2**30


def make_result(
    kind: str,
    data: Mapping[str, Any],
    command: Sequence[str] = (),
    env: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A result document, checked against the schema.

    :param kind: one of :data:`.schema.KINDS`
    :param data: the payload (built by :mod:`.payloads`)
    :param command: the command line that measured it
    :param env: the environment, :func:`environment.capture` when None
    :raises ResultFormatError: the payload does not follow the schema
    """
    check_choice("kind", kind, KINDS)
    doc = {
        "schema": SCHEMA,
        "version": VERSION,
        "kind": kind,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": [str(c) for c in command],
        "environment": dict(environment.capture() if env is None else env),
        "data": dict(data),
    }
    return check_result(doc)


def _reject_constant(name: str) -> Any:
    # json.load takes NaN and Infinity by default; a figure never is one.
    raise ResultFormatError(f"{name} is not a number a result may hold")


def save_result(path: str | os.PathLike[str], doc: Mapping[str, Any], force: bool = False) -> str:
    """Writes a result document as JSON, and returns the path written.

    :param path: the file
    :param doc: the document (:func:`make_result`)
    :param force: replace an existing file (refused otherwise)
    :raises BadValue: the file exists and ``force`` is False
    :raises ResultFormatError: the document does not follow the schema
    :raises OSError: the file cannot be written (an existing one is left as it was)
    """
    check_bool("force", force)
    name = os.fspath(path)
    check_result(doc)
    if os.path.exists(name) and not force:
        raise BadValue(f"path {name!r} exists; pass force=True (--force) to replace it")
    text = json.dumps(doc, allow_nan=False, separators=(",", ":"))
    folder = os.path.dirname(os.path.abspath(name))
    fd, tmp = tempfile.mkstemp(prefix=".result-", suffix=".json", dir=folder)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; a result is not
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.write("\n")
        os.replace(tmp, name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    return name


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it: put it back at once
    os.umask(mask)
    return mask


def parse_result(text: str | bytes, source: str = "<string>") -> dict[str, Any]:
    """Parses and checks a result from its JSON text.

    :param text: the JSON
    :param source: what to call it in messages
    :raises ResultFormatError: ``cannot read result 'x.json': ...``
    """
    try:
        with gc_paused():  # millions of numbers in lists that all survive
            doc = json.loads(text, parse_constant=_reject_constant)
            return check_result(doc)
    except ResultFormatError as e:
        raise ResultFormatError(f"cannot read result {source!r}: {e}") from None
    except UnicodeDecodeError:
        raise ResultFormatError(f"cannot read result {source!r}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise ResultFormatError(
            f"cannot read result {source!r}: not JSON or truncated ({e.msg} at line {e.lineno}"
            f" column {e.colno})"
        ) from None
    except RecursionError:
        raise ResultFormatError(f"cannot read result {source!r}: nested too deeply") from None


def load_result(path: str | os.PathLike[str], kind: str | None = None) -> dict[str, Any]:
    """Reads a saved result and checks it.

    :param path: the file
    :param kind: the kind expected, any when None
    :raises ResultFormatError: not a regular file (never opened), larger than
        :data:`MAX_FILE_SIZE`, not a result of this schema, truncated, a bad figure, or
        another kind; the message names the file and the problem
    """
    from .._untrusted import read_untrusted

    name = os.fspath(path)
    data = read_untrusted(name, "result", MAX_FILE_SIZE, ResultFormatError)
    if not data.strip():
        raise ResultFormatError(f"cannot read result {name!r}: the file is empty")
    doc = parse_result(data, name)
    if kind is not None and doc["kind"] != kind:
        raise ResultFormatError(f"result {name!r} is a {doc['kind']} result, not a {kind} one")
    return doc
