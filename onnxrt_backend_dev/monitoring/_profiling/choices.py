"""The choices the ``profile`` command and the magics offer before anything is profiled:
the views, the tree's fold share, the checks of the filters' values. Light on purpose
(no pstats, no model, no renderer): building the ``profile`` parser imports this.
"""

from __future__ import annotations

from .._errors import BadValue

#: The views of the call graph that ``text`` and ``html`` render: the call tree rooted
#: at the program (``tree``) or the reference's forest (``reference``).
VIEWS = ("tree", "reference")


def check_view(view: str) -> str:
    """Validates a view name.

    :param view: ``tree`` or ``reference``
    :return: the name
    :raises ValueError: any other value
    """
    if view not in VIEWS:
        raise BadValue(f"view must be one of {list(VIEWS)}, got {view!r}")
    return view


def check_filters(min_share: float, max_depth: int | None, focus: str | None) -> None:
    """Validates the values of the filters (see :class:`.filters.ViewOptions`).

    :param min_share: hide rows below this share of the total time (0 to 1)
    :param max_depth: hide rows deeper than this, None for no limit
    :param focus: start only from the functions whose name contains this text, or None
    """
    if not 0.0 <= min_share <= 1.0:
        raise BadValue(f"min_share must be in [0, 1], got {min_share!r}")
    if max_depth is not None and max_depth < 0:
        raise BadValue(f"max_depth must be >= 0 or None, got {max_depth!r}")
    if focus is not None and not focus:
        raise BadValue(f"focus must be a non-empty string or None, got {focus!r}")
