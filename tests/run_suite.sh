#!/bin/sh
# The whole suite, as `make test` runs it: pytest-xdist workers take the specs one at a time
# from one queue, the longest first (tests/conftest.py, LONGEST_FIRST); the browser's specs
# share one worker. Most specs wait on Temporal, processes or paced answers part of the time,
# so more workers than cores keep both cores busy. PERDURE_TEST_WORKERS changes the count.
set -u
PYTEST=${PYTEST:-.venv/bin/pytest}
WORKERS=${PERDURE_TEST_WORKERS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
# --durations: the run ends with its slowest specs, to keep the whole run in view.
"$PYTEST" -q -n "$WORKERS" --dist loadgroup --durations=15 --basetemp="$work/run" "$@"
