#!/usr/bin/env bash
# make run: the mock model and the gateway on its embedded default policy
# (the four built-in plugins on three demo keys it makes and prints), or on
# $POLICY.
set -euo pipefail
cd "$(dirname "$0")/.."
MOCK_ADDR=${MOCK_ADDR:-127.0.0.1:9090}
LISTEN=${LISTEN:-127.0.0.1:8080}

bin/mockllm -listen "$MOCK_ADDR" -ttft 150ms -inter-token 40ms -tokens 24 2>/tmp/tollgate-mockllm.log &
mock=$!
trap 'kill $mock 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -fsS "http://$MOCK_ADDR/v1/models" >/dev/null 2>&1 && break
  kill -0 $mock 2>/dev/null || { echo "mock model failed to start:"; cat /tmp/tollgate-mockllm.log; exit 1; }
  sleep 0.1
done

# On the embedded default policy the gateway prints its demo keys and a
# curl line for each built-in plugin once it listens.
if [[ -n ${POLICY:-} ]]; then
	cat <<MSG
Tollgate on http://$LISTEN ($POLICY), mock model on http://$MOCK_ADDR.
Try a streaming chat completion (add the policy's API key if it has tenants):

  curl -N http://$LISTEN/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"Hello"}]}'

Ctrl-C stops both.
MSG
else
	echo "Mock model on http://$MOCK_ADDR. Ctrl-C stops both."
fi
args=(serve -listen "$LISTEN")
[[ -n ${POLICY:-} ]] && args+=(-policy "$POLICY")
TOLLGATE_MOCK_URL="http://$MOCK_ADDR/v1" bin/tollgate "${args[@]}"
