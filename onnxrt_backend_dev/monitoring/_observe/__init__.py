"""The observer: reads a Python program from outside (another process's memory, its
``/proc`` files), with no code of this tool in the program; see
:mod:`.observer` for the loop and ``docs/observer.rst``."""
