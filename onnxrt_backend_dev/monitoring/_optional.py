"""Lazy imports of optional dependencies, with the extra that provides them."""

from __future__ import annotations

import importlib
from types import ModuleType

from ._errors import MissingDependencyError

__all__ = ["MissingDependencyError", "require"]


def require(module: str, extra: str, purpose: str = "") -> ModuleType:
    """Imports an optional module or raises :class:`MissingDependencyError`.

    :param module: module to import, e.g. ``"pandas"``
    :param extra: the extra of ``onnxrt-backend-dev`` that installs it, e.g. ``"pandas"``
    :param purpose: what the module is needed for, shown in the message
    :return: the imported module
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        why = f" for {purpose}" if purpose else ""
        raise MissingDependencyError(
            f"{module} is required{why}; install it with "
            f"pip install 'onnxrt-backend-dev[{extra}]' ({e})"
        ) from e
