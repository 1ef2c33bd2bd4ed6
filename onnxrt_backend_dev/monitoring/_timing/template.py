"""timeit's template and the timing loop compiled from it (:func:`build_timer`): standard
library only and nothing else of the package but its errors, so that a counted
statement's interpreter (``_count.statement``) imports little beside what it counts.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

from .._errors import BadValue

Clock = Callable[[], float]
# Runs one batch: (iterator over the executions, clock) -> seconds measured.
Inner = Callable[[Any, Clock], float]

# The template of timeit, byte for byte: the statement is pasted in the loop, nothing
# else is timed; the trailing pass keeps a comment-only statement valid (and makes the
# loop cost exactly what timeit's costs).
_TEMPLATE = """
def inner(_it, _timer{init}):
    {setup}
    _t0 = _timer()
    for _i in _it:
        {stmt}
        pass
    _t1 = _timer()
    return _t1 - _t0
"""


def _parsed(src: str, filename: str) -> list[ast.stmt]:
    """The statements of ``src``, parsed alone so that an error points at the user's code
    and code that would escape the loop (a bare ``return``, ``break``) is refused."""
    try:
        compile(src, filename, "exec")
        return ast.parse(src, filename).body
    except (MemoryError, RecursionError):  # the parser's own limits, not the machine's
        what = "stmt" if filename == "<stmt>" else "setup"
        raise BadValue(
            f"{what} is too deeply nested to compile ({len(src):,} characters)"
        ) from None


def build_timer(
    stmt: str | Callable[[], Any],
    context: Mapping[str, Any] | None = None,
    setup: str | None = None,
) -> Inner:
    """Compiles the timing loop for ``stmt``, as :class:`timeit.Timer` does.

    The statement's syntax tree is spliced into timeit's template rather than its text
    re-indented: a multi-line statement runs exactly as written (a triple-quoted string
    keeps its lines, tabs stay tabs) and its errors give its own line numbers.

    :param stmt: a str, compiled into the loop with a copy of ``context`` as its
        globals (the caller's dictionary is left untouched), or a callable, called from
        the loop through a local name
    :param context: the globals of a str statement (and of ``setup``)
    :param setup: code run before each batch, outside the timed region; its names are
        local to the loop, as with ``timeit -s``
    :return: ``inner(iterator, clock) -> seconds`` running one batch
    :raises SyntaxError: ``stmt`` or ``setup`` is not valid Python
    """
    setup_body = _parsed(setup or "pass", "<setup>") or [ast.Pass()]
    namespace: dict[str, Any] = {}
    init = ""
    if isinstance(stmt, str):
        stmt_body = _parsed(stmt, "<stmt>")
    else:
        namespace["_stmt"] = stmt
        init = ", _stmt=_stmt"
        stmt_body = _parsed("_stmt()", "<stmt>")
    tree = ast.parse(_TEMPLATE.format(init=init, setup="pass", stmt="pass"))
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef)
    loop = function.body[2]
    assert isinstance(loop, ast.For)
    # The placeholders: the first statement of the function and of the loop (the loop's
    # trailing pass stays, as in timeit's, so a comment-only statement is valid).
    function.body[0:1] = setup_body
    loop.body[0:1] = stmt_body
    global_ns = dict(context) if context is not None else {}
    exec(compile(ast.fix_missing_locations(tree), "<measure_time>", "exec"), global_ns, namespace)
    inner: Inner = namespace["inner"]
    return inner
