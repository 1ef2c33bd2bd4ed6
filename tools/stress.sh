#!/usr/bin/env bash
# The whole suite RUNS times in a row under load, as issue 16 asks: a frozen clone of HEAD
# in its own virtual environment, two busy loops beside it (the 2-core machine then runs
# at load 3-4), stopping at the first failing run. One line per run goes to stdout; each
# run's whole output is kept in LOG_DIR.
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
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
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
    .venv/bin/python -m pytest -p no:cacheprovider -q >"$logs/run$i.log" 2>&1 || rc=$?
    echo "run $i/$runs: rc $rc, $(($(date +%s) - start)) s, load $(cut -d' ' -f1-3 /proc/loadavg):" \
        "$(tail -n 1 "$logs/run$i.log")"
    [ "$rc" = 0 ] || exit 1
done
echo "stress: $runs of $runs passed"
