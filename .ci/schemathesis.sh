#!/usr/bin/env bash
# Runs schemathesis (PyPI) against a freshly started lamina-node with Protocol/SERVER-API.yaml
# and Protocol/CLIENT-API.yaml: generated requests for every documented operation; fails on a
# server error (5xx) or a response outside the document. The Client API run carries a session
# made with curl (nonce, dev identity token, session). Needs the debug build (`swift build` / `swift test` ran).
# Usage: .ci/schemathesis.sh [max-examples]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
examples="${1:-${SCHEMATHESIS_EXAMPLES:-20}}"
python3 -c 'import schemathesis' 2>/dev/null || python3 -m pip install -q --disable-pip-version-check "schemathesis>=4,<5"
schemathesis() { python3 -c 'import sys; from schemathesis.cli import schemathesis; sys.argv[0] = "schemathesis"; sys.exit(schemathesis())' "$@"; }

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

export LAMINA_APP_ID="$(cat "$work/data/server-api/app-id")"
token="$(grep -v '^#' "$work/data/server-api/tokens" | head -1)"
cat >"$work/schemathesis.toml" <<TOML
[parameters]
"path.app_id" = "\${LAMINA_APP_ID}"
TOML
cd "$work"
# One worker: with several threads, hypothesis under CPython 3.11 sometimes fails inside
# `ast.parse` ("AST constructor recursion depth mismatch"), a tool error, not a finding.
schemathesis --config-file "$work/schemathesis.toml" run "$root/Protocol/SERVER-API.yaml" \
    --url "https://127.0.0.1:$port" --tls-verify "$work/data/tls/node-cert.pem" \
    -H "Authorization: Bearer $token" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --max-examples "$examples" --generation-deterministic --workers 1 --request-timeout 10 --no-color

# The Client API: a session for a user of the dev identity provider.
accept="Accept: application/vnd.layer+json; version=2.0"
curl_api() { curl -sS --cacert "$work/data/tls/node-cert.pem" -H "$accept" -H "Content-Type: application/json" "$@"; }
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
nonce="$(curl_api -X POST "https://127.0.0.1:$port/nonces" | json_field nonce)"
identity="$(curl_api -X POST --data-binary "{\"user_id\":\"schemathesis\",\"nonce\":\"$nonce\"}" "https://127.0.0.1:$port/dev/identity_tokens" | json_field identity_token)"
session="$(curl_api -X POST --data-binary "{\"identity_token\":\"$identity\",\"app_id\":\"$LAMINA_APP_ID\"}" "https://127.0.0.1:$port/sessions" | json_field session_token)"
# DELETE /sessions/{session_token} is left out: a generated request may not end the session the
# others use (it only ends the caller's own; ClientAPIRESTTests covers it).
schemathesis run "$root/Protocol/CLIENT-API.yaml" \
    --url "https://127.0.0.1:$port" --tls-verify "$work/data/tls/node-cert.pem" \
    -H "Authorization: Layer session-token=\"$session\"" \
    --exclude-path "/sessions/{session_token}" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --max-examples "$examples" --generation-deterministic --workers 1 --request-timeout 10 --no-color
