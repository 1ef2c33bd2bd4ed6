"""What the observer saw, as the models the views read: the sampled profile (stacks of
frames and, per thread, each stack's columns) and the report's inputs (memory ticks per
stack, sampled threads). What each column becomes: :func:`split`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._sampling.model import SampledProfile, Stack, ThreadProfile
from .._stacks.frames import SampledFrame
from .observer import CPU, NATIVE, PYTHON, QUEUED, SAMPLES, STICKS, UTICKS, WALL, ProcessRecord
from .observer import POOL as OBSERVED_POOL  # the model's POOL is another index
from .process import thread_name


def decode_stacks(record: ProcessRecord) -> list[Stack]:
    """Every stack of a process as frames, outermost first, in id order.

    :param record: the process
    :return: one tuple per stack id
    """
    infos = record.infos
    cache: dict[tuple[int, int], SampledFrame] = {}
    out: list[Stack] = []
    for key in record.key_list:
        frames = []
        for i in range(len(key) - 2, -1, -2):
            pair = (key[i], key[i + 1])
            frame = cache.get(pair)
            if frame is None:
                info = infos[pair[0]]
                frame = cache[pair] = SampledFrame(
                    info.name, info.file, info.first_line, info.line(pair[1])
                )
            frames.append(frame)
        out.append(tuple(frames))
    return out


def split(row: list[float]) -> list[float]:
    """A row's columns as the model keeps them: ``[wall, cpu, samples, python, native,
    system, queued]`` (seconds; system from the kernel's ticks, taken off Python and
    native in proportion; queued: runnable, waiting for a CPU), then, where the pool's
    CPU was credited to the row, no memory and that CPU (:data:`.model.POOL`).

    :param row: the observer's columns (a row saved without the pool's: none)
    :return: the model's
    """
    cpu = row[CPU]
    ticks = row[UTICKS] + row[STICKS]
    system_share = row[STICKS] / ticks if ticks > 0 else 0.0
    user = 1.0 - system_share
    out = [row[WALL], cpu, row[SAMPLES], row[PYTHON] * user, row[NATIVE] * user,
           cpu * system_share, min(row[QUEUED], max(row[WALL] - cpu, 0.0))]  # fmt: skip
    if len(row) > OBSERVED_POOL and row[OBSERVED_POOL]:
        out += [0.0, 0.0, 0.0, row[OBSERVED_POOL]]
    return out


def totals_of(
    rows: Mapping[Any, Sequence[float]], stacks: Sequence[Sequence[Any]]
) -> dict[int, list[float]]:
    """A thread's rows as the model's columns (:func:`split`) per stack id, the stacks
    without a frame (or unknown) left out.

    :param rows: stack id -> the observer's columns
    :param stacks: the frames of each stack id
    :return: stack id -> the model's columns
    """
    return {int(sid): split(list(map(float, row))) for sid, row in rows.items()
            if 0 <= int(sid) < len(stacks) and stacks[int(sid)]}  # fmt: skip


def thread_label(record: ProcessRecord, key: tuple[int, int], index: int) -> str:
    """A thread's name: ``MainThread``, its :mod:`threading` name, or its kernel id
    (``thread 4242``: started from C, or its name unreadable)."""
    th = record.threads[key]
    if th.is_main:
        return "MainThread"
    if th.name:
        return "".join(c if c.isprintable() else "?" for c in th.name)
    return f"{th.native_id}" if th.native_id else f"#{index}"


def to_profile(
    record: ProcessRecord,
    interval: float,
    duration: float,
    program: str,
    notes: list[str],
    cpu_time: float,
    samples: int,
    timer: str = "observer",
) -> SampledProfile:
    """The sampled profile of one process.

    :param record: the process
    :param interval: seconds between samples
    :param duration: wall seconds observed
    :param program: what ran, for the headers
    :param notes: what the reader must know
    :param cpu_time: CPU seconds of the process
    :param samples: samples taken
    :param timer: how samples were taken
    """
    stacks = decode_stacks(record)
    threads: list[ThreadProfile] = []
    for index, key in enumerate(record.order):
        th = record.threads[key]
        totals = totals_of(th.rows, stacks)
        if not totals:
            continue
        timeline = [
            entry
            for entry in zip(th.line.times, th.line.weights, th.line.stacks, strict=True)
            if stacks[entry[2]]
        ]
        name = thread_label(record, key, index)
        threads.append(ThreadProfile(th.ident, name, th.is_main, totals, timeline))
    threads.sort(key=lambda t: not t.is_main)
    return SampledProfile(
        stacks=stacks,
        threads=threads,
        interval=interval,
        timer=timer,
        duration=duration,
        cpu_time=cpu_time,
        samples=samples,
        notes=notes,
        program=program,
        skip_outer=0,
        cpu_known=True,
        split_known=True,
        native_threads=native_threads(record),
    )


def native_threads(record: ProcessRecord) -> list[tuple[str, int, float]]:
    """The threads Python does not know, grouped into pools by kernel name, digits left
    out (``onnxruntime-3`` and ``onnxruntime-7`` are the pool ``onnxruntime``):
    ``(name, count, CPU seconds)``; a thread keeping the process's name by the library on
    its stack (``onnxruntime (onnxruntime_pybind11_state)``, see :mod:`.pools`), else,
    as one whose name was not read, ``unnamed``.

    :param record: the process
    """
    groups: dict[str, list[float]] = {}
    own = record.comm or thread_name(record.pid, record.pid)
    for name, first_ns, last_ns, library, _ in record.others.values():
        pool = "".join(c for c in str(name) if not c.isdigit()).strip(" -_.:#/")
        label = library or ("unnamed" if str(name) == own or not pool else pool)
        entry = groups.setdefault(label, [0, 0.0])
        entry[0] += 1
        entry[1] += max(last_ns - first_ns, 0) / 1e9
    return [(n, int(c), s) for n, (c, s) in groups.items()]
