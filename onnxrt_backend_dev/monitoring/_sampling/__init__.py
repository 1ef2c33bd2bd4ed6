"""A sampling profiler of true stacks, in process: :mod:`.frames` (the one frame walk),
:mod:`.recorder` and :mod:`.timer` (taking samples), :mod:`.model` (the data),
:mod:`.view` (folded trees, hot lines, timeline), ``render_*`` and :mod:`.result`,
:mod:`.session` (``sampling()``, ``sample()``)."""
