"""``.. requires-module:: NAME``: keeps a part of a page for when a module exists.

The content (autodoc directives, executed examples) is rendered only when the module
can be found; otherwise a short note says that the module is not part of this build.
A module that exists but fails to import is *not* hidden: its autodoc directives warn,
which fails a ``sphinx -W`` build, as it should.

Example::

    .. requires-module:: onnxrt_backend_dev.monitoring._magics

        .. automodule:: onnxrt_backend_dev.monitoring._magics
"""

from __future__ import annotations

import importlib.util
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

logger = logging.getLogger(__name__)


def module_exists(name: str) -> bool:
    """Tells whether a module can be found (without importing it).

    :param name: dotted module name
    :return: True if a spec is found
    """
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a missing parent package
        return False


class RequiresModuleDirective(SphinxDirective):
    """Renders its content only when the module given as argument exists."""

    has_content = True
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        """Parses the content or returns a note.

        :return: the nodes to insert
        """
        name = self.arguments[0]
        if module_exists(name):
            container = nodes.container()
            nested_parse_with_titles(self.state, self.content, container, self.content_offset)
            return container.children
        logger.info("requires-module: %s not found, part skipped", name)
        note = nodes.note()
        note += nodes.paragraph(
            "", "", nodes.literal(name, name), nodes.Text(" is not part of this build yet.")
        )
        return [note]


def setup(app: Sphinx) -> dict[str, Any]:
    """Registers the directive.

    :param app: the Sphinx application
    :return: extension metadata
    """
    app.add_directive("requires-module", RequiresModuleDirective)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
