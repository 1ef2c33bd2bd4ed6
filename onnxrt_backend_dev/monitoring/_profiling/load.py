"""Loading and validating profiles: the one door of ``.prof`` files and
:class:`pstats.Stats` objects into the profiling pipeline.

A profile file is untrusted (empty, truncated, a pickle, or a marshal dump whose figures
are strings or NaN): everything read is checked against the shape cProfile and
:mod:`profile` write, ``{(file, line, name): (cc, nc, tt, ct, {caller: (nc, cc, tt, ct)
or count})}`` (file and name may be code objects, which :mod:`profile` writes), else
:class:`ProfileFormatError` names the file and the first problem. pstats never reads a
file itself (it prints on some bad ones), it only holds a validated dictionary.
"""

from __future__ import annotations

import marshal
import math
import os
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from operator import itemgetter
from typing import Any

from .._errors import BadType, ProfileFormatError
from .._gc import gc_paused
from .._untrusted import check_stat

# A profile file larger than this is refused before it is read (the largest real
# profiles are a few hundred MB).
MAX_FILE_SIZE = 2**31


class ValidatedStats:
    """A validated stats dictionary, which :class:`pstats.Stats` takes as a profiler.

    :param stats: the validated dictionary
    :param source: where it comes from (a file name or ``ps``), for messages
    """

    def __init__(self, stats: dict[Any, Any], source: str) -> None:
        self.stats = stats
        self.source = source

    def create_stats(self) -> None:
        """Nothing to do: the dictionary is already there (pstats calls this)."""


def _short(value: Any) -> str:
    """``repr`` of a bad value, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: Any) -> str:
    return type(value).__name__


# pyinstrument writes -1 for the call counts it does not know; no count is lower.
MIN_COUNT = -1


def _check_int(value: Any, what: str) -> None:
    # bool is an int subclass but no call count.
    if type(value) is not int:
        raise ProfileFormatError(f"{what} must be an int, got {_type_name(value)} {_short(value)}")
    if value < MIN_COUNT:
        raise ProfileFormatError(f"{what} must be >= {MIN_COUNT}, got {value!r}")


def _check_time(value: Any, what: str) -> None:
    kind = type(value)
    if kind is float:
        if not math.isfinite(value):
            raise ProfileFormatError(f"{what} must be a finite number, got {value!r}")
    elif kind is not int:
        raise ProfileFormatError(
            f"{what} must be a number, got {_type_name(value)} {_short(value)}"
        )
    if value < 0:
        raise ProfileFormatError(f"{what} must be >= 0, got {value!r}")


# The profile module also stores code objects as names and files.
_NAME_TYPES = (str, types.CodeType)


def _check_func(func: Any, what: str) -> None:
    if (
        type(func) is not tuple
        or len(func) != 3
        or type(func[0]) not in _NAME_TYPES
        or type(func[1]) is not int
        or type(func[2]) not in _NAME_TYPES
    ):
        raise ProfileFormatError(
            f"{what} must be a (file: str, line: int, name: str) tuple, got {_short(func)}"
        )


def _check_figures(figures: Sequence[Any], what: str) -> None:
    _check_int(figures[0], f"the first call count of {what}")
    _check_int(figures[1], f"the second call count of {what}")
    _check_time(figures[2], f"the own time of {what}")
    _check_time(figures[3], f"the cumulative time of {what}")


def _check_callers(callers: Any, what: str) -> None:
    if type(callers) is not dict:
        raise ProfileFormatError(f"the callers of {what} must be a dict, got {_type_name(callers)}")
    for caller, edge in callers.items():
        _check_func(caller, f"a caller of {what}")
        if type(edge) is int:  # the profile module stores a call count only
            continue
        edge_what = f"the call {caller!r} -> {what}"
        if type(edge) is not tuple or len(edge) != 4:
            raise ProfileFormatError(
                f"{edge_what} must be a count or a (nc, cc, tt, ct) tuple, "
                f"got {_type_name(edge)} {_short(edge)}"
            )
        _check_figures(edge, edge_what)


_COUNT_TYPES = frozenset({int})
_TIME_TYPES = frozenset({int, float})
_NAME_TYPE_SET = frozenset(_NAME_TYPES)


def _types(values: Any) -> set[type]:
    return set(map(type, values))


def _valid_keys(keys: Sequence[Any]) -> bool:
    """Whether every key is a ``(file, line, name)`` tuple."""
    if _types(keys) != {tuple} or set(map(len, keys)) != {3}:
        return False
    files, lines, names = (list(map(itemgetter(i), keys)) for i in range(3))
    return (
        _types(files) <= _NAME_TYPE_SET
        and _types(lines) <= _COUNT_TYPES
        and _types(names) <= _NAME_TYPE_SET
    )


def _valid_figures(rows: Sequence[Any]) -> bool:
    """Whether the first four columns are two counts and two finite times."""
    # One column at a time (zip(*rows) unpacks every row as an argument: far slower).
    return valid_columns([list(map(itemgetter(i), rows)) for i in range(4)])


def valid_columns(columns: Sequence[Sequence[Any]]) -> bool:
    """Whether figure columns ``nc1, nc2, tin, tall`` hold counts of at least
    :data:`MIN_COUNT` and finite times of at least 0, checked in C loops.

    :param columns: the four columns
    :return: False where one value needs the check that names it
    """
    if not (_types(columns[0]) | _types(columns[1])) <= _COUNT_TYPES:
        return False
    if not (_types(columns[2]) | _types(columns[3])) <= _TIME_TYPES:
        return False
    if min(columns[0]) < MIN_COUNT or min(columns[1]) < MIN_COUNT:
        return False
    if min(columns[2]) < 0 or min(columns[3]) < 0:
        return False
    # NaN and infinities propagate through a sum (a huge sum overflowing to inf only
    # sends the data to the slow check, which accepts it).
    return math.isfinite(sum(columns[2]) + sum(columns[3]))


def _valid_edges(callers: Sequence[Any], known: Any) -> bool:
    if _types(callers) != {dict}:
        return False
    caller_keys = set(chain.from_iterable(callers))
    unknown = list(caller_keys - known)  # callers without an entry of their own
    if unknown and not _valid_keys(unknown):
        return False
    edges = list(chain.from_iterable(map(dict.values, callers)))
    kinds = _types(edges)
    if not kinds <= {tuple, int}:
        return False
    if int in kinds:  # the profile module's call counts
        edges = [e for e in edges if type(e) is tuple]
    return not edges or (set(map(len, edges)) == {4} and _valid_figures(edges))


def _all_valid(stats: dict[Any, Any]) -> bool:
    """The fast check of :func:`validate_stats`, column by column in C loops; False
    sends the data to the check that names the problem."""
    try:
        values = list(stats.values())
        if _types(values) != {tuple} or set(map(len, values)) != {5}:
            return False
        callers = [v[4] for v in values]
        return (
            _valid_keys(list(stats))
            and _valid_figures(values)
            and _valid_edges(callers, stats.keys())
        )
    except (TypeError, ValueError, OverflowError):
        return False


def validate_stats(stats: Any) -> dict[Any, Any]:
    """Checks that ``stats`` has the shape of pstats data.

    :param stats: the dictionary read from a profile
    :return: the same dictionary
    :raises ProfileFormatError: the first problem met (the caller adds the source)
    """
    if type(stats) is not dict:
        raise ProfileFormatError(
            f"not pstats data: a dict of functions was expected, got {_type_name(stats)}"
        )
    if not stats:
        raise ProfileFormatError("the profile holds no function")
    if _all_valid(stats):
        return stats
    # Something is wrong, or unusual (an overflowing sum): find it, one value at a time.
    for func, value in stats.items():
        _check_func(func, "a function key")
        what = repr(func)
        if type(value) is not tuple or len(value) != 5:
            raise ProfileFormatError(
                f"the entry of {what} must be a (cc, nc, tt, ct, callers) tuple, "
                f"got {_type_name(value)} of length "
                f"{len(value) if isinstance(value, (tuple, list)) else '-'}"
            )
        _check_figures(value, what)
        _check_callers(value[4], what)
    return stats


def read_profile_file(path: str | os.PathLike[str]) -> ValidatedStats:
    """Reads and validates one profile file (as written by ``dump_stats``).

    :param path: the file
    :return: the validated data
    :raises ProfileFormatError: the file is not a readable profile
    :raises OSError: the file cannot be opened
    """
    name = os.fspath(path)
    # A device or a FIFO is never opened: reading /dev/zero never ends, opening a FIFO
    # waits for a writer.
    check_stat(name, "profile", MAX_FILE_SIZE, ProfileFormatError)
    with open(name, "rb") as f:
        _check_ends(f, name)
        data = f.read(MAX_FILE_SIZE + 1)
    # Hundreds of thousands of tuples that all survive: no collection while they load.
    with gc_paused():
        try:
            with _address_space_capped(_CAP_BASE + _CAP_PER_BYTE * len(data)):
                stats = marshal.loads(data)
        except MemoryError:
            raise ProfileFormatError(
                f"cannot read profile {name!r}: it announces a container far larger than "
                f"its {len(data)} bytes could hold (corrupt or hostile)"
            ) from None
        except (EOFError, ValueError, TypeError) as e:
            raise ProfileFormatError(
                f"cannot read profile {name!r}: not a marshal dump of pstats data "
                f"(truncated or another format: {e})"
            ) from e
        return _validated(stats, name)


# While marshal reads a file, the address space may grow by this much (unmarshalling a
# pstats dump takes about 4.4 bytes per byte of file, measured on 9 MB).
_CAP_BASE = 256 * 2**20
_CAP_PER_BYTE = 16


def _virtual_size() -> int | None:
    """The process's address space in bytes (``/proc/self/statm``), None if unknown."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[0])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@contextmanager
def _address_space_capped(extra: int) -> Iterator[None]:
    """Caps the address space at its size plus ``extra`` where the system allows (a
    tighter limit is kept). marshal allocates the container the data announces before
    reading an item: 12 bytes announcing 2**31 items took 52 s and 16 GiB before failing;
    under the cap the allocation fails at once with MemoryError."""
    try:
        import resource
    except ImportError:  # Windows
        yield
        return
    size = _virtual_size()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = None if size is None else size + extra
    if cap is not None and hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if cap is None or (soft != resource.RLIM_INFINITY and soft <= cap):
        yield
        return
    try:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ValueError, OSError):  # not allowed here: read without the cap
        yield
        return
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# marshal's type codes (with or without FLAG_REF, 0x80) a pstats dump starts with (a
# dict) and ends with (the NULL closing it).
_DICT_CODES = frozenset({ord("{"), ord("{") | 0x80})
_NULL_CODE = b"0"


def _check_ends(f: Any, name: str) -> None:
    """Refuses a file whose first and last bytes cannot be those of a marshalled dict,
    before it is read whole (a sparse file of zeros) or given to :mod:`marshal`."""
    first = f.read(1)
    if first == b"\x80":  # pickle protocol 2+ header, marshal has no such type code
        raise ProfileFormatError(
            f"cannot read profile {name!r}: it is a pickle, not a profile written by "
            "cProfile or pstats (dump_stats)"
        )
    f.seek(-1, os.SEEK_END)
    last = f.read(1)
    f.seek(0)
    if first[0] not in _DICT_CODES or last != _NULL_CODE:
        raise ProfileFormatError(
            f"cannot read profile {name!r}: not a marshal dump of pstats data (it does "
            f"not start with a dictionary, first byte {first!r}, last {last!r})"
        )


def _validated(stats: Any, source: str) -> ValidatedStats:
    try:
        return ValidatedStats(validate_stats(stats), source)
    except ProfileFormatError as e:
        raise ProfileFormatError(f"cannot read profile {source!r}: {e}") from e


def load_profiles(ps: Any, name: str = "ps") -> list[ValidatedStats]:
    """Validates one or several profiles: paths are read, :class:`pstats.Stats` (or any
    object with a ``stats`` dictionary) checked.

    :param ps: a :class:`pstats.Stats`, a path to a profile file, or a non-empty list
        of them
    :param name: the parameter's name, for messages
    :return: one validated dictionary per profile
    """
    if isinstance(ps, ValidatedStats):
        return [ps]
    if isinstance(ps, (str, os.PathLike)):
        return [read_profile_file(ps)]
    stats = getattr(ps, "stats", None)
    if isinstance(stats, dict):
        files = getattr(ps, "files", None)
        source = ", ".join(map(str, files)) if isinstance(files, list) and files else name
        return [_validated(stats, source)]
    if isinstance(ps, Sequence) and not isinstance(ps, (str, bytes)) and ps:
        out: list[ValidatedStats] = []
        for i, p in enumerate(ps):
            out.extend(load_profiles(p, f"{name}[{i}]"))
        return out
    raise BadType(
        f"{name} must be a pstats.Stats, a path to a profile file or a non-empty list of "
        f"them, got {type(ps).__name__}"
    )


def load_stats_object(files: Sequence[str]) -> Any:
    """Reads profile files into one :class:`pstats.Stats` (merged), each validated
    first, pstats printing nothing.

    :param files: paths
    :return: the :class:`pstats.Stats`
    """
    import io
    from pstats import Stats

    loaded = [read_profile_file(f) for f in files]
    # pstats writes its complaints to its stream: a buffer, never stdout.
    stats = Stats(*loaded, stream=io.StringIO())  # type: ignore[arg-type]
    stats.files = [v.source for v in loaded]  # type: ignore[attr-defined]
    return stats
