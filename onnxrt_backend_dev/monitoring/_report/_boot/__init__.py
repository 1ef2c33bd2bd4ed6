"""The folder ``run`` puts first on the program's ``PYTHONPATH`` (see :mod:`..follow`):
it holds only ``sitecustomize``."""
