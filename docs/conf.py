"""Sphinx configuration of the onnxrt-backend-dev monitoring documentation.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html``. Everything
shown is produced at build time from the code: the API (autodoc), the examples and
their output (``runpython``), the pictures, the command-line guide (``cli-guide``) and
the benchmark figures (``markdown-include`` of ``benchmarks/RESULTS.md``). No network.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# Document the sources of this checkout, whatever is installed.
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))


def read_version() -> str:
    """Reads ``__version__`` from ``onnxrt_backend_dev/__init__.py``, its only home.

    :return: the version string
    """
    text = (ROOT / "onnxrt_backend_dev" / "__init__.py").read_text(encoding="utf-8")
    m = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", text, flags=re.MULTILINE)
    if m is None:
        raise RuntimeError("__version__ not found in onnxrt_backend_dev/__init__.py")
    return m.group(1)


project = "onnxrt-backend-dev"
author = "onnxrt-backend-dev monitoring developers"
copyright = "2026, " + author
release = read_version()
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "runpython",
    "requires_module",
    "cli_guide",
    "markdown_include",
]

exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme = "alabaster"
html_title = f"{project} {release}"
html_theme_options = {
    "description": "How long, how much memory, and where the time goes.",
    "page_width": "1240px",
}

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# The public faces import their optional dependencies lazily; nothing to mock.
autodoc_mock_imports: list[str] = []
