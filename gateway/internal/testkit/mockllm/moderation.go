package mockllm

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// POST /v1/moderations answers in the shape of OpenAI's omni-moderation
// models: one result per input, each with flagged, categories,
// category_scores and category_applied_input_types over every category of
// ModerationCategories. The input is a string, an array of strings, or an
// array of {"type":"text","text":...} parts.
//
// The verdict follows trigger words in the input:
//
//   - "[CATEGORY]" scores that category 0.99, e.g. "[violence]",
//     "[self-harm/intent]";
//   - "[CATEGORY=SCORE]" scores it SCORE (0 to 1), e.g. "[hate=0.4]", for
//     testing thresholds;
//   - "FLAG" scores harassment 0.99 (the first trigger, kept for older
//     tests).
//
// A category is flagged at a score of 0.5 or more, and a result when one
// of its categories is. Every other score is 0.
//
// Faults, for testing a classifier that misbehaves: the input's text, or
// the X-Mock-Moderation-Fault header, says "mock-moderation:slow=DURATION"
// (answer after a Go duration), "mock-moderation:status=NNN" (an
// OpenAI-style error with that status), "mock-moderation:close" (close the
// connection without an answer) or "mock-moderation:garbage" (a 200 whose
// body is not JSON); the header takes the part after "mock-moderation:".
// The X-Mock-TTFT, X-Mock-Fail-Delay and X-Mock-Fail-Status headers apply
// as on every route.

// ModerationCategories are omni-moderation's categories, in its order.
var ModerationCategories = []string{
	"harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent",
	"self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence", "violence/graphic",
}

// HeaderModerationFault sets a fault of POST /v1/moderations (see above).
const HeaderModerationFault = "X-Mock-Moderation-Fault"

// moderationFaultPrefix begins a fault in a moderation input.
const moderationFaultPrefix = "mock-moderation:"

// ModerationGarbage is the body of a garbage moderation answer.
const ModerationGarbage = `{"results": [{"flagged": tru`

func (s *Server) serveModeration(w http.ResponseWriter, r *http.Request, body []byte, p *params) {
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.badJSON(w, err)
		return
	}
	inputs, ok := moderationInputs(req.Input)
	if !ok {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "input must be a string, an array of strings or an array of text parts")
		return
	}
	fault := r.Header.Get(HeaderModerationFault)
	for _, in := range inputs {
		if i := strings.Index(in, moderationFaultPrefix); i >= 0 && fault == "" {
			fault, _, _ = strings.Cut(in[i+len(moderationFaultPrefix):], " ")
		}
	}
	if !s.moderationFault(w, r, p, fault) {
		return
	}
	results := make([]map[string]any, len(inputs))
	for i, in := range inputs {
		results[i] = moderate(in)
	}
	model := req.Model
	if model == "" {
		model = "omni-moderation-latest"
	}
	s.writeValue(w, map[string]any{"id": "modr-mock-" + strconv.FormatInt(s.seq.Add(1), 10), "model": model, "results": results})
}

// moderationFault acts out fault ("" for none) and reports whether the
// answer is still to be written.
func (s *Server) moderationFault(w http.ResponseWriter, r *http.Request, p *params, fault string) bool {
	name, arg, _ := strings.Cut(fault, "=")
	switch name {
	case "":
		return true
	case "slow":
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 {
			s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "mock-moderation:slow needs a Go duration")
			return false
		}
		if !p.wait.wait(d) {
			s.noticeClose(r)
			return false
		}
		return true
	case "status":
		st, err := strconv.Atoi(arg)
		if err != nil || st < 200 || st > 599 {
			s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "mock-moderation:status needs a status from 200 to 599")
			return false
		}
		s.writeFailure(w, st)
		return false
	case "close":
		panic(http.ErrAbortHandler) // net/http closes the connection, silently
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(ModerationGarbage))
		return false
	}
	s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "unknown moderation fault "+strconv.Quote(fault))
	return false
}

// moderationInputs reads input: a string, strings, or text parts.
func moderationInputs(raw json.RawMessage) ([]string, bool) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil || len(parts) == 0 {
		return nil, false
	}
	for _, pt := range parts {
		if pt.Type == "text" {
			many = append(many, pt.Text)
		}
	}
	return many, len(many) > 0
}

// moderate is the verdict on one input, from its trigger words.
func moderate(in string) map[string]any {
	categories := make(map[string]bool, len(ModerationCategories))
	scores := make(map[string]float64, len(ModerationCategories))
	applied := make(map[string][]string, len(ModerationCategories))
	flagged := false
	for _, c := range ModerationCategories {
		score := triggerScore(in, c)
		if c == "harassment" && strings.Contains(in, "FLAG") {
			score = max(score, 0.99)
		}
		scores[c], categories[c] = score, score >= 0.5
		flagged = flagged || categories[c]
		applied[c] = []string{"text"}
	}
	return map[string]any{"flagged": flagged, "categories": categories, "category_scores": scores,
		"category_applied_input_types": applied}
}

// triggerScore is category c's score in in: 0.99 for "[c]", SCORE for
// "[c=SCORE]", else 0.
func triggerScore(in, c string) float64 {
	if strings.Contains(in, "["+c+"]") {
		return 0.99
	}
	_, rest, ok := strings.Cut(in, "["+c+"=")
	if !ok {
		return 0
	}
	num, _, ok := strings.Cut(rest, "]")
	f, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || f < 0 || f > 1 {
		return 0
	}
	return f
}
