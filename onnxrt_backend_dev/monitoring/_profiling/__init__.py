"""Profiling: the call graph built from pstats and its renderers.

Importing the package (which Python does before any of its modules) installs the
reference's renderings as the model's hook, so :class:`.model.ProfileNode` keeps its
``as_dict``, ``to_text`` and ``to_json`` methods without importing a renderer.
"""

from . import reference
from .model import install_reference

install_reference(reference)
