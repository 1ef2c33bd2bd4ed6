"""The documentation cannot rot: the Sphinx site builds with warnings as errors, and every
code block of ``README.md`` runs.

README convention (also stated in README.md, in a comment above its "Usage" section):

- every fenced ```` ```python ```` block is executed in a fresh interpreter, in an empty
  temporary folder, and must exit with 0;
- every fenced ```` ```bash ```` block is executed with ``bash -e`` the same way
  (``python`` and ``onnxrt-monitoring`` are those of the interpreter running the tests),
  except the blocks of the "Set up" section (they create ``.venv`` and run this very
  suite: CI runs the second command, ``tests/test_packaging.py`` checks what the first
  one does) and the blocks preceded by the line ``<!-- readme-test: skip -->``;
- other languages (``text``, ``console``...) are shown, never run.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from helpers import run_checked

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
SKIP_MARK = "<!-- readme-test: skip -->"
SETUP_SECTION = "set up"
# The build runs every example of the docs: 45 s on a quiet 2-core machine, over 240 s
# at load 10 (a stress run timed out there). The timeout is a kill path for a hang only.
DOCS_TIMEOUT = 720.0
BLOCK_TIMEOUT = 90.0
_FENCE = re.compile(r"^(```+)\s*([\w+-]*)\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block of a Markdown file."""

    line: int  # 1-based line of the opening fence
    language: str
    code: str
    section: str  # the nearest heading above, lower case
    skip: bool  # preceded by SKIP_MARK

    @property
    def id(self) -> str:
        return f"README.md:{self.line}:{self.language}"


def parse_code_blocks(text: str) -> list[CodeBlock]:
    """Returns the fenced code blocks of a Markdown text, in order.

    :param text: Markdown
    :return: the blocks
    """
    blocks: list[CodeBlock] = []
    lines = text.splitlines()
    section, previous, i = "", "", 0
    while i < len(lines):
        line = lines[i]
        heading = _HEADING.match(line)
        fence = _FENCE.match(line)
        if heading:
            section = heading.group(2).strip().lower()
        elif fence:
            end = i + 1
            while end < len(lines) and lines[end].strip() != fence.group(1):
                end += 1
            code = "\n".join(lines[i + 1 : end]) + "\n"
            blocks.append(
                CodeBlock(i + 1, fence.group(2).lower(), code, section, previous == SKIP_MARK)
            )
            i = end
        if line.strip():
            previous = line.strip()
        i += 1
    return blocks


def is_run(block: CodeBlock) -> bool:
    """Tells whether a README block is executed by the tests (see the module docstring).

    :param block: the block
    :return: True to run it
    """
    if block.skip or block.language not in ("python", "bash"):
        return False
    return not (block.language == "bash" and block.section == SETUP_SECTION)


def child_env() -> dict[str, str]:
    """Environment for the README blocks and the docs build: this checkout first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    )
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["MPLBACKEND"] = "Agg"
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def _readme_blocks() -> list[CodeBlock]:
    return parse_code_blocks(README.read_text(encoding="utf-8")) if README.exists() else []


# ---------------------------------------------------------------------------------------
# The README convention itself (fast).


def test_code_blocks_are_found_with_their_section_and_mark() -> None:
    text = "\n".join(
        [
            "# Title",
            "## Set up",
            "```bash",
            "pip install x",
            "```",
            "## Usage",
            "```python",
            "print(1)",
            "```",
            SKIP_MARK,
            "",
            "```bash",
            "sleep 1000",
            "```",
            "```text",
            "shown only",
            "```",
        ]
    )
    blocks = parse_code_blocks(text)
    assert [(b.line, b.language, b.section, b.skip) for b in blocks] == [
        (3, "bash", "set up", False),
        (7, "python", "usage", False),
        (12, "bash", "usage", True),
        (15, "text", "usage", False),
    ]
    assert blocks[1].code == "print(1)\n"
    assert [is_run(b) for b in blocks] == [False, True, False, False]


def test_readme_has_the_setup_commands_and_runnable_blocks() -> None:
    blocks = _readme_blocks()
    setup = [b for b in blocks if b.section == SETUP_SECTION]
    assert setup, "README.md must have a 'Set up' section with a code block"
    assert "bash tools/test.sh" in setup[0].code
    assert any(is_run(b) for b in blocks), "README.md has no block that the tests run"


# ---------------------------------------------------------------------------------------
# Executing the README.


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in _readme_blocks() if is_run(b)], ids=lambda b: b.id)
def test_readme_block_runs(block: CodeBlock, tmp_path: Path) -> None:
    if block.language == "python":
        script = tmp_path / "readme_block.py"
        script.write_text(block.code, encoding="utf-8")
        cmd = [sys.executable, str(script)]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    run_checked(cmd, tmp_path, BLOCK_TIMEOUT, child_env(), f"{block.id}\n--- code\n{block.code}")


# ---------------------------------------------------------------------------------------
# The Sphinx extensions of docs/_ext (fast, in-process).


def _ext(name: str) -> ModuleType:
    path = str(DOCS / "_ext")
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module(name)


def test_markdown_include_converts_what_results_md_uses() -> None:
    md = _ext("markdown_include")
    text = "\n".join(
        [
            "# Results",
            "<!-- hidden -->",
            "Measured on *a machine*, see `bench.py` and [pyperf](https://x.org).",
            "",
            "| tool | ratio |",
            "|------|------:|",
            "| ours | **1.0** |",
            "| timeit | 2.5 |",
            "",
            "- one",
            "  continued",
            "- two",
            "",
            "```bash",
            "python bench.py",
            "```",
        ]
    )
    nodes_ = md.markdown_to_nodes(text)
    kinds = [type(n).__name__ for n in nodes_]
    assert kinds == ["rubric", "paragraph", "table", "bullet_list", "literal_block"]
    assert "hidden" not in "".join(n.astext() for n in nodes_)
    para = nodes_[1]
    assert [type(c).__name__ for c in para.children] == [
        "Text",
        "emphasis",
        "Text",
        "literal",
        "Text",
        "reference",
        "Text",
    ]
    table = nodes_[2].astext()
    assert "timeit" in table and "2.5" in table and "|" not in table
    assert nodes_[3].astext().splitlines()[0] == "one continued"


def test_cli_guide_writes_options_as_on_the_command_line() -> None:
    import argparse

    guide = _ext("cli_guide")
    parser = argparse.ArgumentParser(prog="p")
    sub = parser.add_subparsers().add_parser("time")
    sub.add_argument("stmt")
    sub.add_argument("-n", "--number", type=int, default=50, help="runs (default %(default)s)")
    sub.add_argument("--quiet", action="store_true", help="say nothing")
    sub.add_argument("--sort", choices=["a", "b"], help="order")
    sub.add_argument("-m", nargs=argparse.REMAINDER, help="module")
    sub.add_argument("--pair", nargs=2, metavar="X")
    assert list(guide.subparsers_of(parser)) == ["time"]
    actions = {a.dest: a for a in sub._actions}
    assert guide.invocation(actions["stmt"]) == "stmt"
    assert guide.invocation(actions["number"]) == "-n NUMBER, --number NUMBER"
    assert guide.invocation(actions["quiet"]) == "--quiet"
    assert guide.invocation(actions["sort"]) == "--sort {a,b}"
    assert guide.invocation(actions["m"]) == "-m ..."
    assert guide.invocation(actions["pair"]) == "--pair X X"
    assert guide.expanded_help(sub, actions["number"]) == "runs (default 50)"
    assert guide.expanded_help(sub, actions["sort"]) == "order (one of: a, b)"


def test_requires_module_tells_missing_modules_without_importing() -> None:
    req = _ext("requires_module")
    assert req.module_exists("onnxrt_backend_dev.monitoring._cli")
    assert not req.module_exists("onnxrt_backend_dev.monitoring._no_such_module")
    assert not req.module_exists("no_such_package.sub")


def test_runpython_reports_a_failing_example(tmp_path: Path) -> None:
    rp = _ext("runpython")
    out, picture = rp.run_example("print('hello')", ROOT, timeout=30)
    assert (out, picture) == ("hello\n", None)
    with pytest.raises(rp.ExampleError, match="exit code 3"):
        rp.run_example("import sys; sys.exit(3)", ROOT, timeout=30)
    with pytest.raises(rp.ExampleError, match="timed out"):
        rp.run_example("import time; time.sleep(30)", ROOT, timeout=0.5)


def test_runpython_saves_the_figure_of_the_global_ax() -> None:
    rp = _ext("runpython")
    code = "from matplotlib.figure import Figure\nax = Figure().add_subplot()\nax.plot([1, 2])\n"
    _, picture = rp.run_example(code, ROOT, timeout=60, figure=True)
    assert picture is not None and picture.startswith(b"\x89PNG")
    with pytest.raises(rp.ExampleError, match="figure"):
        rp.run_example("x = 1", ROOT, timeout=60, figure=True)


# ---------------------------------------------------------------------------------------
# Building the site.


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@pytest.fixture(scope="module")
def html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Builds the documentation once (warnings are errors) and returns the HTML folder."""
    out = tmp_path_factory.mktemp("docs")
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html"]
    cmd += ["-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    run_checked(cmd, ROOT, DOCS_TIMEOUT, child_env(), "sphinx")
    return out / "html"


def _page(html: Path, name: str) -> str:
    return (html / f"{name}.html").read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.timeout(DOCS_TIMEOUT + 60)  # the first one builds the site
def test_docs_build_with_warnings_as_errors(html: Path) -> None:
    for name in ("index", "monitoring", "cli", "integrations", "comparison", "changelog"):
        assert (html / f"{name}.html").exists(), name
    from onnxrt_backend_dev import __version__

    assert __version__ in _page(html, "index")
    assert __version__ in _page(html, "changelog")


# The objects of the reference document, by module: each one has its entry on the page.
REFERENCE_API = {
    "benchmark": ["measure_time"],
    "memory_peak": [
        "start_spying_on",
        "MemorySpy",
        "MemorySpy.start",
        "MemorySpy.stop",
        "Monitor",
    ],
    "profiling": [
        "ProfileNode",
        "ProfileNode.add_called_by",
        "ProfileNode.add_calls_to",
        "ProfileNode.as_dict",
        "ProfileNode.filter_node_",
        "ProfileNode.get_root",
        "ProfileNode.key",
        "ProfileNode.to_json",
        "ProfileNode.to_text",
        "profile",
        "profile2graph",
    ],
}


@pytest.mark.slow
@pytest.mark.timeout(DOCS_TIMEOUT + 60)  # the first one builds the site
def test_docs_document_the_reference_api(html: Path) -> None:
    page = _page(html, "monitoring")
    for module, names in REFERENCE_API.items():
        full = f"onnxrt_backend_dev.monitoring.{module}"
        if not _module_exists(full):
            continue
        for name in names:
            assert f'id="{full}.{name}"' in page, f"{full}.{name}"


@pytest.mark.slow
@pytest.mark.timeout(DOCS_TIMEOUT + 60)  # the first one builds the site
def test_docs_show_the_executed_examples_and_pictures(html: Path) -> None:
    page = _page(html, "monitoring")
    if _module_exists("onnxrt_backend_dev.monitoring.benchmark"):
        assert "runpython-output" in page and "context_size" in page
    if _module_exists("onnxrt_backend_dev.monitoring.profiling"):
        assert "fct4" in page and "data:image/png;base64," in page
    if _module_exists("onnxrt_backend_dev.monitoring.memory_peak"):
        assert "source=" in page  # print(stat) of the spy example
        assert page.count("data:image/png;base64,") >= 1


@pytest.mark.slow
@pytest.mark.timeout(DOCS_TIMEOUT + 60)  # the first one builds the site
def test_docs_cli_guide_lists_every_subcommand_and_option(html: Path) -> None:
    import html as html_lib

    from onnxrt_backend_dev.monitoring._cli.dispatch import build_parser

    guide = _ext("cli_guide")
    page = html_lib.unescape(_page(html, "cli"))
    parser, commands = build_parser()
    for name, sub in guide.subparsers_of(parser).items():
        assert f'id="cli-{name}"' in page, name
        for action in sub._actions:
            for option in action.option_strings:
                assert option in page, (name, option)
    assert set(commands) == set(guide.subparsers_of(parser))


@pytest.mark.slow
@pytest.mark.timeout(DOCS_TIMEOUT + 60)  # the first one builds the site
def test_docs_comparison_includes_the_benchmark_results(html: Path) -> None:
    results = ROOT / "benchmarks" / "RESULTS.md"
    if not results.exists():
        pytest.skip("benchmarks/RESULTS.md does not exist yet")
    import html as html_lib

    page = html_lib.unescape(re.sub(r"<[^>]+>", "", _page(html, "comparison")))
    md = _ext("markdown_include")
    blocks = md.markdown_to_nodes(results.read_text(encoding="utf-8"))
    assert blocks
    # Every heading and every line of the figures (code blocks) is on the page.
    for block in blocks:
        kind = type(block).__name__
        if kind == "rubric":
            assert block.astext() in page, block.astext()
        elif kind == "literal_block":
            for line in block.astext().splitlines():
                assert line.strip() in page, line


def test_every_magic_is_in_the_magics_list_of_integrations() -> None:
    # GIVEN the magics the extension registers (their methods, from the source)
    source = (ROOT / "onnxrt_backend_dev" / "monitoring" / "_magics.py").read_text("utf-8")
    names = re.findall(r"@(?:line_cell_magic|cell_magic)\n(?:    @\w+.*\n)*    def (\w+)", source)
    intro = (ROOT / "docs" / "integrations.rst").read_text("utf-8").split(".. runpython::")[0]
    # THEN the list at the top of the page names each one
    assert names and all(f"``%%{name}``" in intro for name in names), names


@pytest.mark.parametrize(("command", "option", "default"),
                         [("spy", "--delay", "(0.01)"), ("spy", "--top", "(10)")])  # fmt: skip
def test_options_with_a_default_say_it(command: str, option: str, default: str) -> None:
    from onnxrt_backend_dev.monitoring._cli.dispatch import build_parser

    parser, _ = build_parser(load=[command])
    found = (getattr(a, "choices", None) for a in parser._actions)
    subs = next(c for c in found if isinstance(c, dict))
    action = next(a for a in subs[command]._actions if option in a.option_strings)
    assert default in (action.help or "")


@pytest.mark.slow
def test_a_failing_example_says_so_on_the_page(tmp_path: Path) -> None:
    # GIVEN a page whose example exits 3, built without -W (a warning, not an error)
    (tmp_path / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\nextensions = ['runpython']\n"
    )
    (tmp_path / "index.rst").write_text(
        "Page\n====\n\n.. runpython::\n\n    import sys\n    sys.exit(3)\n"
    )
    cmd = [sys.executable, "-m", "sphinx", "-E", "-q", "-b", "html", str(tmp_path),
           str(tmp_path / "html")]  # fmt: skip
    subprocess.run(cmd, cwd=tmp_path, capture_output=True, timeout=BLOCK_TIMEOUT, check=True)
    # THEN the page says the example failed where its output would be
    page = (tmp_path / "html" / "index.html").read_text(encoding="utf-8")
    assert "this example failed when the page was built: exit code 3" in page
