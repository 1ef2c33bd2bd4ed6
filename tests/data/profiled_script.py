"""A small program profiled by make_profiles.py to produce the fixtures beside it."""

import time


def fct0(t: float) -> None:
    time.sleep(t)


def fct1(t: float) -> None:
    time.sleep(t)


def fct2() -> None:
    fct1(0.002)
    fct1(0.001)


def fct3() -> None:
    fct0(0.003)
    fct1(0.004)


def fct4() -> None:
    fct2()
    fct3()


def rec(n: int) -> int:
    return 0 if n == 0 else rec(n - 1)


if __name__ == "__main__":
    fct4()
    rec(5)
