package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// TestAdminMemoryStore: with the memory store the admin API reads the
// policy's tenants, refuses writes with 501 read_only_store, lists the
// request in flight with its model and stream flag, and cancels it.
func TestAdminMemoryStore(t *testing.T) {
	t.Parallel()
	_, mockURL := startMock(t, mockllm.Config{Tokens: 500, InterToken: 20 * time.Millisecond})
	extra := `
store:
  kind: memory
tenants:
  plans:
    - {id: pro, rpm: 1000}
  tenants:
    - {id: acme, plan: pro}
`
	srv, gw := startGateway(t, policy(mockURL, extra), map[string]string{"TOLLGATE_ADMIN_TOKEN": "adm"})
	adm := httptest.NewServer(srv.AdminHandler())
	defer adm.Close()
	call := func(method, path string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, adm.URL+path, nil)
		req.Header.Set("Authorization", "Bearer adm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp.StatusCode, m
	}
	if status, m := call("GET", "/v1/admin/tenants"); status != 200 || len(m["data"].([]any)) != 1 {
		t.Fatalf("tenants: %d %v", status, m)
	}
	if status, m := call("POST", "/v1/admin/plans"); status != 501 || !strings.Contains(toJSON(m), "read_only_store") {
		t.Errorf("a write: %d %v", status, m)
	}
	if _, m := call("GET", "/v1/admin/policy"); m["store"] != "memory" || m["generation"] != 1.0 {
		t.Errorf("policy %v", m)
	}

	done := make(chan string, 1)
	go func() {
		resp, err := http.Post(gw+"/v1/chat/completions", "application/json", strings.NewReader(chatStream))
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	var id string
	for end := time.Now().Add(10 * time.Second); id == "" && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		_, m := call("GET", "/v1/admin/requests")
		for _, r := range m["data"].([]any) {
			r := r.(map[string]any)
			if r["model"] == "mock-1" && r["stream"] == true && r["replica"] != "" {
				id = r["id"].(string)
			}
		}
	}
	if id == "" {
		t.Fatal("the stream in flight was never listed")
	}
	if _, m := call("GET", "/v1/admin/overview"); m["in_flight"] != 1.0 || m["read_only"] != true {
		t.Errorf("overview %v", m)
	}
	if status, m := call("POST", "/v1/admin/requests/"+id+"/cancel"); status != 200 {
		t.Fatalf("cancel: %d %v", status, m)
	}
	select {
	case body := <-done:
		if strings.Contains(body, "[DONE]") {
			t.Errorf("the cancelled stream ran to its end")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled stream did not end")
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
