"""How a function of one result is matched with the same function of another, and how
it is named for a reader.

A function is matched by its file (``<main>`` for the program's script: ``old.py`` and
``new.py`` match), its name and the rank of its first line among the functions of that
name in that file (its line moves whenever the code above it changes). An address in a
name or file (``<lambda> at 0x7f…``) differs from run to run: it becomes ``0x…``, and
functions left alike (twenty generated ``__new__`` of ``<string>`` line 1) fold into one.
A function is named as ``profile`` shows it: ``read_csv (pandas/io/parsers/readers.py:1304)``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from typing import Any

from .._format import one_line

Key = tuple[str, str, int]  # file (or <main>), name, rank of the line

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")


def _without_address(text: str) -> str:
    """``text`` with every hexadecimal address (``0x7f3a…``) replaced by ``0x…``."""
    return _ADDRESS.sub("0x…", text) if "0x" in text else text


def match_keys(functions: Sequence[Sequence[Any]], main: str | None) -> list[Key]:
    """The matching key of each function (see the module's description).

    :param functions: ``[file, line, name]`` of one result
    :param main: the program's script, None when unknown
    :return: one key per function, in order; equal keys fold
    """
    files = [_without_address(str(f[0])) for f in functions]
    names = [_without_address(str(f[2])) for f in functions]
    lines = list(map(operator.itemgetter(1), functions))
    order = sorted(zip(files, names, lines, range(len(functions)), strict=True))
    keys: list[Key] = [("", "", 0)] * len(functions)
    ranks: dict[tuple[str, str], tuple[int, int]] = {}  # (file, name) -> (last line, rank)
    for file, name, line, i in order:
        file = "<main>" if main is not None and file == main else file
        last = ranks.get((file, name))
        # The next rank for a new line; the same one for a line seen (they fold).
        rank = 0 if last is None else (last[1] if last[0] == line else last[1] + 1)
        ranks[(file, name)] = (line, rank)
        keys[i] = (file, name, rank)
    return keys


def display_name(file: str, line: int, name: str) -> str:
    """The function as ``profile`` names it: ``name (short/path.py:line)``; a built-in
    (cProfile's ``~``), a thread's root or a function without a file by its name alone.

    :param file: the function's file
    :param line: its first line
    :param name: its name
    """
    from .._sampling.view import short_file

    name = one_line(name)
    if file in ("", "~") or (line == 0 and not file.endswith(".py")):
        return name
    return f"{name} ({one_line(short_file(file))}:{line})"


def place(file: str, line: int, name: str) -> str:
    """A function's identity as ``file:line:name``: names repeat (every ``<module>``),
    places do not.

    :param file: the function's file
    :param line: its first line
    :param name: its name
    """
    return f"{file}:{line}:{name}"
