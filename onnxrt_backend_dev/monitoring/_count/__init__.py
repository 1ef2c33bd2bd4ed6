"""Counting work instead of timing it: the number of instructions a statement or a
program executes, read by valgrind (``--counter instructions``).

On a shared machine a program's CPU time moves tens of percent from run to run; the
instructions it executes do not (the same total twice in a row with the hash seed fixed,
whatever else the machine does). One counted run a side decides a comparison.

* :mod:`.valgrind`: the tool, the interpreter's real binary, a counted run of a command
  (the whole run with cachegrind; per Python function with callgrind and the
  interpreter's perf trampolines, Python >= 3.12) under the command's supervisor;
* :mod:`.callgraph`: callgrind's output and the interpreter's perf map turned into each
  Python function's own and inclusive instructions and its callers (cProfile's shape);
* :mod:`.statement`: a statement's instructions per execution, from the difference of
  loops of different lengths (the interpreter's start-up cancels);
* :mod:`.inprocess`: a block counted inside a process that valgrind runs (the pytest
  plugin's ``--monitoring-counter``), through valgrind's client requests.

A counter sees work, not waiting: sleeps, I/O, lock waits and cache misses cost no
instruction.
"""

COUNTERS = ("instructions",)
# Changes within this fraction of a count are no change: what another folder or another
# environment moves in a program's start, measured at 0.02 % at most (RESULTS.md).
RELATIVE_NOISE = 0.001
# A function's count moves more with changes elsewhere (the garbage collector runs in
# whichever function allocates when its threshold is crossed; the allocator's layout):
# unchanged functions moved by 0.13 % at most when another one changed (RESULTS.md).
FUNCTION_NOISE = 0.005
