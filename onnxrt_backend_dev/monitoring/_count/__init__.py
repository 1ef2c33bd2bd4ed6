"""Counting work instead of timing it: the instructions a statement or a program
executes, read by valgrind (``--counter instructions``).

On a shared machine a program's CPU time moves tens of percent from run to run; the
instructions it executes do not (the same total twice in a row with the hash seed
fixed): one counted run a side decides a comparison. A counter sees work, not waiting:
sleeps, I/O, lock waits and cache misses cost no instruction.
"""

COUNTERS = ("instructions",)
# Changes within this fraction of a count are no change: what another folder or another
# environment moves in a program's start, measured at 0.02 % at most (RESULTS.md).
RELATIVE_NOISE = 0.001
# A function's count moves more with changes elsewhere (the garbage collector runs in
# whichever function allocates when its threshold is crossed; the allocator's layout):
# unchanged functions moved by 0.13 % at most when another one changed (RESULTS.md).
FUNCTION_NOISE = 0.005
