#!/usr/bin/env bash
# Builds llama-cpp-python's wheel once per machine and keeps it in a wheel folder that pip and uv (hatch)
# are pointed at with --find-links, so every later environment installs it in seconds.
#
# llama-cpp-python has no wheel on the package index: it compiles llama.cpp from source (about 15-20
# minutes on 2 cores). Options that cut the build without changing what ext uses: no multimodal (llava/mtmd)
# library, no llama.cpp tests, examples, tools or server.
#
#   tools/build/llama_cpp_wheel.sh            build if missing; print the wheel folder
#   EXT_WHEELS=/path tools/build/llama_cpp_wheel.sh
set -euo pipefail
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
wheels="${EXT_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/ext-wheels}"
mkdir -p "$wheels"
if ls "$wheels"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
  echo "$wheels"
  exit 0
fi
log="$wheels/llama-cpp-python-$version.build.log"
echo "Building llama-cpp-python $version from source (first time on this machine: about 15-20 minutes on 2 cores)." >&2
echo "Build log: $log" >&2
export CMAKE_ARGS="${CMAKE_ARGS:-} -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Progress: the build prints a line per compiled file; show a count every 30 s instead of a silent wait.
( python3 -m pip wheel --no-deps --no-cache-dir -v "llama-cpp-python==$version" -w "$tmp" >"$log" 2>&1; echo $? >"$tmp/rc" ) &
builder=$!
start=$SECONDS
while kill -0 "$builder" 2>/dev/null; do
  sleep 30 &
  wait $! || true
  [ -f "$tmp/rc" ] && break
  # ninja prints "[N/M] command" per step.
  step=$(grep -o '^ *\[[0-9]*/[0-9]*\]' "$log" 2>/dev/null | tail -n 1 | tr -d ' []' || true)
  echo "  llama-cpp-python build: $((SECONDS - start)) s, step ${step:-(configuring)}" >&2
done
wait "$builder" || true
rc=$(cat "$tmp/rc" 2>/dev/null || echo 1)
if [ "$rc" != 0 ]; then
  tail -n 40 "$log" >&2
  echo "llama-cpp-python build failed (exit $rc); full log: $log" >&2
  exit 1
fi
mv "$tmp"/llama_cpp_python-*.whl "$wheels"/
echo "Built in $((SECONDS - start)) s." >&2
echo "$wheels"
