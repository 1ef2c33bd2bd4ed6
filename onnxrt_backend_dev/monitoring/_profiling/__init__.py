"""Profiling: the call graph built from pstats and its renderers.

Importing the package imports none of its modules, so that what needs only the
registry's names (:mod:`.formats`, :mod:`.choices`: ``profile --help``, the sampled
``profile``) pays for no pstats and no renderer. :class:`.model.ProfileNode`'s
``as_dict``, ``to_text`` and ``to_json`` reach :mod:`.reference` through
:func:`reference_rendering`, so the model keeps its methods without importing a renderer.
"""

from __future__ import annotations

from types import ModuleType


def reference_rendering() -> ModuleType:
    """The module of the reference's renderings, imported on first use.

    :return: :mod:`.reference`
    """
    from . import reference

    return reference
