"""Regenerates the profile fixtures of tests/data (run from anywhere).

``cprofile.prof`` (python -m cProfile -o), ``profile_module.prof`` (the pure Python
``profile`` module: callers hold call counts only), ``pyinstrument.prof`` (pyinstrument's
pstats renderer: ncalls = -1) and ``yappi.prof`` (yappi's pstat export, several entry
points).
"""

import os
import runpy
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "profiled_script.py")


def main() -> None:
    def run(*args: str) -> None:
        subprocess.run([sys.executable, *args], check=True, timeout=120, cwd=HERE)

    run("-m", "cProfile", "-o", "cprofile.prof", "profiled_script.py")
    run("-m", "profile", "-o", "profile_module.prof", "profiled_script.py")
    run("-m", "pyinstrument", "-r", "pstats", "-o", "pyinstrument.prof", "profiled_script.py")
    import yappi

    yappi.start()
    runpy.run_path(SCRIPT, run_name="__main__")
    yappi.stop()
    yappi.get_func_stats().save(os.path.join(HERE, "yappi.prof"), type="pstat")


if __name__ == "__main__":
    main()
