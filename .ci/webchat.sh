#!/usr/bin/env bash
# Drives the node's web chat page (served in its zero-configuration dev mode at /) in headless
# Chromium through playwright (PyPI) pointed at Debian's chromium: two users chat, see read marks
# and typing, and one reloads and catches up (Tests/WebChat/webchat_test.py). Needs the debug
# build (`swift build` / `swift test` ran) and chromium (.ci/deps installs it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python3 -c 'import playwright' 2>/dev/null || python3 -m pip install -q --disable-pip-version-check "playwright>=1.40,<2"
chromium_bin="${CHROMIUM:-$(command -v chromium || command -v chromium-browser)}"

work="$(mktemp -d)"
node_pid=""
cleanup() { [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$root/.build/debug/lamina-node" --data-dir "$work/data" --listen "127.0.0.1:$port" --admin off >"$work/node.out" 2>"$work/node.err" &
node_pid=$!
for _ in $(seq 1 300); do
    grep -q "is serving" "$work/node.out" 2>/dev/null && break
    kill -0 "$node_pid" 2>/dev/null || { cat "$work/node.err" >&2; echo "lamina-node exited" >&2; exit 1; }
    sleep 0.1
done
grep -q "is serving" "$work/node.out" || { echo "lamina-node did not start" >&2; exit 1; }
if ! timeout 180 python3 "$root/Tests/WebChat/webchat_test.py" "https://127.0.0.1:$port" "$chromium_bin"; then
    echo "--- node stderr (last 40 lines)" >&2
    tail -n 40 "$work/node.err" >&2
    exit 1
fi
