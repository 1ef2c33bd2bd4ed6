"""What the innermost frame is doing, from its instruction: running bytecode (Python) or
inside a call into C or an operator that may run C code for long (native): a numpy
``a @ b``, ``bytes * n``, ``json.loads``.

The instruction numbers differ between versions, and the interpreter rewrites
instructions into specialised forms as it runs: :data:`OPS_SCRIPT` prints, for the
interpreter that runs it, every number with its name and its family (the generic
instruction it specialises), and :func:`kinds` turns that into a table of 256 flags.
"""

from __future__ import annotations

from collections.abc import Mapping

# Families whose generic form calls a function: a leaf frame there runs C (a numpy
# method, ``sorted``, ``json.loads``): native at once.
CALL_FAMILIES = frozenset(
    {
        "CALL", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX", "CALL_METHOD",
        "CALL_KW", "PRECALL", "IMPORT_NAME", "SEND", "BEFORE_WITH", "WITH_EXCEPT_START",
    }
)  # fmt: skip
# Operators, attributes and the like: on built-in values (``i * i % 7``, ``sorted``'s
# comparisons) the interpreter's own work, a user's Python; on a numpy array (``a @ b``)
# a kernel. Native only while it lasts: the same instruction at two samples in a row.
# Iteration (GET_ITER, FOR_ITER) is not one: a leaf frame there steps a built-in
# iterator (a range, a list: 3.11 has no specialised form to tell them) in the
# interpreter's loop; a generator's step is its own frame.
OPERATOR_FAMILIES = frozenset(
    {
        "BINARY_OP", "BINARY_SUBSCR", "STORE_SUBSCR", "DELETE_SUBSCR", "COMPARE_OP",
        "CONTAINS_OP", "IMPORT_FROM", "FORMAT_VALUE", "BUILD_STRING", "LIST_EXTEND",
        "DICT_UPDATE", "DICT_MERGE", "UNPACK_SEQUENCE", "UNPACK_EX", "LOAD_ATTR",
        "STORE_ATTR", "UNARY_NEGATIVE", "UNARY_INVERT", "CONVERT_VALUE", "FORMAT_SIMPLE",
        "FORMAT_WITH_SPEC",
    }
)  # fmt: skip
# 3.10's operators had one instruction each.
CALL_PREFIXES = ("CALL",)
OPERATOR_PREFIXES = ("BINARY_", "INPLACE_")
# Specialised forms that stay in the interpreter (a Python call, an int add, a list
# index): the sample is Python's. (A 3.11 ``*_ADAPTIVE`` form is the generic one
# counting down to its specialisation: what the generic form is.)
PYTHON_SPECIALISED = ("_PY_", "CALL_BOUND_METHOD_EXACT_ARGS", "CALL_ALLOC_AND_ENTER_INIT",
                      "_INT", "_FLOAT", "_LIST", "_TUPLE", "_RANGE", "_GEN", "_SLOT",
                      "_INSTANCE_VALUE", "_MODULE", "_WITH_HINT", "_CLASS", "_PROPERTY",
                      "_METHOD_WITH_VALUES", "_METHOD_NO_DICT", "_METHOD_LAZY_DICT",
                      "_NONDESCRIPTOR", "_STR", "_UNICODE")  # fmt: skip
# What a leaf frame on an instruction does (the flags of :func:`kinds`).
PYTHON, NATIVE_CALL, OPERATOR = 0, 1, 2

OPS_SCRIPT = r"""
import dis, json
names = dict(getattr(dis, "_all_opmap", dis.opmap))
deopt = getattr(dis, "deoptmap", None)
if deopt is None:
    deopt = {}
    for family, members in getattr(dis, "_specializations", {}).items():
        for m in members:
            if m in names and family in names:
                deopt[names[m]] = names[family]
by_name = {}
for key, value in deopt.items():  # names (3.11-3.13) or numbers
    k = key if isinstance(key, str) else dis.opname[key]
    by_name[k] = value if isinstance(value, str) else dis.opname[value]
by_number = {}
for name, op in names.items():
    by_number[op] = [name, by_name.get(name, name).removeprefix("INSTRUMENTED_")]
print(json.dumps(by_number))
"""


def table_here() -> dict[int, tuple[str, str]]:
    """The opcode table of the interpreter running this code.

    :return: number -> ``(name, family)``
    """
    scope: dict[str, object] = {}
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(OPS_SCRIPT, scope)
    return parse_table(out.getvalue())


def parse_table(text: str) -> dict[int, tuple[str, str]]:
    """A table printed by :data:`OPS_SCRIPT` (untrusted: bad entries are skipped).

    :param text: its JSON
    :return: number -> ``(name, family)``
    """
    import json  # here: only a check that runs (not one kept from an earlier run) needs it

    try:
        raw = json.loads(text)
    except ValueError:
        return {}
    out: dict[int, tuple[str, str]] = {}
    if not isinstance(raw, dict):
        return out
    for key, value in raw.items():
        try:
            op = int(key)
        except ValueError:
            continue
        ok = isinstance(value, list) and len(value) == 2
        if ok and 0 <= op < 256 and all(isinstance(v, str) for v in value):
            out[op] = (value[0], value[1])
    return out


def kind_of(name: str, family: str) -> int:
    """What a leaf frame on this instruction runs: ``PYTHON`` (bytecode),
    ``NATIVE_CALL`` (a call into C) or ``OPERATOR`` (C code, native while it lasts).

    :param name: the instruction's name (maybe a specialised form)
    :param family: its generic form
    """
    name, family = name.removeprefix("INSTRUMENTED_"), family.removeprefix("INSTRUMENTED_")
    if family in CALL_FAMILIES or family.startswith(CALL_PREFIXES):
        found = NATIVE_CALL
    elif family in OPERATOR_FAMILIES or family.startswith(OPERATOR_PREFIXES):
        found = OPERATOR
    else:
        return PYTHON
    if name == family or name.endswith("_ADAPTIVE"):
        return found
    if found == NATIVE_CALL and "_BUILTIN" in name:  # a C function or type called
        return NATIVE_CALL
    return PYTHON if any(marker in name for marker in PYTHON_SPECIALISED) else found


def kinds(table: Mapping[int, tuple[str, str]]) -> bytes:
    """256 flags, one per instruction: what a leaf frame on it runs (:func:`kind_of`).

    :param table: from :func:`table_here` or :func:`parse_table`
    """
    flags = bytearray(256)
    for op, (name, family) in table.items():
        if 0 <= op < 256:
            flags[op] = kind_of(name, family)
    return bytes(flags)
