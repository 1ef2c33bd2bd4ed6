"""The sort keys of the reference view: the one table, read by the views, the CLI and
the magics. Light: the command line reads :data:`SORT_NAMES` to build its parser, so
pstats is imported only when a key is looked up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import add
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import ProfileNode, TimeElements

# The one table of sort keys: from callees (or top-level nodes) and their figures
# ``(nc1, nc2, tin, tall)``, the list of keys to sort them by (ascending).
_SortFunction = Callable[[Sequence["ProfileNode"], Sequence["TimeElements"]], list[Any]]


def _line_keys(nodes: Sequence[ProfileNode], els: Sequence[TimeElements]) -> list[Any]:
    return [(n.filename, n.line) for n in nodes]


def _line_rank_keys(nodes: Sequence[ProfileNode]) -> _SortFunction | None:
    """The keys of :func:`_line_keys` as one integer per node (file rank, then line),
    same order and ties: integers compare much faster than tuples, once per node.

    :param nodes: every node the keys will be asked for
    :return: the sort function, None if a line is not a non-negative int or the file
        names do not sort
    """
    lines = [n.line for n in nodes]
    if not set(map(type, lines)) <= {int} or min(lines, default=0) < 0:
        return None
    files = [n.filename for n in nodes]
    try:
        ordered = sorted(set(files))
    except TypeError:
        return None
    width = max(lines, default=0) + 1
    rank = {f: i * width for i, f in enumerate(ordered)}
    keys = dict(zip(nodes, map(add, map(rank.__getitem__, files), lines), strict=True))
    get = keys.__getitem__
    return lambda callees, els: list(map(get, callees))


# Keyed by the values of pstats.SortKey.LINE, CUMULATIVE and TIME.
_SORT_KEYS: dict[str, _SortFunction] = {
    "line": _line_keys,
    "cumulative": lambda nodes, els: [-e[3] for e in els],
    "time": lambda nodes, els: [-e[2] for e in els],
}
_SORT_ALIASES = {"cumtime": "cumulative", "tottime": "time"}


#: Every name a sort key may be given by (the CLI's ``--sort`` choices).
SORT_NAMES = (*_SORT_KEYS, *_SORT_ALIASES)


def sort_name(sort_key: Any) -> str:
    """The canonical name of a sort key (``line``, ``cumulative`` or ``time``).

    :param sort_key: see :func:`sort_function`
    :return: the name
    :raises NotImplementedError: for any other sort key
    """
    from pstats import SortKey

    name = sort_key.value if isinstance(sort_key, SortKey) else str(sort_key)
    name = _SORT_ALIASES.get(name, name)
    if name not in _SORT_KEYS:
        raise NotImplementedError(
            f"Unable to sort subcalls with this key {sort_key!r}, "
            f"sort_key must be one of {sorted(_SORT_KEYS)}."
        )
    return name


def sort_function(sort_key: Any) -> _SortFunction:
    """Returns the key function for a sort key.

    :param sort_key: :class:`pstats.SortKey` ``LINE``, ``CUMULATIVE`` or ``TIME`` (or
        their names, ``cumtime`` and ``tottime`` accepted)
    :return: a function from callees and their figures to the list of sort keys
    :raises NotImplementedError: for any other sort key
    """
    return _SORT_KEYS[sort_name(sort_key)]
