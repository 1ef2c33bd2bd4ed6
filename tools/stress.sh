#!/usr/bin/env bash
# The whole suite RUNS times in a row under load, as issue 16 asks: a frozen clone of HEAD
# in its own virtual environment (installed by tools/test.sh), two busy loops beside it
# (the 2-core machine then runs at load 3-4), stopping at the first failing run. One line
# per run goes to stdout; each run's whole output is kept in LOG_DIR.
#   usage: bash tools/stress.sh [RUNS=20] [LOG_DIR=<temp>/logs]
set -euo pipefail
runs=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/stress.XXXXXX)
logs=${2:-$work/logs}
mkdir -p "$logs"
git clone -q "$root" "$work/clone"
cd "$work/clone"
echo "stress: $runs runs of $(git rev-parse --short HEAD) in $work, logs in $logs"
busy=()
stop_busy() { [ ${#busy[@]} = 0 ] || kill "${busy[@]}" 2>/dev/null || true; }
trap stop_busy EXIT
trap 'exit 130' INT TERM HUP
for _ in 1 2; do
    (while :; do :; done) &
    busy+=($!)
done
for i in $(seq 1 "$runs"); do
    start=$(date +%s)
    rc=0
    # The first run is CI's own command (it installs the clone's .venv and chromium, then
    # runs ruff, mypy and pytest; never into a virtual environment the caller has active);
    # the others run pytest again in that environment.
    if [ "$i" = 1 ]; then
        env -u VIRTUAL_ENV bash tools/test.sh -q >"$logs/run$i.log" 2>&1 || rc=$?
    else
        .venv/bin/python -m pytest -p no:cacheprovider -q >"$logs/run$i.log" 2>&1 || rc=$?
    fi
    echo "run $i/$runs: rc $rc, $(($(date +%s) - start)) s, load $(cut -d' ' -f1-3 /proc/loadavg):" \
        "$(tail -n 1 "$logs/run$i.log")"
    [ "$rc" = 0 ] || exit 1
done
echo "stress: $runs of $runs passed"
