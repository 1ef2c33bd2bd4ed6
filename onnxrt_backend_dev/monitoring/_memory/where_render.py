"""The views of a :class:`StackAttribution <.where.StackAttribution>`: the growth table
(text), the memory flame graphs (collapsed stacks, speedscope). Functions of the model,
each returning a string; the model imports none of them."""

from __future__ import annotations

import os

from .._format import format_bytes, one_line
from .._stacks.export import to_collapsed, to_speedscope
from .._validate import check_int, check_str
from .where import StackAttribution


def where_text(where: StackAttribution, top: int = 10) -> str:
    """The ``top`` functions by growth up to the peak as a table with units: growth up to
    the peak and net growth (both the function's own, summing to ``peak - begin`` and
    ``end - begin`` with the unattributed line), and the highest RSS reached while it ran.

    :param where: the attribution
    :param top: rows shown
    """
    top = check_int("top", top, minimum=1)
    head = f"{'to peak':>10} {'net':>10} {'highest':>10}  function"
    count = len(where.functions)
    shown = f"top {top} of {count}" if count > top else f"{count} function{'s' * (count != 1)}"
    lines = [f"memory growth by function ({shown})", head]
    for r in where.functions[:top]:
        name = f"{r.function} ({os.path.basename(r.filename)}:{r.first_line})"
        lines.append(_row(r.to_peak, r.net, format_bytes(r.highest), one_line(name)))
    if not where.functions:
        lines.append("(no stack sampled while memory grew)")
    lost_net, lost_peak = where.unattributed
    if lost_net or lost_peak:
        lines.append(_row(lost_peak, lost_net, "", "(no stack sampled)"))
    net, to_peak = where.totals()
    lines.append(_row(to_peak, net, "", "total: peak - begin, end - begin"))
    return "\n".join(lines)


def _row(to_peak: float, net: float, highest: str, label: str) -> str:
    return f"{format_bytes(to_peak):>10} {format_bytes(net):>10} {highest:>10}  {label}"


def where_collapsed(where: StackAttribution) -> str:
    """Collapsed stacks ``a;b;c BYTES``, one line per stack with growth up to the peak: a
    memory flame graph for flamegraph.pl, speedscope, inferno.

    :param where: the attribution
    """
    return to_collapsed(where.weighted_stacks())


def where_speedscope(where: StackAttribution, name: str = "memory growth") -> str:
    """A speedscope document (``sampled``, unit ``bytes``): one sample per stack with
    growth up to the peak, weighted by it.

    :param where: the attribution
    :param name: the profile's name
    """
    return str(to_speedscope(where.weighted_stacks(), check_str("name", name), "bytes"))
