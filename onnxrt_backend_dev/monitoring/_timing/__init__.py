"""Timing: the measuring loop (:mod:`.loop`) and the statistics of its results (:mod:`.stats`)."""
