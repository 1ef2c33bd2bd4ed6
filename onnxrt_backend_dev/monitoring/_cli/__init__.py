"""The command line: :func:`main <.dispatch.main>` and one module per subcommand
(``cmd_<name>.py``); what they share sits in :mod:`.common`."""

from .dispatch import main

__all__ = ["main"]
