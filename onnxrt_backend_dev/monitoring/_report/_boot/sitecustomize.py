"""Imported at start-up by every Python below a program under ``run`` (this folder
leads its ``PYTHONPATH``, see :mod:`onnxrt_backend_dev.monitoring._report.follow`):
records this process into the program's stream, then runs the ``sitecustomize`` this
one hides, if any, so that the interpreter starts as it would have."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _follow() -> None:
    spec = os.environ.get("ONNXRT_MONITORING_FOLLOW", "")
    root = spec.rsplit("|", 1)[-1] if spec.count("|") == 2 else ""
    if not root:
        return
    added = root not in sys.path
    if added:
        sys.path.append(root)  # last: it must not hide the program's own modules
    try:
        from onnxrt_backend_dev.monitoring._report.follow import start_in_descendant

        start_in_descendant(spec)
    except Exception:  # another interpreter, a broken pipe: not followed
        pass
    finally:
        if added and root in sys.path:
            sys.path.remove(root)


def _chain() -> None:
    """Runs the next ``sitecustomize`` on the path (a distribution's, a venv's)."""
    here = os.path.dirname(os.path.abspath(__file__))
    while here in sys.path:  # the program's sys.path as without this folder
        sys.path.remove(here)
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_follow()
_chain()
