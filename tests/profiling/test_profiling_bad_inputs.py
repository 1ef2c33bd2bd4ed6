"""Bad arguments of the profiling library, one table: each raises an error of the
family naming the parameter (a TypeError or ValueError too), never a raw
AttributeError from deep inside."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from helpers import DATA

from onnxrt_backend_dev.monitoring import profiling
from onnxrt_backend_dev.monitoring._errors import BadType, BadValue, MonitoringError

# Any: the table passes wrong types on purpose.
P: Any = profiling
PROF = os.path.join(DATA, "cprofile.prof")


def _root() -> Any:  # Any: the table calls bad arguments
    return profiling.profile2graph(PROF)[0]


CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    ("p2g clean_text", lambda: P.profile2graph(PROF, clean_text=5), BadType, "clean_text"),
    ("p2g verbose", lambda: P.profile2graph(PROF, verbose="no"), BadType, "verbose"),
    ("profile2df clean_text", lambda: P.profile2df(PROF, clean_text=5), BadType, "clean_text"),
    ("profile2df as_df", lambda: P.profile2df(PROF, as_df="no"), BadType, "as_df"),
    ("as_dict filter_node", lambda: _root().as_dict(filter_node=5), BadType, "filter_node"),
    ("to_text filter_node", lambda: _root().to_text(filter_node="x"), BadType, "filter_node"),
    ("to_json filter_node", lambda: _root().to_json(filter_node=5), BadType, "filter_node"),
    ("to_html title", lambda: P.to_html(PROF, title=None), BadType, "title"),
    ("to_html tree title", lambda: P.to_html(PROF, title=5, view="tree"), BadType, "title"),
    ("to_html filter_node", lambda: P.to_html(PROF, filter_node=5), BadType, "filter_node"),
    ("tree filter_node", lambda: P.to_tree_text(PROF, filter_node=5), BadType, "filter_node"),
    ("call_tree filter_node", lambda: P.call_tree(PROF, filter_node=5), BadType, "filter_node"),
    ("profile rootrem int", lambda: P.profile(lambda: 1, rootrem=5), BadType, "rootrem"),
    ("profile rootrem element", lambda: P.profile(lambda: 1, rootrem=[3]), BadType, "rootrem"),
    ("profile fct", lambda: P.profile(5), BadType, "fct"),
    ("profile as_df", lambda: P.profile(lambda: 1, as_df="no"), BadType, "as_df"),
    ("return_results", lambda: P.profile(lambda: 1, return_results=1), BadType, "return_results"),
    ("profile sort", lambda: P.profile(lambda: 1, sort=5), BadValue, "sort"),
    ("export fmt", lambda: P.export(PROF, fmt="nope"), BadValue, "fmt"),
    ("export prof", lambda: P.export(PROF, fmt="prof"), BadValue, "fmt"),
    # issue 30's battery: a unit that gives no count, a cleaner that returns no str
    ("collapsed unit inf", lambda: P.to_collapsed(PROF, unit=float("inf")), BadValue, "unit"),
    ("collapsed unit nan", lambda: P.to_collapsed(PROF, unit=float("nan")), BadValue, "unit"),
    ("collapsed unit 0", lambda: P.to_collapsed(PROF, unit=0), BadValue, "unit"),
    ("collapsed unit str", lambda: P.to_collapsed(PROF, unit="1e-6"), BadType, "unit"),
    ("p2g clean_text None", lambda: P.profile2graph(PROF, clean_text=lambda x: None), BadType,
     "clean_text"),
    ("p2g clean_text bytes", lambda: P.profile2graph(PROF, clean_text=str.encode), BadType,
     "clean_text"),
    ("profile2df clean_text None", lambda: P.profile2df(PROF, as_df=False,
     clean_text=lambda x: 0), BadType, "clean_text"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "error", "name"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_bad_argument_names_itself(
    call: Callable[[], Any], error: type[Exception], name: str
) -> None:
    # WHEN called with a bad argument THEN an error of the family naming it
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, MonitoringError)
    assert str(info.value).startswith(name + " "), str(info.value)


def test_the_model_imports_no_renderer_yet_keeps_its_methods() -> None:
    # GIVEN the model module's source THEN it imports nothing of the pipeline after it,
    # only the package's hook (which imports the reference's renderings on first use)
    import ast
    import inspect
    import subprocess
    import sys

    from onnxrt_backend_dev.monitoring._profiling import model

    imported = {
        (node.module, tuple(a.name for a in node.names))
        for node in ast.walk(ast.parse(inspect.getsource(model)))
        if isinstance(node, ast.ImportFrom)
    }
    assert {m for m, _ in imported} <= {
        "__future__",
        "collections.abc",
        "contextlib",
        "pstats",
        "typing",
        "_stacks.frames",
        None,
    }
    assert [names for m, names in imported if m is None] == [("reference_rendering",)]
    # and importing it (a fresh interpreter) imports no renderer, nor the reference
    code = (
        "import sys\n"
        "from onnxrt_backend_dev.monitoring._profiling import model\n"
        "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules\n"
        "             if m.startswith('onnxrt_backend_dev.monitoring._profiling.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "['model']"
    # and its reference methods render through the installed hook
    from onnxrt_backend_dev.monitoring._profiling import reference

    root = _root()
    text = reference.to_text(root, None, "line", 60, False, 30)  # the method's defaults
    assert "fct4" in root.to_text() and root.to_text() == text
