#!/bin/sh
# The whole suite, as `make test` runs it, in two pytest processes side by side on the 2 cores.
# The second lane starts with the chaos tests (real processes; mostly waiting on heartbeat
# timeouts and paced answers, little CPU), then takes a few long tests off the first lane:
# the browser tests, the OpenAPI fuzzing, the benchmark comparison and the stop storm. Both
# lanes must pass.
set -u
PYTEST=${PYTEST:-.venv/bin/pytest}
SECOND_LANE="tests/chaos tests/browser tests/e2e/test_openapi_fuzz.py tests/e2e/test_bench_compare.py tests/e2e/test_stop_storm.py"
work=$(mktemp -d)
trap 'kill "$second" 2>/dev/null; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# shellcheck disable=SC2086 # the lane is a list of paths
# --durations: each lane ends with its slowest tests, to keep the whole run under 12 minutes.
"$PYTEST" -q --durations=12 --basetemp="$work/second" $SECOND_LANE >"$work/second.log" 2>&1 &
second=$!
ignored=""
for path in $SECOND_LANE; do ignored="$ignored --ignore=$path"; done
# shellcheck disable=SC2086
"$PYTEST" -q --durations=12 --basetemp="$work/first" $ignored "$@"
first=$?
wait "$second"
second_status=$?
echo "--- the second lane ($SECOND_LANE), run beside the rest:"
cat "$work/second.log"
[ "$first" -eq 0 ] && [ "$second_status" -eq 0 ]
