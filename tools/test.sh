#!/usr/bin/env bash
# Installs the project and its test tools into ./.venv (unless a virtual environment is
# already active), then runs the whole check: ruff format, ruff lint, mypy, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ -z "${VIRTUAL_ENV:-}" ]; then
    [ -x .venv/bin/python ] || "$PY" -m venv .venv
    PY=.venv/bin/python
fi
# The counter (--counter instructions) runs valgrind, and its client requests build against
# valgrind's headers at install: Debian's valgrind first, when it can be had (root with
# apt-get); its tests skip themselves otherwise.
if ! command -v valgrind >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; } \
        >/dev/null 2>&1 || echo "note: valgrind could not be installed; the counter's tests will skip"
fi
# This machine's pip configuration names local mirrors that may be absent: drop that noise.
"$PY" -m pip install --quiet --disable-pip-version-check -e ".[test]" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
# The HTML call tree is tested in a real headless browser: Debian's chromium, when it can
# be had (root with apt-get); the test skips itself otherwise.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
        >/dev/null 2>&1 || echo "note: chromium could not be installed; the browser test will skip"
fi
"$PY" -m ruff format --check .
"$PY" -m ruff check .
"$PY" -m mypy
"$PY" -m pytest -p no:cacheprovider "$@"
