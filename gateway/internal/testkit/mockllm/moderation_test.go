package mockllm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The official client reads the mock's verdicts, category by category.
func TestModerationVerdicts(t *testing.T) {
	srv := httptest.NewServer(New(Config{}))
	t.Cleanup(srv.Close)
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	tests := []struct {
		input   string
		flagged bool
		scores  map[string]float64
	}{
		{"a friendly question", false, nil},
		{"please FLAG this", true, map[string]float64{"harassment": 0.99}},
		{"[violence] and [self-harm/intent]", true, map[string]float64{"violence": 0.99, "self-harm/intent": 0.99}},
		{"[hate=0.4]", false, map[string]float64{"hate": 0.4}},
		{"[hate=0.5]", true, map[string]float64{"hate": 0.5}},
		{"[hate/threatening] only", true, map[string]float64{"hate/threatening": 0.99}},
		{"[hate=7] [nope]", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			res, err := c.Moderations.New(context.Background(), openai.ModerationNewParams{Model: openai.ModerationModelOmniModerationLatest,
				Input: openai.ModerationNewParamsInputUnion{OfString: openai.String(tt.input)}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Results) != 1 {
				t.Fatalf("%d results", len(res.Results))
			}
			r := res.Results[0]
			if r.Flagged != tt.flagged {
				t.Errorf("flagged %v, want %v", r.Flagged, tt.flagged)
			}
			var scores map[string]float64
			var cats map[string]bool
			json.Unmarshal([]byte(r.CategoryScores.RawJSON()), &scores)
			json.Unmarshal([]byte(r.Categories.RawJSON()), &cats)
			if len(scores) != len(ModerationCategories) || len(cats) != len(ModerationCategories) {
				t.Fatalf("%d scores and %d categories, want %d", len(scores), len(cats), len(ModerationCategories))
			}
			for _, cat := range ModerationCategories {
				if scores[cat] != tt.scores[cat] || cats[cat] != (tt.scores[cat] >= 0.5) {
					t.Errorf("%s: score %v flagged %v, want %v", cat, scores[cat], cats[cat], tt.scores[cat])
				}
			}
		})
	}
}

func TestModerationFaults(t *testing.T) {
	srv := httptest.NewServer(New(Config{}))
	t.Cleanup(srv.Close)
	post := func(input, header string) (int, string, time.Duration, error) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/moderations", strings.NewReader(`{"input":[{"type":"text","text":`+quote(input)+`}]}`))
		if header != "" {
			req.Header.Set(HeaderModerationFault, header)
		}
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", time.Since(start), err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start), nil
	}
	tests := []struct {
		name, input, header string
		status              int
		body                string
		slow                bool
		closed              bool
	}{
		{"slow", "hi mock-moderation:slow=300ms", "", 200, `"flagged":false`, true, false},
		{"slow by header", "hi", "slow=300ms", 200, `"flagged":false`, true, false},
		{"status", "mock-moderation:status=503 please", "", 503, `"type":"server_error"`, false, false},
		{"garbage", "mock-moderation:garbage", "", 200, ModerationGarbage, false, false},
		{"close", "mock-moderation:close", "", 0, "", false, true},
		{"close by header", "fine", "close", 0, "", false, true},
		{"unknown", "mock-moderation:explode", "", 400, "unknown moderation fault", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, d, err := post(tt.input, tt.header)
			if tt.closed {
				if err == nil {
					t.Fatalf("got %d %s, want the connection closed", status, body)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if status != tt.status || !strings.Contains(body, tt.body) {
				t.Errorf("got %d %s, want %d with %q", status, body, tt.status, tt.body)
			}
			if tt.slow != (d >= 300*time.Millisecond) {
				t.Errorf("answered in %v (slow: %v)", d, tt.slow)
			}
		})
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
