"""The C walk's interface (``walker.c``): see :mod:`.walk`."""

from collections.abc import Callable, Sequence
from typing import Any

from .._errors import WalkerFault

Fault = WalkerFault
VERSION: int

class Walker:
    counts: tuple[int, int, int, int]
    def __init__(
        self,
        source: Any,
        offsets: dict[str, int],
        minor: int,
        runtime: int,
        code_type: int,
        resolver: Callable[[int, bytes], tuple[int, int]],
        interner: Callable[[tuple[int, ...]], int],
        max_depth: int = 1024,
        pthread_tid: int = -1,
    ) -> None: ...
    def sample(
        self, stat: bool = True, status: bool = True
    ) -> tuple[float | None, float | None, list[tuple[Any, ...]] | None]: ...
    def set_interner(self, interner: Callable[[tuple[int, ...]], int]) -> None: ...
    def close(self) -> None: ...

def read(pid: int, address: int, size: int) -> bytes: ...
def read_many(pid: int, requests: Sequence[tuple[int, int]]) -> list[bytes | None]: ...
def line(table: bytes, first_line: int, offset: int, minor: int) -> int: ...
def set_timer_slack(ns: int) -> None: ...
def prctl(option: int, arg: int) -> int: ...
def _selftest_fault() -> None: ...
