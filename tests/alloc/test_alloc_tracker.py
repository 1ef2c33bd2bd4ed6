"""The tracker's pure parts: a record's frames decoded as the stack reader takes them, the
check that tells a code object replaced since, the library that wanted the memory (one
frame out of a wrapper), and the figures sent over the spy's pipe and back."""

from __future__ import annotations

import marshal
from types import SimpleNamespace
from typing import Any

from onnxrt_backend_dev.monitoring._alloc.estimate import NO_STACK, Estimator
from onnxrt_backend_dev.monitoring._alloc.report import facts_from_doc, tracker_doc
from onnxrt_backend_dev.monitoring._alloc.ring import Header, Record
from onnxrt_backend_dev.monitoring._alloc.tracker import (
    AllocTracker,
    code_check,
    decode_frames,
)
from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame


def test_frames_decode_by_pointer_and_by_lasti() -> None:
    word = (code_check(10, 64) << 32) | 0x20
    pairs, checks = decode_frames((0x1000, word), by_pointer=True)
    assert pairs == [(0x1000, 0x1020)]  # the instruction pointer: the code + its offset
    assert checks == [code_check(10, 64)]
    # 3.10: a lasti, signed (-1 before the first instruction)
    pairs, _ = decode_frames((0x2000, 0xFFFFFFFF), by_pointer=False)
    assert pairs == [(0x2000, -1)]


def test_the_check_tells_first_line_and_size() -> None:
    assert code_check(10, 64) != code_check(11, 64)
    assert code_check(10, 64) != code_check(10, 66)
    assert 0 <= code_check(2**31 - 1, 2**40) < 2**32


def _record(caller: int, caller2: int) -> Record:
    return Record(0, 1, 0, 0x10, 100, 0, 0, 1, caller, 1, caller2, ())


def test_an_allocation_through_a_wrapper_names_the_library_one_frame_out() -> None:
    tracker = AllocTracker(1, "/x/_shim.so")
    spans = [
        (0x1000, 0x2000, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"),
        (0x3000, 0x4000, "/venv/site-packages/onnxruntime/capi/libonnxruntime.so"),
        (0x5000, 0x6000, "/venv/site-packages/numpy/_core/_multiarray_umath.so"),
    ]
    tracker._spans = spans  # the mappings, as if read
    tracker._starts = [s[0] for s in spans]
    pairs = ((0x1100, 0x3100), (0x5100, 0x3100), (0x1100, 0), (0x9000, 0))
    sites = [tracker._caller_site(_record(c, c2)) for c, c2 in pairs]
    assert sites == [0, 1, 2, 3] and tracker._caller_site(_record(0x1100, 0x3100)) == 0
    names = [tracker.libraries[lid] if lid >= 0 else "" for lid in tracker.site_libraries()]
    assert names[0].endswith("libonnxruntime.so")  # operator new called by ONNX Runtime
    assert names[1].endswith("_multiarray_umath.so")  # numpy calls malloc itself
    assert names[2].endswith("libstdc++.so.6")  # nothing further out: the wrapper
    assert names[3] == ""  # an address in no mapping


def test_sites_of_one_library_on_one_stack_add_up() -> None:
    from onnxrt_backend_dev.monitoring._alloc.estimate import SiteEstimate
    from onnxrt_backend_dev.monitoring._alloc.report import by_library

    def site(sid: int, call: int, peak: float) -> SiteEstimate:
        return SiteEstimate((sid, call), 1, peak, 1.0, peak, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0)

    merged = by_library([site(0, 0, 10.0), site(0, 1, 5.0), site(0, 2, 1.0)], [7, 7, 8])
    by_key = {s.key: s for s in merged}
    assert by_key[0, 7].live_peak == 15.0 and by_key[0, 7].samples == 2
    assert by_key[0, 8].live_peak == 1.0


def test_the_figures_cross_the_spys_pipe_and_come_back_cut_at_the_block() -> None:
    est = Estimator(1.0)
    est.alloc(0, 1.0, (0, 0), 1000, 0xA)  # the program's
    est.alloc(1, 1.0, (1, 0), 500, 0xB)  # the tool's own: cut away
    est.alloc(2, 1.0, (NO_STACK, 0), 300, 0xC)  # a native thread's: kept
    est.peak(3, 1.0, 1800)
    header = Header(1, 15, 1, 0, 4, 1800, 1800, 3, 1800, 0, 0, 0, 0, 3, 0, 0, 4096, "")
    tracker: Any = SimpleNamespace(header=header, estimator=est, libraries=[], why="",
                                   lost=lambda: 0, preloaded="",
                                   site_libraries=lambda: [])  # fmt: skip
    doc = tracker_doc(tracker, 0.5)
    assert doc is not None
    doc = marshal.loads(marshal.dumps(doc))  # plain values: they cross the pipe marshalled
    program = (SampledFrame("main", "/w/p.py", 1, 3),)
    facts = facts_from_doc(doc, [program, ()])
    assert facts is not None
    assert sorted(s.key[0] for s in facts.sites) == [NO_STACK, 0]
    assert facts.peak == 1800 and facts.peak_time == 0.5 and facts.count == 3
    assert facts_from_doc({"sites": "nope"}, []) is None
