"""The one-page report: time, memory and GPU of a program joined on one time axis.

``recording`` takes ticks inside the program (stack, RSS, high-water mark: the one
in-process sampler's), ``stream`` carries them to the flight recorder in another process,
``.._sampling.aggregate`` folds them into per-stack figures as they come, ``build`` makes
the :class:`model.Report`, and the ``render_*`` modules write it as text, JSON or HTML.
"""
