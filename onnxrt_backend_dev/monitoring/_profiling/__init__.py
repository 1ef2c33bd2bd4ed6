"""Profiling: the call graph built from pstats and its renderers.

Importing the package (which Python does before any of its modules) imports none of
them, so that what needs only the registry's names (:mod:`.formats`, :mod:`.choices`:
``profile --help``, the sampled ``profile``) pays for no pstats and no renderer. The
reference's renderings reach the model on first use: :class:`.model.ProfileNode`'s
``as_dict``, ``to_text`` and ``to_json`` call :func:`reference_rendering`, which imports
:mod:`.reference`, so the model keeps its methods without importing a renderer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import ReferenceRendering


def reference_rendering() -> ReferenceRendering:
    """The module of the reference's renderings, imported on first use.

    :return: :mod:`.reference`
    """
    from . import reference

    return reference
