#!/bin/sh
# Starts a small web service on a free loopback port, runs web.yaml against it while a
# stand-in agent works (--during), then stops the service. Extra arguments go to verdict check,
# e.g. ./run.sh --format junit
set -eu
here=$(cd "$(dirname "$0")" && pwd)
verdict=${VERDICT:-verdict}
work=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

mkdir -p "$work/site"
printf ok > "$work/site/healthz"
printf '{"status": "ok", "replicas": 2, "ready": 2, "components": [{"name": "db", "state": "up"}, {"name": "cache", "state": "up"}]}' \
    > "$work/site/status.json"
printf '{"listen": "127.0.0.1", "workers": 4}' > "$work/site/config.json"
: > "$work/access.log"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/site" > /dev/null 2>> "$work/access.log" &
pid=$!
# Wait until it listens: the safety hold samples from the first instant.
python3 - "$port" <<'PY'
import socket, sys, time
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.2).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit("the example service did not start")
PY

# The "agent": a change that keeps the service healthy and leaves its configuration alone.
"$verdict" check "$here/web.yaml" --var port="$port" --var workdir="$work" "$@" \
    --during -- sh -c "sleep 1; printf 'release 1.2' > '$work/site/NOTES.md'; sleep 1"
