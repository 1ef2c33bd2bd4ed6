"""``.. cli-guide::``: the command-line user guide, generated from the parser.

It calls ``onnxrt_backend_dev.monitoring._cli.dispatch.build_parser()`` at build time and writes
one section per subcommand: its description, its usage line, every argument and option
with its help (defaults expanded) and the full ``--help`` text. The guide therefore
follows the code; it cannot go out of date.
"""

from __future__ import annotations

import argparse
import functools
import importlib
from collections.abc import Iterable
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_id

HELP_WIDTH = 88


def _fixed_width(parser: argparse.ArgumentParser) -> None:
    """Makes ``parser`` format its help at :data:`HELP_WIDTH` columns, whatever the terminal."""
    original = parser.formatter_class
    # argparse calls formatter_class(prog=...): bind the width, keep the class's behaviour.
    parser.formatter_class = functools.partial(original, width=HELP_WIDTH)  # type: ignore[assignment]


def subparsers_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Returns the sub-parsers of ``parser`` by command name, in declaration order.

    :param parser: the top-level parser
    :return: name -> sub-parser
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


# How argparse shows the values of an argument, by nargs (see HelpFormatter._format_args).
_NARGS_FORMATS: dict[object, str] = {
    None: "{m}",
    argparse.OPTIONAL: "[{m}]",
    argparse.ZERO_OR_MORE: "[{m} ...]",
    argparse.ONE_OR_MORE: "{m} [{m} ...]",
    argparse.REMAINDER: "...",
}


def _values(action: argparse.Action) -> str:
    """The values of an argument as ``--help`` shows them, e.g. ``N`` or ``{a,b}``."""
    if action.metavar is not None:
        metavar = action.metavar
    elif action.choices is not None:
        metavar = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        metavar = action.dest.upper() if action.option_strings else action.dest
    if isinstance(metavar, tuple):
        return " ".join(metavar)
    if isinstance(action.nargs, int):
        return " ".join([metavar] * action.nargs)
    return _NARGS_FORMATS.get(action.nargs, "{m}").format(m=metavar)


def invocation(action: argparse.Action) -> str:
    """How an argument is written on the command line, e.g. ``-n N, --number N``.

    :param action: the argparse action
    :return: the text
    """
    if not action.option_strings:
        return str(action.metavar or action.dest)
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    values = _values(action)
    return ", ".join(f"{opt} {values}" for opt in action.option_strings)


def expanded_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help of an action with ``%(default)s`` and friends expanded, as ``--help`` does.

    :param parser: the parser holding the action
    :param action: the action
    :return: the help text (empty if none)
    """
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    text = parser._get_formatter()._expand_help(action)
    if action.choices is not None and "%(choices)" not in action.help:
        text += f" (one of: {', '.join(map(str, action.choices))})"
    return text


def _para(text: str) -> nodes.paragraph:
    return nodes.paragraph(text, text)


def _literal(text: str) -> nodes.literal_block:
    block = nodes.literal_block(text, text, language="text")
    return block


def arguments_list(parser: argparse.ArgumentParser) -> nodes.definition_list:
    """A definition list of the arguments and options of ``parser`` (``--help`` excluded).

    :param parser: the parser
    :return: the docutils node
    """
    dl = nodes.definition_list()
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        term = invocation(action)
        item = nodes.definition_list_item()
        item += nodes.term("", "", nodes.literal(term, term))
        definition = nodes.definition()
        definition += _para(expanded_help(parser, action) or "(no help)")
        item += definition
        dl += item
    return dl


class CliGuideDirective(SphinxDirective):
    """Writes one section per subcommand, from the live parser."""

    has_content = False

    def _section(self, title: str, key: str) -> nodes.section:
        section_id = make_id(self.env, self.state.document, "cli", key)
        section = nodes.section(ids=[section_id], names=[nodes.fully_normalize_name(key)])
        section += nodes.title(title, "", nodes.literal(title, title))
        self.state.document.note_implicit_target(section, section)
        return section

    def _command_section(self, name: str, sub: argparse.ArgumentParser) -> nodes.section:
        _fixed_width(sub)
        section = self._section(name, name)
        if sub.description:
            section += _para(sub.description)
        section += _literal(sub.format_usage().strip())
        section += arguments_list(sub)
        section += nodes.rubric("Full help", "Full help")
        section += _literal(sub.format_help().rstrip())
        return section

    def run(self) -> list[nodes.Node]:
        """Builds the parser and turns it into sections.

        :return: the nodes to insert
        """
        cli = importlib.import_module("onnxrt_backend_dev.monitoring._cli.dispatch")
        parser, _ = cli.build_parser()
        _fixed_width(parser)
        result: list[nodes.Node] = [_literal(parser.format_help().rstrip())]
        result.extend(self._sections(subparsers_of(parser).items()))
        return result

    def _sections(
        self, items: Iterable[tuple[str, argparse.ArgumentParser]]
    ) -> list[nodes.section]:
        return [self._command_section(name, sub) for name, sub in items]


def setup(app: Sphinx) -> dict[str, Any]:
    """Registers the directive.

    :param app: the Sphinx application
    :return: extension metadata
    """
    app.add_directive("cli-guide", CliGuideDirective)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
