#!/usr/bin/env bash
# The README's test command: every test of every distribution (`hatch test`, then ext-semantic-kernel's in its own
# environment: semantic-kernel pins mcp<2, so it cannot join the one `hatch test` installs), with what the tests
# need first.
#
#   bash tools/test.sh [hatch test arguments]
#
# - hatch (installed with pip when missing; pipx or `uv tool install hatch` keep it apart from your Python);
# - redis-server, Node.js/npm, openssl, chromium and haproxy, which tests start or call as real peers: installed with
#   apt-get when this runs as root on Debian/Ubuntu; otherwise the tests that need them fail saying what to install;
# - the `autogen` hatch environment (AutoGen 0.7.5, a peer the AutoGen interop tests run as processes);
# - llama-cpp-python's wheel, built once per machine by tools/build/llama_cpp_wheel.sh (15-20 minutes on 2 cores the
#   first time, with progress; seconds afterwards) and handed to hatch's uv installer through UV_FIND_LINKS.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1

if command -v hatch >/dev/null 2>&1; then
  hatch=(hatch)
else
  python3 -m hatch --version >/dev/null 2>&1 || python3 -m pip install --quiet "hatch>=1.18,<2"
  hatch=(python3 -m hatch)
fi

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v npm >/dev/null || need+=(nodejs npm)
command -v openssl >/dev/null || need+=(openssl)
# ext-eval's HTML report is checked in headless Chromium.
command -v chromium >/dev/null || need+=(chromium)
# ext-hosting-mcp's load-balancer tests put two server processes behind HAProxy.
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
  else
    echo "Missing ${need[*]}: the tests that need them will fail. Install them (e.g. sudo apt-get install ${need[*]})." >&2
  fi
fi

wheels="$(bash tools/build/llama_cpp_wheel.sh)"
export UV_FIND_LINKS="$wheels" PIP_FIND_LINKS="$wheels"

# AutoGen 0.7.5's own worker runtime and host, a real peer for ext-runtime-grpc's tests-autogen (it pins grpcio and
# protobuf versions that cannot share an environment with ext's): its own environment, which the tests find.
"${hatch[@]}" env create autogen

"${hatch[@]}" test "$@"
# The distributions that cannot share hatch test's environment (tools/checks/_workspace.py SEPARATE_ENVIRONMENTS), each
# in its own.
"${hatch[@]}" run ext-semantic-kernel:test
