#!/bin/sh
# A stand-in reviewer for the first gate: a `command` verifier reads the rendered request on
# standard input and prints one reply. A real one would be a coding agent or a model runner;
# this one only looks for the README line the objective asks for. It echoes the request's
# nonce, answers every criterion it is asked about, and cites the resource it read.
input=$(cat)
nonce=$(printf '%s' "$input" | grep -o 'Rules for this request (nonce [0-9a-f]*' | head -n 1 | sed 's/.* //')
if printf '%s' "$input" | grep -q 'Pass --shout to'; then
    docs='{"id": "docs", "status": "passed", "evidence_refs": ["readme"], "rationale": "README.md documents --shout"}'
else
    docs='{"id": "docs", "status": "failed", "evidence_refs": ["readme"], "rationale": "README.md does not mention --shout"}'
fi
printf '{"nonce": "%s", "criteria": [
 {"id": "shout-works", "status": "not_tested", "evidence_refs": [], "rationale": "left to the shout-works check"},
 %s], "findings": [], "dispositions": []}\n' "$nonce" "$docs"
