#!/usr/bin/env bash
# The HTTP API against its own OpenAPI description: schemathesis generates requests from
# /openapi.json and fails on any 5xx answer and on any answer its description does not allow.
# Usage: .ci/schemathesis.sh [PATH-TO-VERDICT-BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${CARGO_TARGET_DIR:-${HOME:-/root}/.cache/verdict-target}"
VERDICT="${1:-$TARGET/debug/verdict}"
[ -x "$VERDICT" ] || { echo "no verdict binary at $VERDICT (run cargo build first)" >&2; exit 1; }

# schemathesis, pinned, in a virtual environment outside the clone.
VENV="${HOME:-/root}/.cache/verdict-schemathesis-venv"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check 'schemathesis==4.32.5'

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# A fresh store with an operator and a policy, so the generated requests reach the engine.
export VERDICT_STORE="sqlite:$WORK/verdict.db"
TOKEN="$("$VERDICT" init --operator ops | grep '^vdt_')"
export VERDICT_TOKEN="$TOKEN"
"$VERDICT" policy set examples/merge-gate/policy.json >/dev/null
"$VERDICT" subject put examples/merge-gate/subject.json >/dev/null

# Port 0: the server picks a free port and prints it.
# Failed authentications are not limited here: schemathesis sends requests without a token and
# with malformed ones among the rest, and the limit would answer them all 429, leaving what
# lies behind them untested (the limit has tests of its own).
"$VERDICT" serve --listen 127.0.0.1:0 --auth-burst 1000000 --auth-per-minute 1000000 \
  --auth-server-burst 1000000 --auth-server-per-minute 1000000 2>"$WORK/serve.log" &
SERVER_PID=$!
BASE=""
for _ in $(seq 1 100); do
  BASE="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$WORK/serve.log" | head -n 1 || true)"
  [ -n "$BASE" ] && break
  sleep 0.1
done
[ -n "$BASE" ] || { echo "verdict serve did not start:" >&2; cat "$WORK/serve.log" >&2; exit 1; }

# A bounded run: a fixed seed and example count keep it to about a minute. Only the checks the
# API promises: never a server error, and every answer as its description says. One worker:
# with several, the interpreter's parser raced inside the generator and the run errored. Run
# from the scratch directory: schemathesis and hypothesis keep caches in the working directory,
# which must not be the clone.
ROOT="$(pwd)"
cd "$WORK"
status=0
"$VENV/bin/schemathesis" --config-file "$ROOT/.ci/schemathesis.toml" run "$BASE/openapi.json" \
  --header "Authorization: Bearer $TOKEN" \
  --checks not_a_server_error,response_schema_conformance,content_type_conformance,status_code_conformance \
  --phases examples,coverage,fuzzing \
  --max-examples 60 \
  --seed 1 \
  --workers 1 \
  --request-timeout 10 \
  --suppress-health-check all \
  --no-shrink || status=$?
if [ "$status" -ne 0 ]; then
  echo "the server's log, last lines:" >&2
  tail -n 40 "$WORK/serve.log" >&2
fi
exit "$status"
