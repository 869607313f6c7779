package admin

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Lists: {"object":"list","data":[...],"has_more":bool,"next_cursor":"..."}.
// Query limit (1 to maxLimit, default defaultLimit) and cursor (opaque: the
// next_cursor of the previous page). Unknown query parameters are refused,
// so a misspelt filter is not silently a list of everything.
const (
	defaultLimit = 50
	maxLimit     = 500
)

// listJSON is a page of a list.
type listJSON struct {
	Object     string `json:"object"` // "list"
	Data       any    `json:"data"`
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// listQuery is a list's parsed query.
type listQuery struct {
	limit  int
	cursor string // decoded; "" for the first page
	q      map[string]string
}

// get returns filter parameter name ("" when absent).
func (l *listQuery) get(name string) string { return l.q[name] }

// parseList parses r's query: limit, cursor and the filters named in
// filters; anything else, a repeated parameter or a bad limit or cursor is
// answered with a 400 here, and ok is false.
func (h *handler) parseList(w http.ResponseWriter, r *http.Request, filters ...string) (l listQuery, ok bool) {
	l = listQuery{limit: defaultLimit, q: map[string]string{}}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_query",
			Message: "the query string does not parse: " + err.Error()})
		return l, false
	}
	for name, vals := range query {
		if name != "limit" && name != "cursor" && !slices.Contains(filters, name) {
			allowed := append([]string{"limit", "cursor"}, filters...)
			h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_query", Param: name,
				Message: fmt.Sprintf("unknown query parameter %q; this route takes %s", name, strings.Join(allowed, ", "))})
			return l, false
		}
		if len(vals) > 1 {
			h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_query", Param: name,
				Message: fmt.Sprintf("query parameter %q given %d times", name, len(vals))})
			return l, false
		}
		l.q[name] = vals[0]
	}
	if s, has := l.q["limit"]; has {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_value", Param: "limit",
				Message: fmt.Sprintf("limit %q: want an integer from 1 to %d", s, maxLimit)})
			return l, false
		}
		l.limit = n
	}
	if s := l.q["cursor"]; s != "" {
		c, err := decodeCursor(s)
		if err != nil {
			h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_value", Param: "cursor",
				Message: "cursor is not one this API handed out (use next_cursor as it is)"})
			return l, false
		}
		l.cursor = c
	}
	delete(l.q, "limit")
	delete(l.q, "cursor")
	return l, true
}

// cursorVersion prefixes cursors, so their format can change.
const cursorVersion = "c1:"

func encodeCursor(s string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + s))
}

func decodeCursor(s string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", err
	}
	c, ok := strings.CutPrefix(string(b), cursorVersion)
	if !ok {
		return "", fmt.Errorf("cursor without version")
	}
	return c, nil
}

// replyPage answers a page of items, fetched with limit+1 so that has_more
// is known: the extra item is dropped and the cursor is the last kept
// item's, by cursorOf.
func replyPage[T, O any](h *handler, w http.ResponseWriter, items []T, limit int, out func(T) O, cursorOf func(T) string) {
	page := listJSON{Object: "list"}
	if len(items) > limit {
		items = items[:limit]
		page.HasMore = true
		page.NextCursor = encodeCursor(cursorOf(items[len(items)-1]))
	}
	data := make([]O, len(items))
	for i, it := range items {
		data[i] = out(it)
	}
	page.Data = data
	h.reply(w, http.StatusOK, page)
}
