"""The child of a sampled run (``profile --save``, ``profile --repeat``, ``compare
--a/--b``), started by :data:`.runner.SAMPLED_BOOT`: runs a program as ``__main__``
under the package's sampler and writes its sampled payload (:func:`.payloads.sampled_data`),
wall time, exit code and memory high-water mark into one JSON file, even when the
program raises or exits.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _maxrss() -> float | None:
    try:
        import resource
    except ImportError:  # Windows
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(rss if sys.platform == "darwin" else rss * 1024)


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
    from .._errors import CommandError
    from .._report.sampling import Sampling
    from .._run.program import as_main, module_code, run_main, script_code
    from .._sampling.frames import depth
    from .payloads import sampled_data

    begin = _maxrss()
    try:
        code, module, argv, path0 = module_code(target) if how == "module" else script_code(target)
    except CommandError as e:  # checked before the run: gone since
        sys.stderr.write(f"{e}\n")
        return 1
    sampler = Sampling(interval, timer, program=os.path.basename(target), collector=collector)
    start = time.perf_counter()
    with as_main(module, [*argv, *args], path0):
        sampler.start(skip_outer=depth(sys._getframe()) + 1)  # this frame and run_main
        try:
            rc = run_main(code, module, target, sys.stderr).code
        finally:
            result = sampler.stop()
            wall = time.perf_counter() - start
    payload = sampled_data([result.profile], main=code.co_filename if how == "path" else None)
    doc = {"wall": wall, "exit": rc, "begin": begin, "peak": _maxrss(), "profile": payload}
    with open(out + ".json", "w", encoding="utf-8") as f:
        json.dump(doc, f, allow_nan=False)
    return rc
