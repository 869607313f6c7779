package proxy

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// A rewrite of any record of the facts corpus leaves x.req and the facts
// plugins read as the gateway reads the new body, and the body sent
// upstream is the new one.
func TestRewriteRefacts(t *testing.T) {
	rewrites := 0
	defer func() {
		if rewrites < len(factsCorpus) {
			t.Errorf("only %d rewrites over %d bodies", rewrites, len(factsCorpus))
		}
	}()
	texts := []string{"", "a much longer text than before, with \"quotes\" and a\nnewline", "é"}
	for _, tt := range factsCorpus {
		t.Run(tt.name, func(t *testing.T) {
			for record := 0; ; record++ {
				x := &exchange{ep: tt.ep}
				if err := x.parseBody([]byte(tt.body), tt.ep, &x.req); err != nil {
					t.Fatal(err)
				}
				wr := wasmhost.AcquireRequest()
				wr.SetFacts(pluginFacts(&x.req))
				wr.Endpoint, wr.Body = []byte(endpointNames[tt.ep]), []byte(tt.body)
				x.allowRewrites(wr)
				x.wr = wr
				text := texts[record%len(texts)]
				st := wr.SetMessageText(record, text)
				if st == -1 { // past the last record
					wasmhost.ReleaseRequest(wr)
					return
				}
				sent := string(x.upstreamBody([]byte(tt.body)))
				if st != 0 {
					if sent != tt.body || wr.BodyRewritten() {
						t.Fatalf("record %d: refused (%d) but the body changed: %s", record, st, sent)
					}
					wasmhost.ReleaseRequest(wr)
					continue
				}
				rewrites++
				if sent == tt.body && text != "" {
					t.Fatalf("record %d: the client's body is sent", record)
				}
				want, ok := gatewayFacts([]byte(sent), tt.ep)
				if !ok {
					t.Fatalf("record %d: the gateway refuses the rewritten body %s", record, sent)
				}
				if got := pluginFacts(&x.req); !sameFacts(got, want) {
					t.Fatalf("record %d: x.req %+v, want %+v", record, got, want)
				}
				got := wasmhost.RequestFacts{Model: wr.Model, Stream: wr.Stream, MaxTokens: wr.MaxTokens, Messages: wr.Messages,
					PromptChars: wr.PromptChars, PromptTokens: wr.PromptTokens, Bound: wr.Bound}
				if !sameFacts(got, want) {
					t.Fatalf("record %d: plugins read %+v, want %+v", record, got, want)
				}
				if text != "" && !strings.Contains(sent, strings.ReplaceAll(strings.ReplaceAll(text, `"`, `\"`), "\n", `\n`)) {
					t.Fatalf("record %d: %q not in %s", record, text, sent)
				}
				wasmhost.ReleaseRequest(wr)
			}
		})
	}
}
