package obs

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// RequireBearer returns h behind a bearer token (metrics.token_env): a
// request without "Authorization: Bearer <token>" gets 401 and an
// OpenAI-style error body, and h never sees it. token "" returns h as is
// (a listener that is private by its address).
//
// The digests of the presented and the configured token are compared in
// constant time, so neither the bytes nor the length of the token show in
// how long a refusal takes (as the admin API's token).
func RequireBearer(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := sha256.Sum256([]byte(token))
	refusal := (&openai.Error{Status: http.StatusUnauthorized, Type: openai.TypeInvalidRequest, Code: "invalid_metrics_token",
		Message: "missing or wrong metrics token (Authorization: Bearer <token>)"}).AppendJSON(nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate-metrics"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write(refusal)
			return
		}
		h.ServeHTTP(w, r)
	})
}
