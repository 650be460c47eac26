#!/bin/sh
# Your first gate, end to end; docs/guide.md explains each step. A change to a small repository
# is checked by checks.yaml and reviewed by reviewer.sh (a `command` verifier: no API key), the
# Gate decides rework, the change is reworked, and the Gate decides pass.
#
# Everything happens in a new temporary directory (or $WORK) with its own store (or
# $VERDICT_STORE); VERDICT names the binary (default: verdict on PATH). Exit status 1 from
# check, verify and gate run means "not a pass" and is expected in the first attempt; anything
# else stops the script.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
verdict=${VERDICT:-verdict}
work=${WORK:-$(mktemp -d)}
export VERDICT_STORE="${VERDICT_STORE:-sqlite:$work/verdict.db}"
unset VERDICT_TOKEN
cd "$work"
say() { printf '\n== %s\n' "$*"; }
expect_status() { # the outcome that applies to ex-1 now
    got=$("$verdict" status ex-1 --json --token "$ops" | sed -n 's/.*"outcome": "\([a-z_]*\)".*/\1/p' | head -n 1)
    [ "$got" = "$1" ] || { echo "expected $1, got ${got:-nothing}" >&2; exit 1; }
}

say "the repository: greet.sh and its test"
mkdir -p repo
cat > repo/greet.sh <<'SH'
#!/bin/sh
echo "hello, $1"
SH
cat > repo/test.sh <<'SH'
#!/bin/sh
out=$(sh greet.sh --shout ada)
[ "$out" = "HELLO, ADA" ] || { echo "expected HELLO, ADA, got: $out"; exit 1; }
SH
echo "greet.sh greets someone." > repo/README.md
cp "$here/checks.yaml" "$here/policy.json" "$here/objective.md" .
cat > verifiers.yaml <<YAML
version: 1
classes:
  reviewer:
    provider: {kind: command, argv: [sh, "$here/reviewer.sh"], model: first-gate-reviewer}
YAML

say "operator: the store, the principals, their grants and the policy"
ops=$("$verdict" init)
coder=$("$verdict" principal add coder --role producer --token "$ops")
ci=$("$verdict" principal add ci --role runner --token "$ops")
rev=$("$verdict" principal add rev --role verifier --token "$ops")
"$verdict" grant add g-coder --principal coder --execution ex-1 --access write --expires 2099-01-01T00:00:00Z --token "$ops"
"$verdict" grant add g-ci --principal ci --execution ex-1 --access write --expires 2099-01-01T00:00:00Z --token "$ops"
"$verdict" grant add g-rev --principal rev --execution ex-1 --access read --expires 2099-01-01T00:00:00Z --token "$ops"
"$verdict" policy set policy.json --token "$ops"

attempt() { # $1: attempt number
    say "producer: attempt $1 as a subject"
    "$verdict" subject new --execution ex-1 --generation $1 --producer coder --producer-run attempt-$1 \
        --objective objective.md --resource greet=repo/greet.sh --resource readme=repo/README.md \
        --check checks.yaml --var repo="$work/repo" \
        --criterion 'docs=README.md documents --shout' > subject.json
    "$verdict" subject put subject.json --token "$coder"

    say "runner: the checks, kept as evidence"
    "$verdict" check checks.yaml --var repo="$work/repo" --quiet \
        --subject subject.json --evidence-out evidence.json --principal ci || [ $? -eq 1 ]
    "$verdict" evidence add evidence.json --token "$ci"

    say "producer: a verification request"
    request=$("$verdict" request create ex-1 --token "$coder")

    say "verifier: the reviewer (preflight first: no call when the checks already decide)"
    "$verdict" verify "$request" --verifiers verifiers.yaml --objective objective.md \
        --resource greet=repo/greet.sh --resource readme=repo/README.md --token "$rev" || [ $? -eq 1 ]

    say "the Gate"
    "$verdict" gate run ex-1 --format text --token "$ops" || [ $? -eq 1 ]
}

# Attempt 1 adds the option but does not document it.
cat > repo/greet.sh <<'SH'
#!/bin/sh
if [ "$1" = --shout ]; then echo "hello, $2" | tr '[:lower:]' '[:upper:]'; else echo "hello, $1"; fi
SH
attempt 1
expect_status rework

# Attempt 2 documents it.
printf 'greet.sh greets someone. Pass --shout to greet in capitals.\n' > repo/README.md
attempt 2
expect_status pass

say "what applies now, and the whole history"
"$verdict" status ex-1 --token "$ops"
"$verdict" history ex-1 --token "$ops"
"$verdict" run list ex-1 --token "$ops"
"$verdict" audit verify
