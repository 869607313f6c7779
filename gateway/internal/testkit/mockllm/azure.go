package mockllm

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Azure OpenAI. The mock serves Azure's two URL schemes for chat
// completions, completions and embeddings:
//
//   - deployments: POST /openai/deployments/{deployment}/chat/completions
//     ?api-version=YYYY-MM-DD[-preview] (a missing or malformed api-version
//     is a 404, as Azure answers it); the deployment names the model, and
//     the body's model, when absent, is taken from it;
//   - v1: POST /openai/v1/chat/completions, the model (a deployment name)
//     in the body; an api-version, if given, must be "preview" or "latest".
//
// The Responses API (responses.go's, unchanged) is served where Azure has
// it: POST /openai/v1/responses, and POST /openai/responses
// ?api-version=2025-03-01-preview or a later preview (an earlier or GA
// version is a 404, as Azure answers it); the stored responses, GET and
// DELETE .../responses/{id} and GET .../responses/{id}/input_items, below
// the same paths.
//
// Both are also served below /v1 (/v1/openai/...), so that a base URL
// ending in /v1, as the OpenAI routes are addressed, works for Azure too
// (an Azure upstream's base_url may carry a path, as behind API
// Management).
//
// Replies are the OpenAI routes' (same content, same X-Mock-* headers),
// except that a stream opens with Azure's prompt_filter_results chunk (no
// choices) and errors have Azure's shape for auth and routing failures.
// With Config.APIKey set a request must carry it as "api-key: <key>" or as
// an Entra ID token "Authorization: Bearer <key>"; otherwise a 401.

var azureAPIVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-preview)?$`)

// azureOperations are the operations below a deployment or /openai/v1.
var azureOperations = map[string]func(*Server, http.ResponseWriter, *http.Request, []byte, *params){
	"chat/completions": (*Server).serveChat,
	"completions":      (*Server).serveCompletion,
	"embeddings":       (*Server).serveEmbeddings,
}

func (s *Server) serveAzure(w http.ResponseWriter, r *http.Request, body []byte) {
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.EscapedPath(), "/v1"), "/openai/")
	version := r.URL.Query().Get("api-version")
	var deployment, op string
	if after, ok := strings.CutPrefix(rest, "v1/"); ok {
		op = after
		if version != "" && version != "preview" && version != "latest" {
			s.writeAzureError(w, http.StatusBadRequest, "BadRequest", "API version not supported")
			return
		}
	} else if after, ok := strings.CutPrefix(rest, "responses"); ok && (after == "" || after[0] == '/') {
		if !strings.HasSuffix(version, "-preview") || !azureAPIVersion.MatchString(version) || version < azureResponsesSince {
			s.writeAzureError(w, http.StatusNotFound, "404", "Resource not found")
			return
		}
		op = rest
	} else if after, ok := strings.CutPrefix(rest, "deployments/"); ok {
		dep, o, _ := strings.Cut(after, "/")
		d, err := url.PathUnescape(dep)
		if err != nil || d == "" {
			s.writeAzureError(w, http.StatusNotFound, "404", "Resource not found")
			return
		}
		deployment, op = d, o
		if !azureAPIVersion.MatchString(version) {
			s.writeAzureError(w, http.StatusNotFound, "404", "Resource not found")
			return
		}
	}
	if op == "responses" || strings.HasPrefix(op, "responses/") {
		s.serveAzureResponses(w, r, body, op)
		return
	}
	handle := azureOperations[op]
	if handle == nil || r.Method != http.MethodPost {
		s.writeAzureError(w, http.StatusNotFound, "404", "Resource not found")
		return
	}
	if !s.azureAuthorized(w, r) {
		return
	}
	if deployment != "" {
		body = withDefaultModel(body, deployment)
	}
	s.run(w, r, body, func(s *Server, w http.ResponseWriter, r *http.Request, body []byte, p *params) {
		handle(s, &promptFilterWriter{ResponseWriter: w}, r, body, p)
	})
}

// azureResponsesSince is the first dated api-version with the Responses
// API.
const azureResponsesSince = "2025-03-01-preview"

// serveAzureResponses serves the Responses API below /openai/v1 or
// /openai (op is "responses..." after either).
func (s *Server) serveAzureResponses(w http.ResponseWriter, r *http.Request, body []byte, op string) {
	rest := strings.TrimPrefix(op, "responses")
	if (rest == "" && r.Method != http.MethodPost) || (rest != "" && (len(rest) == 1 || r.Method == http.MethodPost)) {
		s.writeAzureError(w, http.StatusNotFound, "404", "Resource not found")
		return
	}
	if !s.azureAuthorized(w, r) {
		return
	}
	if rest == "" {
		s.run(w, r, body, (*Server).serveResponses)
		return
	}
	s.run(w, r, body, func(s *Server, w http.ResponseWriter, r *http.Request, _ []byte, _ *params) {
		s.serveStoredResponse(w, r, rest[1:])
	})
}

// azureAuthorized checks api-key or an Entra ID bearer token.
func (s *Server) azureAuthorized(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	key := r.Header.Get("Api-Key")
	if key == "" {
		key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if key == "" {
		s.writeAzureError(w, http.StatusUnauthorized, "401", "Access denied due to missing subscription key or bearer token. Make sure to include an api-key or Authorization header.")
		return false
	}
	if subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) != 1 {
		s.writeAzureError(w, http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
		return false
	}
	return true
}

// writeAzureError writes Azure's gateway error shape, {"error":{"code":..,
// "message":..}}.
func (s *Server) writeAzureError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]map[string]string{"error": {"code": code, "message": msg}})
	s.writeJSON(w, status, append(b, '\n'))
}

// withDefaultModel returns body with "model" set to model when the body
// has none (Azure reads the model from the deployment).
func withDefaultModel(body []byte, model string) []byte {
	var probe struct {
		Model *string `json:"model"`
	}
	if json.Unmarshal(body, &probe) != nil || probe.Model != nil {
		return body // the handler reports bad JSON; a model given stays
	}
	rest := bytes.TrimSpace(body)[1:]
	out, _ := json.Marshal(model)
	out = append([]byte(`{"model":`), out...)
	if len(bytes.TrimSpace(rest)) > 1 {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// azurePromptFilter is the chunk an Azure stream opens with: the prompt's
// content filter results, no choices.
const azurePromptFilter = `data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}]}` + "\n\n"

// promptFilterWriter puts azurePromptFilter before a stream's first event.
type promptFilterWriter struct {
	http.ResponseWriter
	started bool
}

func (w *promptFilterWriter) Write(p []byte) (int, error) {
	if !w.started {
		w.started = true
		if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			if _, err := w.ResponseWriter.Write([]byte(azurePromptFilter)); err != nil {
				return 0, err
			}
		}
	}
	return w.ResponseWriter.Write(p)
}

// Flush passes flushes on, so events go out one by one as from the OpenAI
// routes.
func (w *promptFilterWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *promptFilterWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
