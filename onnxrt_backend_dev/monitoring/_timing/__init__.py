"""Timing: the measuring loop (:mod:`.loop`)."""
