"""The child of a sampled run (``profile --save``, ``profile --repeat``, ``compare
--a/--b``): runs a program as ``__main__`` under the sampler and writes its profile, as a
sampled payload (:func:`.payloads.sampled_data`), with its wall time, exit code and
memory high-water mark, into one JSON file, even when the program raises or exits.

Started as ``python -c BOOT OUT INTERVAL TIMER COLLECTOR HOW TARGET ARGS...``
(:data:`.runner.SAMPLED_BOOT`) by :mod:`.runner`, which gives it a timeout and kills its
process group past it. The sampler is the package's (``_report.sampling.Sampling``);
only its model's public shape is read (:func:`.payloads.sampled_data`), so the
collection may change beneath.
"""

from __future__ import annotations

import builtins
import importlib.util
import json
import os
import sys
import time
import types
from typing import Any


def _maxrss() -> float | None:
    try:
        import resource
    except ImportError:  # Windows
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(rss if sys.platform == "darwin" else rss * 1024)


def _code(how: str, target: str) -> tuple[types.CodeType, str]:
    """The program's code and its file: a script, or a module (its ``__main__`` for a
    package), found as ``python -m`` finds it."""
    if how == "module":
        spec = importlib.util.find_spec(target)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(f"{target}.__main__")
        loader: Any = spec.loader if spec is not None else None
        if spec is None or loader is None or not hasattr(loader, "get_code"):
            raise SystemExit(f"No module named {target}")
        return loader.get_code(spec.name), str(spec.origin)
    with open(target, "rb") as f:
        source = f.read()
    return compile(source, target, "exec"), target


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def main(
    out: str,
    interval: float,
    timer: str,
    how: str,
    target: str,
    args: list[str],
    collector: str = "auto",
) -> int:
    """Runs the program under the sampler and writes ``OUT.json``.

    :param out: the start of the output file's name
    :param interval: seconds between samples
    :param timer: the sampler's timer (``prof``, ``real``, ``thread``)
    :param how: ``path`` (a script) or ``module`` (``-m``)
    :param target: the script or the module
    :param args: the program's arguments
    :param collector: the sampler's collector (``auto``, ``observer``, ``in-process``)
    :return: the program's exit code
    """
    from .._report.sampling import Sampling
    from .._sampling.frames import depth
    from .payloads import sampled_data

    begin = _maxrss()
    sys.path[0] = os.path.dirname(os.path.abspath(target)) if how == "path" else os.getcwd()
    code, filename = _code(how, target)
    module = types.ModuleType("__main__")
    module.__dict__.update({"__file__": filename, "__builtins__": builtins})
    sys.modules["__main__"] = module
    sys.argv = [filename, *args]
    sampler = Sampling(interval, timer, program=os.path.basename(target), collector=collector)
    rc = 0
    start = time.perf_counter()
    sampler.start(skip_outer=depth(sys._getframe()))
    try:
        exec(code, module.__dict__)
    except SystemExit as e:
        rc = _exit_code(e)
    except BaseException:
        import traceback

        traceback.print_exc()
        rc = 1
    finally:
        result = sampler.stop()
        wall = time.perf_counter() - start
    payload = sampled_data([result.profile], main=filename if how == "path" else None)
    doc = {"wall": wall, "exit": rc, "begin": begin, "peak": _maxrss(), "profile": payload}
    with open(out + ".json", "w", encoding="utf-8") as f:
        json.dump(doc, f, allow_nan=False)
    return rc
