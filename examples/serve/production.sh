#!/usr/bin/env bash
# `parkway serve` as it is run in production, end to end (docs/guide/serve-in-production.md):
# tokens from a file, each with its scopes; a data directory; the readiness probe; a
# visit of the `chat` route and a fire of the `release` hook of examples/serve/targets.json;
# the person's asks answered through the inbox API, each as its answer_format calls for;
# the run's outcome taken with one long poll; a wrong token and a wrong scope refused;
# the metrics; a graceful stop; `parkway check` on the data directory and on a backup
# copy of it; and the copy served again, the runs still there.
#
# Usage: examples/serve/production.sh PARKWAY_BINARY
#
# Every wait is bounded. The first thing that is not as expected stops the script with a
# message, the server's log, and exit code 1. CI runs it (.ci/run).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 PARKWAY_BINARY" >&2
  exit 2
fi
parkway=$(realpath "$1")
cd "$(dirname "$0")/../.."
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 2; }
# The interpreter itself, not a version manager's shim: it is started for every check.
python=$(python3 -c 'import sys; print(sys.executable)') || { echo "python3 is needed" >&2; exit 2; }

work=$(mktemp -d)
server=
cleanup() {
  local status=$?
  if [ -n "$server" ]; then { kill -9 "$server" && wait "$server"; } 2>/dev/null || true; fi
  if [ "$status" != 0 ] && [ -e "$work/serve.log" ]; then
    echo "--- the server's log (last 40 lines)" >&2
    tail -40 "$work/serve.log" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "production.sh: FAIL: $*" >&2
  exit 1
}
say() { echo "production.sh: $*"; }

# --- JSON and HTTP helpers ------------------------------------------------------------

# `json BODY EXPR`: prints EXPR, a Python expression over the parsed BODY `d` (a string
# as it is, anything else as JSON).
json() {
  "$python" -c '
import json, sys
d = json.loads(sys.argv[1])
v = eval(sys.argv[2])
print(v if isinstance(v, str) else json.dumps(v))' "$1" "$2" ||
    fail "cannot read $2 from: $1"
}
# `expect BODY EXPR WHAT`: EXPR holds of BODY, else fails naming WHAT.
expect() {
  [ "$(json "$1" "bool($2)")" = true ] || fail "$3: expected $2, got: $1"
}
# `call METHOD PATH TOKEN [BODY]`: one request (TOKEN `-`: none); sets `status` and `body`.
call() {
  local args=(-sS -o "$work/answer" -w '%{http_code}' --max-time 30 -X "$1")
  [ "$3" = - ] || args+=(-H "Authorization: Bearer $3")
  [ $# -lt 4 ] || args+=(-H 'content-type: application/json' --data-binary "$4")
  status=$(curl "${args[@]}" "$url$2") || fail "$1 $2: no answer from the server"
  body=$(cat "$work/answer")
}
# `expect_status CODE WHAT`: the last call answered CODE.
expect_status() {
  [ "$status" = "$1" ] || fail "$2: expected HTTP $1, got $status: $body"
}

# `start DIR`: starts `parkway serve` on DIR and waits (at most 20 s in all) for its
# address and for /readyz; sets `server` and `url`.
start() {
  : >"$work/serve.log"
  "$parkway" serve --data "$1" --listen 127.0.0.1:0 --tokens "$work/tokens" \
    --targets examples/serve/targets.json 2>>"$work/serve.log" &
  server=$!
  local deadline=$((SECONDS + 20)) line
  url=
  while [ $SECONDS -lt $deadline ]; do
    kill -0 "$server" 2>/dev/null || fail "parkway serve ended at start"
    if [ -z "$url" ]; then
      line=$(grep -m1 -F 'parkway serve: listening on ' "$work/serve.log" || true)
      url=${line#parkway serve: listening on }
    fi
    if [ -n "$url" ] &&
      [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/readyz" || true)" = 200 ]; then
      return 0
    fi
    sleep 0.1
  done
  fail "parkway serve was not ready within 20 s"
}

# `stop`: SIGTERM, then waits (at most 20 s) for a clean exit.
stop() {
  kill -TERM "$server"
  local deadline=$((SECONDS + 20))
  while kill -0 "$server" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "parkway serve did not stop within 20 s of SIGTERM"
    sleep 0.1
  done
  wait "$server" || fail "parkway serve exited with status $? after SIGTERM"
  server=
}

# `next_ask SUBJECT`: waits (at most 20 s) for a user ask of SUBJECT in the inbox and
# prints it.
next_ask() {
  local deadline=$((SECONDS + 20)) item
  while [ $SECONDS -lt $deadline ]; do
    call GET "/v1/interactions?page_size=200" "$inbox"
    expect_status 200 "the inbox"
    item=$(json "$body" "next((i for i in d['items'] if i['subject'] == '$1'), '')")
    if [ -n "$item" ]; then
      echo "$item"
      return 0
    fi
    sleep 0.1
  done
  fail "no ask of $1 reached the inbox within 20 s"
}

# `answer_for ITEM`: the answer its answer_format calls for: `true` to a confirm, the
# first option of a select, an object with every required property of a form's schema,
# and text otherwise.
answer_for() {
  "$python" -c '
import json, sys
item = json.loads(sys.argv[1])
fmt = item["answer_format"]
if fmt == "confirm":
    answer = True
elif fmt == "select":
    answer = item["options"][0]
elif fmt == "form":
    schema = item["schema"]
    fill = {"string": "ship it", "boolean": True, "integer": 1, "number": 1}
    answer = {name: fill[schema["properties"][name]["type"]] for name in schema.get("required", [])}
else:
    answer = "ok"
print(json.dumps({"answer": answer}))' "$1" || fail "cannot answer $1"
}

# --- the server -----------------------------------------------------------------------

# Three tokens, each with only the scopes its holder needs, in a file only its owner reads.
app=app-token-$("$python" -c 'import secrets; print(secrets.token_hex(16))')
inbox=inbox-token-$("$python" -c 'import secrets; print(secrets.token_hex(16))')
ops=ops-token-$("$python" -c 'import secrets; print(secrets.token_hex(16))')
(
  umask 077
  printf '# token scopes\n%s visit\n%s answer\n%s admin\n' "$app" "$inbox" "$ops" >"$work/tokens"
)
data=$work/data
start "$data"
say "serving $data at $url"

call GET /healthz -
expect_status 200 "GET /healthz"

# A wrong token is 401; a token without the route's scope is 403, naming the scope.
call GET /v1/interactions wrong-token-0123456789abcdef
expect_status 401 "a wrong token"
call GET /v1/interactions "$app"
expect_status 403 "the visit token at the inbox"
expect "$body" "d['error']['scope'] == 'answer'" "the 403 names the scope"

# --- the chat route: a run that asks its caller -------------------------------------------

call POST "/v1/routes/chat/visit?subject=svc-api" "$app" '{"service": "api", "version": "1.4.0"}'
expect_status 200 "the chat visit"
expect "$body" "d['action'] == 'started' and d['record']['status'] == 'parked'" "the chat visit"
expect "$body" "d['record']['asks'][0]['question'] == 'deploy api 1.4.0?'" "the caller's question"
deploy_run=$(json "$body" "d['run_id']")
# The caller's reply, through the same route (its resume_expr resumes the oldest entry).
call POST "/v1/routes/chat/visit?subject=svc-api" "$app" '{"reply": true}'
expect_status 200 "the chat reply"
expect "$body" "d['action'] == 'resolved' and d['results'][0]['op'] == 'resumed'" "the chat reply"
expect "$body" "d['results'][0]['outcome']['status'] == 'succeeded'" "the deploy run"
expect "$body" "d['results'][0]['outcome']['result'] == {'deployed': {'service': 'api', 'version': '1.4.0'}, 'answer': True}" "the deploy result"
say "chat: deploy run $deploy_run asked its caller and succeeded"

# --- the release hook: a run that asks a person, three times --------------------------

call POST /v1/hooks/release "$app" '{"version": "1.4.0"}'
expect_status 202 "the release hook"
expect "$body" "d['hooks'][0]['subject'] == 'release-1.4.0' and d['hooks'][0]['fired']" "the release hook"
review_run=$(json "$body" "d['hooks'][0]['visit']['run_id']")

# Answer each ask as it reaches the inbox, then take the outcome under its id with one
# long poll: 200 is the run's outcome; 409 `already_resolved` (`how`: `resumed`) means the run went on and asked again.
asks=0
while :; do
  item=$(next_ask release-1.4.0)
  id=$(json "$item" "d['id']")
  asks=$((asks + 1))
  [ $asks -le 3 ] || fail "the review run asked more than three times: $item"
  call POST "/v1/interactions/$id/answer" "$inbox" "$(answer_for "$item")"
  expect_status 200 "the answer to $item"
  expect "$body" "d['status'] == 'answered'" "the answer to $id"
  call POST "/v1/subjects/release-1.4.0/parked/$id/take?wait=10s" "$app"
  if [ "$status" = 200 ]; then break; fi
  expect_status 409 "the take after the answer to $id"
  expect "$body" "d['error']['kind'] == 'already_resolved' and d['error']['how'] == 'resumed'" "the take after the answer to $id"
done
[ $asks = 3 ] || fail "the review run finished after $asks asks, not 3"
expect "$body" "d['status'] == 'finished'" "the review outcome"
expect "$body" "d['result'] == {'approved': True, 'channel': 'stable', 'notes': {'title': 'ship it'}}" "the review result"
say "release hook: review run $review_run took 3 answers from the inbox; outcome taken"

# Nothing is left open.
call GET /v1/interactions "$inbox"
expect_status 200 "the inbox"
expect "$body" "d['total'] == 0" "the inbox, emptied"
call GET /v1/subjects/release-1.4.0/parked "$app"
expect_status 200 "the parked set"
expect "$body" "d == []" "the parked set, emptied"

# --- operations -----------------------------------------------------------------------

call GET /metrics "$ops"
expect_status 200 "GET /metrics"
grep -qx 'parkway_healthy 1' <<<"$body" || fail "/metrics does not say parkway_healthy 1"
grep -qx 'parkway_visits_total{door="releases",result="started"} 1' <<<"$body" ||
  fail "/metrics does not count the release hook's visit"

# A running server's directory is held: the check refuses it (exit 2) and changes nothing.
set +e
"$parkway" check --data "$data" >"$work/check.out" 2>&1
code=$?
set -e
[ $code = 2 ] || fail "parkway check on a served directory: expected exit 2, got $code: $(cat "$work/check.out")"

stop
say "stopped on SIGTERM"
grep -q 'parkway serve: stopped' "$work/serve.log" || fail "the server's log does not say it stopped"

"$parkway" check --data "$data" >"$work/check.out" 2>&1 ||
  fail "parkway check on the data directory: exit $?: $(cat "$work/check.out")"
tail -1 "$work/check.out" | grep -q 'no damage found' || fail "parkway check said: $(cat "$work/check.out")"

# --- a backup, checked and served -----------------------------------------------------

cp -a "$data" "$work/backup"
"$parkway" check --data "$work/backup" >"$work/check.out" 2>&1 ||
  fail "parkway check on the backup: exit $?: $(cat "$work/check.out")"
say "data directory and backup check clean"

start "$work/backup"
call GET "/v1/runs/$review_run" "$app"
expect_status 200 "the review run's record on the restored copy"
expect "$body" "d['status'] == 'succeeded' and d['result']['channel'] == 'stable'" "the restored review record"
call GET "/v1/runs/$deploy_run" "$app"
expect_status 200 "the deploy run's record on the restored copy"
expect "$body" "d['status'] == 'succeeded'" "the restored deploy record"
stop
say "the restored copy serves both runs' records"
say "ok"
