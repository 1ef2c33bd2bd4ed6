"""Allocation tracking: a small C shim (``shim.c``) samples the program's allocations by
bytes and counts its live bytes exactly; the observer reads its records from outside
(``ring``, ``tracker``); ``estimate`` turns the samples into unbiased estimates with
error bars (live at the peak, allocated, temporary, still live at the end); ``report``
keys them on the run's stack ids (``_report.allocations`` makes the views); ``block``
counts a block's allocations exactly in this process (the pytest gate).
"""
