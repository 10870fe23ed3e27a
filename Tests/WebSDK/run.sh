#!/usr/bin/env bash
# Runs Layer's Web SDK 3.x, unmodified, under Node against a fresh debug lamina-node
# (websdk_run.js: two users; authenticate, distinct conversation, send/receive, read receipt,
# typing, metadata, deletion, reconnect with Event.replay). Not part of CI: the SDK is fetched
# separately and never committed.
#
#   SDK_SRC=<a copy of layer-websdk>/src  LAYER_PATCH=<a copy of node-layer-patch>/index.js \
#   Tests/WebSDK/run.sh
#
# The SDK's Node dependencies come from Debian's packages, unpacked (not installed: Debian's
# node-* packages depend on Debian's nodejs): node-websocket, node-uuid, node-base64-js,
# node-backbone (its Events stand in for backbone-events-standalone), node-xmlhttprequest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
: "${SDK_SRC:?set SDK_SRC to the Web SDK's src directory}" "${LAYER_PATCH:?set LAYER_PATCH to layer-patch's index.js}"
work="$(mktemp -d)"
node_pid=""
cleanup() { [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

(cd "$work" && for p in node-websocket node-uuid node-base64-js node-backbone node-underscore node-xmlhttprequest \
    node-debug node-ms node-es5-ext node-typedarray-to-buffer node-is-typedarray libjs-typedarray-to-buffer \
    libjs-backbone libjs-underscore; do apt-get download "$p" >/dev/null; done && for f in *.deb; do dpkg -x "$f" root; done)
mkdir -p "$work/shims/backbone-events-standalone" "$work/shims/layer-patch"
echo "module.exports = require('backbone').Events;" > "$work/shims/backbone-events-standalone/backbone-events-standalone.js"
cp "$LAYER_PATCH" "$work/shims/layer-patch/index.js"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$root/.build/debug/lamina-node" --data-dir "$work/data" --listen "127.0.0.1:$port" --admin off >"$work/node.out" 2>"$work/node.err" &
node_pid=$!
for _ in $(seq 1 300); do grep -q "is serving" "$work/node.out" 2>/dev/null && break; sleep 0.1; done
export NODE_PATH="$work/shims:$work/root/usr/share/nodejs:$work/root/usr/lib/x86_64-linux-gnu/nodejs"
export NODE_EXTRA_CA_CERTS="$work/data/tls/node-cert.pem"
node "$root/Tests/WebSDK/websdk_run.js" "$SDK_SRC/layer.js" "https://127.0.0.1:$port" \
    "layer:///apps/staging/$(cat "$work/data/server-api/app-id")"
