"""``.. markdown-include:: PATH``: shows a Markdown file of the repository in a page.

Used for ``benchmarks/RESULTS.md`` (the figures are read at build time, never copied by
hand) and ``CHANGELOG.md``. It understands the Markdown those files use: headings
(shown as rubrics, so that they never clash with the page's own sections), paragraphs,
bullet and numbered lists, pipe tables, fenced code, block quotes, HTML comments (dropped)
and, inline, ``code``, **bold**, *emphasis* and [links](url). Anything else is shown as
plain text: an unknown construct can never break the build.

Options: ``:missing-ok:`` shows a note instead of a warning when the file does not exist;
``:skip-title:`` drops the file's first heading when it is a level-1 one (the page has
its own title).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*\d+[.)]\s+(.*)$")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_INLINE = re.compile(
    r"(?P<code>`+)(?P<code_text>.+?)(?P=code)"
    r"|\*\*(?P<strong>.+?)\*\*"
    r"|(?<![\w*])\*(?P<em>[^*\s][^*]*?)\*(?![\w*])"
    r"|\[(?P<link_text>[^\]]+)\]\((?P<link_url>[^)\s]+)\)"
)


def inline(text: str) -> list[nodes.Node]:
    """Converts inline Markdown into docutils nodes.

    :param text: one paragraph of Markdown
    :return: text, literal, strong, emphasis and reference nodes
    """
    result: list[nodes.Node] = []
    pos = 0
    for m in _INLINE.finditer(text):
        if m.start() > pos:
            result.append(nodes.Text(text[pos : m.start()]))
        if m.group("code_text") is not None:
            code = m.group("code_text").strip()
            result.append(nodes.literal(code, code))
        elif m.group("strong") is not None:
            result.append(nodes.strong(m.group("strong"), m.group("strong")))
        elif m.group("em") is not None:
            result.append(nodes.emphasis(m.group("em"), m.group("em")))
        else:
            label, url = m.group("link_text"), m.group("link_url")
            result.append(nodes.reference(label, label, refuri=url))
        pos = m.end()
    if pos < len(text):
        result.append(nodes.Text(text[pos:]))
    return result


def _split_row(line: str) -> list[str]:
    cells = line.strip()
    cells = cells.removeprefix("|").removesuffix("|")
    return [c.strip() for c in re.split(r"(?<!\\)\|", cells)]


def _table(header: list[str], rows: list[list[str]]) -> nodes.table:
    width = max([len(header), *map(len, rows)])
    table = nodes.table(classes=["markdown-table"])
    group = nodes.tgroup(cols=width)
    table += group
    for _ in range(width):
        group += nodes.colspec(colwidth=1)

    def row_node(cells: list[str]) -> nodes.row:
        row = nodes.row()
        for i in range(width):
            entry = nodes.entry()
            text = cells[i] if i < len(cells) else ""
            entry += nodes.paragraph(text, "", *inline(text))
            row += entry
        return row

    thead = nodes.thead()
    thead += row_node(header)
    tbody = nodes.tbody()
    for r in rows:
        tbody += row_node(r)
    group += thead
    group += tbody
    return table


class MarkdownConverter:
    """Turns Markdown lines into docutils body nodes, one block at a time."""

    def __init__(self, text: str) -> None:
        text = re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)
        self.lines = text.splitlines()
        self.i = 0
        self.blocks: list[tuple[Callable[[str], bool], Callable[[], nodes.Node]]] = [
            (lambda s: not s.strip(), self._blank),
            (lambda s: bool(_FENCE.match(s)), self._fence),
            (lambda s: bool(_HEADING.match(s)), self._heading),
            (self._starts_table, self._pipe_table),
            (lambda s: bool(_BULLET.match(s)), lambda: self._list(_BULLET, nodes.bullet_list)),
            (
                lambda s: bool(_NUMBERED.match(s)),
                lambda: self._list(_NUMBERED, nodes.enumerated_list),
            ),
            (lambda s: s.lstrip().startswith(">"), self._quote),
        ]

    def convert(self) -> list[nodes.Node]:
        """Converts the whole text.

        :return: the body nodes
        """
        result: list[nodes.Node] = []
        while self.i < len(self.lines):
            line = self.lines[self.i]
            parse = next((p for test, p in self.blocks if test(line)), self._paragraph)
            node = parse()
            if not isinstance(node, nodes.comment):
                result.append(node)
        return result

    def _blank(self) -> nodes.Node:
        self.i += 1
        return nodes.comment()

    def _fence(self) -> nodes.Node:
        m = _FENCE.match(self.lines[self.i])
        assert m is not None
        fence, language = m.group(1), m.group(2) or "text"
        self.i += 1
        body: list[str] = []
        while self.i < len(self.lines) and not self.lines[self.i].startswith(fence):
            body.append(self.lines[self.i])
            self.i += 1
        self.i += 1  # the closing fence
        code = "\n".join(body)
        return nodes.literal_block(code, code, language=language)

    def _heading(self) -> nodes.Node:
        m = _HEADING.match(self.lines[self.i])
        assert m is not None
        self.i += 1
        title = m.group(2)
        return nodes.rubric(title, "", *inline(title), classes=[f"h{len(m.group(1))}"])

    def _starts_table(self, line: str) -> bool:
        nxt = self.lines[self.i + 1] if self.i + 1 < len(self.lines) else ""
        return "|" in line and bool(_TABLE_SEPARATOR.match(nxt))

    def _pipe_table(self) -> nodes.Node:
        header = _split_row(self.lines[self.i])
        self.i += 2
        rows = []
        while self.i < len(self.lines) and "|" in self.lines[self.i]:
            rows.append(_split_row(self.lines[self.i]))
            self.i += 1
        return _table(header, rows)

    def _list(self, pattern: re.Pattern[str], kind: type[nodes.Element]) -> nodes.Node:
        items: list[list[str]] = []
        while self.i < len(self.lines):
            line = self.lines[self.i]
            m = pattern.match(line)
            if m:
                items.append([m.group(1)])
            elif line.strip() and line.startswith((" ", "\t")) and items:
                items[-1].append(line.strip())  # continuation of the item
            else:
                break
            self.i += 1
        node = kind()
        for item in items:
            text = " ".join(item)
            li = nodes.list_item()
            li += nodes.paragraph(text, "", *inline(text))
            node += li
        return node

    def _quote(self) -> nodes.Node:
        body: list[str] = []
        while self.i < len(self.lines) and self.lines[self.i].lstrip().startswith(">"):
            body.append(self.lines[self.i].lstrip()[1:].strip())
            self.i += 1
        quote = nodes.block_quote()
        quote.extend(MarkdownConverter("\n".join(body)).convert())
        return quote

    def _paragraph(self) -> nodes.Node:
        # Called on a line that starts no other block: it is the first of the paragraph.
        body = [self.lines[self.i].strip()]
        self.i += 1
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if any(test(line) for test, _ in self.blocks):
                break
            body.append(line.strip())
            self.i += 1
        text = " ".join(body)
        return nodes.paragraph(text, "", *inline(text))


def markdown_to_nodes(text: str) -> list[nodes.Node]:
    """Converts Markdown text into docutils body nodes.

    :param text: the Markdown text
    :return: the nodes
    """
    return MarkdownConverter(text).convert()


class MarkdownIncludeDirective(SphinxDirective):
    """Includes a Markdown file, converted at build time."""

    required_arguments = 1
    option_spec: ClassVar[dict[str, Any]] = {
        "missing-ok": directives.flag,
        "skip-title": directives.flag,
    }

    def run(self) -> list[nodes.Node]:
        """Reads and converts the file.

        :return: the nodes to insert
        """
        rel, path = self.env.relfn2path(self.arguments[0], self.env.docname)
        path = Path(path)
        if not path.exists():
            if "missing-ok" not in self.options:
                logger.warning(
                    "markdown-include: %s does not exist", rel, location=self.get_location()
                )
            note = nodes.note()
            note += nodes.paragraph("", f"{self.arguments[0]} is not available yet.")
            return [note]
        self.env.note_dependency(rel)
        result = markdown_to_nodes(path.read_text(encoding="utf-8"))
        if "skip-title" in self.options and result and "h1" in result[0].get("classes", []):
            result = result[1:]
        return result


def setup(app: Sphinx) -> dict[str, Any]:
    """Registers the directive.

    :param app: the Sphinx application
    :return: extension metadata
    """
    app.add_directive("markdown-include", MarkdownIncludeDirective)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
