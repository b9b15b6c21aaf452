#!/bin/sh
# The whole suite, as `make test` runs it, in two lanes side by side on the 2 cores.
# The second lane runs the chaos and browser tests one at a time: real processes that are
# killed and restarted on time bounds, which more contention would stretch past them. The
# first lane runs everything else in three pytest-xdist workers, so that one test's waits (a
# heartbeat timeout, a paced answer) overlap the others' work. Both lanes must pass.
set -u
# Every process of the suite keeps the bytecode it compiles (the project's modules, and the test
# modules as pytest rewrites them): under PYTHONDONTWRITEBYTECODE each would compile them again.
unset PYTHONDONTWRITEBYTECODE
PYTEST=${PYTEST:-.venv/bin/pytest}
SECOND_LANE="tests/chaos tests/browser"
work=$(mktemp -d)
trap 'kill "$second" 2>/dev/null; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# shellcheck disable=SC2086 # the lane is a list of paths
# --durations: each lane ends with its slowest tests, to keep the whole run short.
"$PYTEST" -q --durations=12 --basetemp="$work/second" $SECOND_LANE >"$work/second.log" 2>&1 &
second=$!
ignored=""
for path in $SECOND_LANE; do ignored="$ignored --ignore=$path"; done
# shellcheck disable=SC2086
"$PYTEST" -q -n 3 --dist worksteal --durations=12 --basetemp="$work/first" $ignored "$@"
first=$?
wait "$second"
second_status=$?
echo "--- the second lane ($SECOND_LANE), run beside the rest:"
cat "$work/second.log"
[ "$first" -eq 0 ] && [ "$second_status" -eq 0 ]
