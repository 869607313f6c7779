package accounting

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// A gateway with Redis loads the counters' library at start, so that the
// first requests do not each find it missing, and says nothing about it:
// a warning at every start would teach operators to ignore warnings.
func TestRedisLibraryLoadedAtStart(t *testing.T) {
	srv := redistest.Start(t)
	yaml := "version: 1\nupstreams: [{name: a, base_url: \"http://127.0.0.1:9/v1/\"}]\nroutes: [{models: [m], upstream: a}]\n" +
		"call_log: {enabled: false}\nstore: {kind: memory}\nredis: {addrs: [\"" + srv.Addr() + "\"]}\n"
	p, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a, err := New(p, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	if logs.Len() > 0 {
		t.Errorf("warnings at start:\n%s", logs.String())
	}
	rc, err := a.Redis.Raw()
	if err != nil {
		t.Fatal(err)
	}
	list, err := rc.Do(context.Background(), rc.B().FunctionList().Build()).ToAny()
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.ToLower(fmtAny(list)); !strings.Contains(s, "tollgate_meter_") {
		t.Errorf("FUNCTION LIST after start = %s, want the counters' library", s)
	}
}

func fmtAny(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				b.WriteString(k + " ")
				walk(e)
			}
		case string:
			b.WriteString(x + " ")
		}
	}
	walk(v)
	return b.String()
}
