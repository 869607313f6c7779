package admin

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the admin API's OpenAPI 3.1 document. TestOpenAPI keeps it
// true: every route of the mux is in it and every path in it is a route,
// and real answers validate against its response schemas.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the admin API's OpenAPI 3.1 document (JSON).
func OpenAPI() []byte { return openAPIDoc }

func (h *handler) openAPI(w http.ResponseWriter, r *http.Request) {
	if !h.noQuery(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(openAPIDoc)
}
