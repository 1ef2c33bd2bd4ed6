"""``.. runpython::``: runs a code block at build time and shows its output.

The code runs in a separate Python process (the interpreter building the docs) in a
temporary folder, with a timeout, so that an example can neither hang the build nor
leak state into it. What it prints is inserted as a literal block below the code. A
failing example (non-zero exit code or timeout) is a build warning, hence an error
with ``sphinx -W``: the documentation cannot show an example that no longer runs;
without ``-W`` the page says so where the output would be, never an empty output.

Options:

- ``:timeout: SECONDS`` (default 300: a kill path for a hang, not a speed bound)
- ``:hide-code:`` shows only the output
- ``:shell:`` runs the block with ``bash -e`` instead of Python; ``python`` and the
  console scripts resolve to the interpreter building the docs
- ``:figure: ALT TEXT`` saves a matplotlib figure after the code has run (the figure of
  the global ``ax``, else the global ``fig``, else pyplot's current one) and inserts it
  as a picture (embedded in the page, nothing is written into the sources)
- ``:figure-width: WIDTH`` width of that picture (e.g. ``90%``)

Example::

    .. runpython::

        print(1 + 1)
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 300.0  # a kill path for a hang only: a busy machine (load 15) is slow
_FIGURE_FILE = "_runpython_figure.png"
# Appended to the user's code when a figure is wanted: saves the figure of a global ``ax``
# (what the plot helpers return), else of a global ``fig``, else pyplot's current figure.
_SAVE_FIGURE = f"""
import sys as _sys
_fig = getattr(globals().get("ax"), "figure", None) or globals().get("fig")
if _fig is None and "matplotlib.pyplot" in _sys.modules:
    import matplotlib.pyplot as _plt
    _fig = _plt.gcf() if _plt.get_fignums() else None
if _fig is not None:
    _fig.savefig({_FIGURE_FILE!r}, dpi=100, bbox_inches="tight")
"""
_MAX_SHOWN_ERROR = 3000


class ExampleError(Exception):
    """An example failed: the message holds what it printed."""


def child_environment(repo_root: Path) -> dict[str, str]:
    """Environment of the process running an example.

    The repository root comes first on ``PYTHONPATH`` so that the examples use the
    sources being documented; matplotlib draws off-screen.

    :param repo_root: root of the repository
    :return: the environment
    """
    env = dict(os.environ)
    paths = [str(repo_root), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["MPLBACKEND"] = "Agg"
    env["PYTHONIOENCODING"] = "utf-8"
    env["COLUMNS"] = "100"
    return env


def run_example(
    code: str, repo_root: Path, timeout: float, shell: bool = False, figure: bool = False
) -> tuple[str, bytes | None]:
    """Runs an example in a child process inside a temporary folder.

    :param code: Python code, or bash commands if ``shell`` is true
    :param repo_root: root of the repository (put first on ``PYTHONPATH``)
    :param timeout: seconds before the child is killed
    :param shell: run ``code`` with ``bash -e`` instead of Python
    :param figure: save and return the current matplotlib figure as PNG bytes
    :return: what the example printed (stdout), the PNG bytes or None
    :raises ExampleError: on a non-zero exit code or a timeout
    """
    with tempfile.TemporaryDirectory(prefix="runpython-") as tmp:
        if shell:
            cmd = ["bash", "-e", "-c", code]
        else:
            script = Path(tmp) / "example.py"
            script.write_text(code + (_SAVE_FIGURE if figure else ""), encoding="utf-8")
            cmd = [sys.executable, str(script)]
        try:
            proc = subprocess.run(
                cmd,
                cwd=tmp,
                env=child_environment(repo_root),
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            # subprocess.run kills the child before raising.
            raise ExampleError(f"timed out after {timeout} s") from e
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr)[-_MAX_SHOWN_ERROR:]
            raise ExampleError(f"exit code {proc.returncode}:\n{tail}")
        png = Path(tmp) / _FIGURE_FILE
        picture = png.read_bytes() if figure and png.exists() else None
        if figure and picture is None:
            raise ExampleError("the example was expected to draw a matplotlib figure")
        return proc.stdout, picture


class RunPythonDirective(SphinxDirective):
    """Runs its content and shows the code followed by its output."""

    has_content = True
    option_spec: ClassVar[dict[str, Any]] = {
        "timeout": directives.positive_int,
        "hide-code": directives.flag,
        "shell": directives.flag,
        "figure": directives.unchanged,
        "figure-width": directives.unchanged,
    }

    def run(self) -> list[nodes.Node]:
        """Executes the example and returns the nodes to insert.

        :return: code block, output block and picture, as requested
        """
        code = "\n".join(self.content)
        shell = "shell" in self.options
        language = "bash" if shell else "python"
        result: list[nodes.Node] = []
        if "hide-code" not in self.options:
            block = nodes.literal_block(code, code, language=language)
            result.append(block)
        repo_root = Path(self.env.srcdir).parent
        timeout = float(self.options.get("timeout", DEFAULT_TIMEOUT))
        figure = "figure" in self.options
        try:
            output, picture = run_example(code, repo_root, timeout, shell=shell, figure=figure)
        except ExampleError as e:
            logger.warning("runpython: the example failed: %s", e, location=self.get_location())
            # On the page too: an output left empty would read as an example printing nothing.
            said = f"this example failed when the page was built: {e}"
            failed = nodes.literal_block(said, said, language="text")
            failed["classes"].append("runpython-failed")
            result.append(failed)
            return result
        text = output.rstrip().lstrip("\n")
        if text:
            out = nodes.literal_block(text, text, language="text")
            out["classes"].append("runpython-output")
            result.append(out)
        if picture is not None:
            uri = "data:image/png;base64," + base64.b64encode(picture).decode("ascii")
            image = nodes.image(uri=uri, alt=self.options.get("figure") or "figure")
            if self.options.get("figure-width"):
                image["width"] = self.options["figure-width"]
            result.append(image)
        return result


def setup(app: Sphinx) -> dict[str, Any]:
    """Registers the directive.

    :param app: the Sphinx application
    :return: extension metadata
    """
    app.add_directive("runpython", RunPythonDirective)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
