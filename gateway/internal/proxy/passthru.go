package proxy

import (
	"bytes"
	"fmt"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/balance"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/formdata"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/provider"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// Passthrough endpoints. The rest of OpenAI's API — images, audio,
// moderations, files and batches — passes through to upstreams that speak
// it (provider openai): the request body and the reply go as they are, the
// plugins run their request, response-headers and end phases (not the
// chunk phase: there is no chat text to read), and the usage a reply
// reports (images, transcriptions, speech events) is what the request is
// charged.
//
//   - Requests that name a model (a JSON body's "model", a multipart
//     form's model field, read in place by package formdata) go by the
//     model's route, to one of its upstreams that serve the endpoint:
//     openai upstreams, and those whose adapter addresses it
//     (passAddresser); the others have no such endpoint (400
//     unsupported_endpoint naming it). model_ids apply.
//   - /v1/files and /v1/batches name no model: they go to the upstream
//     policy passthrough.files names, for the plans it names, and are off
//     (404) without it. Every tenant shares that upstream's key, and so
//     its files: see docs/POLICY.md, "Files and batches".
//
// One attempt is made, never retried nor sent to a fallback model: an
// upload creates state upstream, and a form's model is not rewritten per
// fallback (docs/adr/0012-passthrough-endpoints.md). Bodies are bounded
// by server.max_body_bytes like any other; a whole reply is read only when
// usage is to be read from it (a 2xx JSON reply of a metered endpoint) or
// it is an error, else it streams to the client as it arrives (speech
// audio, file content, event streams).

// passEndpoint is one passthrough endpoint.
type passEndpoint struct {
	ep openai.Endpoint
	// label is the endpoint in metrics and the call log, and (without
	// the /v1/ prefix) the plugins' endpoint field.
	label string
	name  []byte // the plugins' endpoint field: label without "/v1/"
	// path is the upstream path relative to its base URL, before the id
	// and suffix (passPath).
	path   string
	suffix string // after the id ("/content", "/cancel")
	method string
	body   passBody
	// files: the endpoint goes to passthrough.files' upstream, not by a
	// model's route.
	files bool
	// metered: a 2xx JSON reply or event stream may carry usage (images,
	// transcriptions, speech events).
	metered bool
}

type passBody uint8

const (
	passNoBody passBody = iota
	passJSON
	passForm
)

// The passthrough endpoints' openai.Endpoint values are the proxy's own,
// far from the openai package's (like endpointMessages).
const (
	endpointImagesGenerations openai.Endpoint = 0xc0 + iota
	endpointImagesEdits
	endpointImagesVariations
	endpointAudioSpeech
	endpointAudioTranscriptions
	endpointAudioTranslations
	endpointModerations
	endpointFilesCreate
	endpointFilesList
	endpointFilesGet
	endpointFilesDelete
	endpointFilesContent
	endpointBatchesCreate
	endpointBatchesList
	endpointBatchesGet
	endpointBatchesCancel
	endpointPassLast = endpointBatchesCancel
)

var passEndpoints = [...]passEndpoint{
	{ep: endpointImagesGenerations, label: "/v1/images/generations", path: "/images/generations", method: "POST", body: passJSON, metered: true},
	{ep: endpointImagesEdits, label: "/v1/images/edits", path: "/images/edits", method: "POST", body: passForm, metered: true},
	{ep: endpointImagesVariations, label: "/v1/images/variations", path: "/images/variations", method: "POST", body: passForm, metered: true},
	{ep: endpointAudioSpeech, label: "/v1/audio/speech", path: "/audio/speech", method: "POST", body: passJSON, metered: true},
	{ep: endpointAudioTranscriptions, label: "/v1/audio/transcriptions", path: "/audio/transcriptions", method: "POST", body: passForm, metered: true},
	{ep: endpointAudioTranslations, label: "/v1/audio/translations", path: "/audio/translations", method: "POST", body: passForm, metered: true},
	{ep: endpointModerations, label: "/v1/moderations", path: "/moderations", method: "POST", body: passJSON},
	{ep: endpointFilesCreate, label: "/v1/files", path: "/files", method: "POST", body: passForm, files: true},
	{ep: endpointFilesList, label: "/v1/files", path: "/files", method: "GET", files: true},
	{ep: endpointFilesGet, label: "/v1/files/{id}", path: "/files/", method: "GET", files: true},
	{ep: endpointFilesDelete, label: "/v1/files/{id}", path: "/files/", method: "DELETE", files: true},
	{ep: endpointFilesContent, label: "/v1/files/{id}/content", path: "/files/", suffix: "/content", method: "GET", files: true},
	{ep: endpointBatchesCreate, label: "/v1/batches", path: "/batches", method: "POST", body: passJSON, files: true},
	{ep: endpointBatchesList, label: "/v1/batches", path: "/batches", method: "GET", files: true},
	{ep: endpointBatchesGet, label: "/v1/batches/{id}", path: "/batches/", method: "GET", files: true},
	{ep: endpointBatchesCancel, label: "/v1/batches/{id}/cancel", path: "/batches/", suffix: "/cancel", method: "POST", files: true},
}

func init() {
	for i := range passEndpoints {
		e := &passEndpoints[i]
		e.name = []byte(e.label[len("/v1/"):])
	}
}

// passEndpointOf is the passthrough endpoint of ep; nil for others.
func passEndpointOf(ep openai.Endpoint) *passEndpoint {
	if ep < endpointImagesGenerations || ep > endpointPassLast {
		return nil
	}
	return &passEndpoints[ep-endpointImagesGenerations]
}

// endpointLabel is the exchange's endpoint in metrics and the call log.
func (x *exchange) endpointLabel() string {
	if x.ep == endpointMCP {
		return x.mcp.srv.label
	}
	if pe := passEndpointOf(x.ep); pe != nil {
		return pe.label
	}
	return endpointPath(x.ep)
}

// passEndpointFor finds the passthrough endpoint for a request's method
// and path: the endpoint and the object id in the path (nil for none).
// ok false: the path is no passthrough endpoint's. A known path with a
// method it does not take returns a nil endpoint and the methods it takes
// in allow.
func passEndpointFor(method, path []byte) (pe *passEndpoint, id []byte, allow string, ok bool) {
	p, found := bytes.CutPrefix(path, []byte("/v1/"))
	if !found {
		return nil, nil, "", false
	}
	// The path's template: /v1/files/{id}/content for /v1/files/file-1/content.
	template := string(path)
	if coll, rest, _ := bytes.Cut(p, []byte("/")); string(coll) == "files" || string(coll) == "batches" {
		if len(rest) > 0 {
			var suffix []byte
			id, suffix, _ = bytes.Cut(rest, []byte("/"))
			template = "/v1/" + string(coll) + "/{id}"
			if suffix != nil {
				template += "/" + string(suffix)
			}
		} else if bytes.HasSuffix(p, []byte("/")) {
			return nil, nil, "", false // "/v1/files/": no id
		}
	}
	for i := range passEndpoints {
		e := &passEndpoints[i]
		if e.label != template {
			continue
		}
		if string(method) == e.method {
			return e, id, "", true
		}
		if allow != "" {
			allow += ", "
		}
		allow += e.method
	}
	return nil, nil, allow, allow != ""
}

// validObjectID accepts the ids OpenAI gives files and batches
// ("file-abc123", "batch_abc123"): letters, digits, '-', '_' and '.',
// never "." or "..", so an id cannot change the upstream path.
func validObjectID(id []byte) bool {
	if len(id) == 0 || len(id) > 256 || string(id) == "." || string(id) == ".." {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// validQuery accepts a query string that can go upstream as it came:
// visible ASCII without '#'.
func validQuery(q []byte) bool {
	for _, c := range q {
		if c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// passModel reads the model a passthrough request names (nil when it
// names none) and, for a form, where its value starts in body (-1 for a
// JSON body, or none).
func passModel(ctx *fasthttp.RequestCtx, pe *passEndpoint, body []byte, parts []formdata.Part) (model []byte, at int, _ []formdata.Part, _ error) {
	switch pe.body {
	case passJSON:
		var p fastjson.Parser // once per request, off the chat path
		v, err := p.ParseBytes(body)
		if err != nil {
			return nil, -1, parts, openai.BadRequest("", "We could not parse the JSON body of your request: %v.", err)
		}
		obj, err := v.Object()
		if err != nil {
			return nil, -1, parts, openai.BadRequest("", "The request body must be a JSON object.")
		}
		if err := openai.CheckMembers(obj, [][]byte{[]byte("model")}); err != nil {
			return nil, -1, parts, err
		}
		m := obj.Get("model")
		if m == nil || m.Type() == fastjson.TypeNull {
			return nil, -1, parts, nil
		}
		s, err := m.StringBytes()
		if err != nil {
			return nil, -1, parts, openai.BadRequest("model", "model must be a string.")
		}
		return s, -1, parts, nil // the parser's, kept alive by s: the caller copies it
	case passForm:
		b, err := formdata.Boundary(ctx.Request.Header.ContentType())
		if err == nil {
			parts, err = formdata.Parts(parts[:0], body, b)
		}
		var mp *formdata.Part
		if err == nil {
			mp, err = formdata.FieldPart(parts, "model")
		}
		if err != nil {
			return nil, -1, parts, openai.BadRequest("", "%s expects a multipart/form-data body: %v", pe.label, err)
		}
		if mp == nil {
			return nil, -1, parts, nil
		}
		return mp.Value, mp.Offset, parts, nil
	}
	return nil, -1, parts, nil
}

// passAddresser is implemented by a provider adapter whose upstream
// serves OpenAI's passthrough endpoints at paths of its own (Azure
// OpenAI's deployments); the proxy finds it by type assertion. An
// adapter's upstream without it serves none of them.
type passAddresser interface {
	// AppendPassthroughPath appends to dst the path, relative to the
	// upstream's base URL and escaped (it may carry a query), for the
	// OpenAI API path p ("/images/generations", "/files/file-1/content",
	// with the client's query if any) and model (the upstream's id; ""
	// for files and batches). ok false: the upstream has no such
	// endpoint.
	AppendPassthroughPath(dst []byte, p, model string) (_ []byte, ok bool)
}

// Azure OpenAI's adapter addresses the passthrough endpoints
// (provider/azure_passthru.go).
var _ passAddresser = (*provider.Azure)(nil)

// passAddress is t's path for the passthrough path p and model: p itself
// for an OpenAI-compatible upstream; ok false when t has no such endpoint.
func passAddress(dst []byte, t *target, p, model string) ([]byte, bool) {
	if t.bind == nil || t.bind.adapter == nil {
		return append(dst, p...), true
	}
	a, ok := t.bind.adapter.(passAddresser)
	if !ok {
		return dst, false
	}
	return a.AppendPassthroughPath(dst, p, model)
}

// passUnservable is the mask of rt's members that cannot serve pe:
// upstreams of a provider without it (Anthropic's, and every adapter's
// that does not address it).
func passUnservable(rt *route, pe *passEndpoint, model []byte) uint64 {
	var m uint64
	for i := range rt.targets {
		if _, ok := passAddress(nil, &rt.targets[i], pe.path, string(model)); !ok {
			m |= 1 << i
		}
	}
	return m
}

// passUnsupported is the 400 for a model whose upstream c (of a route
// with none that serves the endpoint) has no such endpoint.
func passUnsupported(pe *passEndpoint, model []byte, c *upstream.Client) *openai.Error {
	return &openai.Error{Status: fasthttp.StatusBadRequest, Type: openai.TypeInvalidRequest, Param: "model", Code: "unsupported_endpoint",
		Message: fmt.Sprintf("The model `%s` is served by the upstream %q (provider %s), which has no %s %s endpoint.",
			model, c.Name(), c.Provider(), pe.method, pe.label)}
}

// filesDisabled is the 404 for /v1/files and /v1/batches on a gateway
// whose policy does not pass them through.
func filesDisabled(pe *passEndpoint) *openai.Error {
	return &openai.Error{Status: fasthttp.StatusNotFound, Type: openai.TypeInvalidRequest, Code: "unsupported_endpoint",
		Message: fmt.Sprintf("%s %s is not enabled on this gateway (policy passthrough.files).", pe.method, pe.label)}
}

// filesForbidden is the 403 for a tenant whose plan may not use the Files
// and Batch APIs.
func filesForbidden(pe *passEndpoint) *openai.Error {
	return &openai.Error{Status: fasthttp.StatusForbidden, Type: "permission_error", Code: "endpoint_not_allowed",
		Message: fmt.Sprintf("Your API key may not use %s %s.", pe.method, pe.label)}
}

// newFilesRoute is the route of /v1/files and /v1/batches: the one
// upstream passthrough.files names (nil when it is not set).
func newFilesRoute(p *config.Policy, clients map[string]*upstream.Client, bindings map[string]*binding,
	filters map[*upstream.Client]*headerFilter, health map[string]*balance.Upstream) *route {
	f := p.Passthrough.Files
	if f == nil {
		return nil
	}
	c := clients[f.Upstream]
	if c == nil {
		return nil // validation names an existing upstream
	}
	ro := &route{targets: []target{{client: c, bind: bindings[f.Upstream], filter: filters[c], name: []byte(f.Upstream)}}}
	ro.set = balance.NewSet([]*balance.Upstream{health[f.Upstream]}, []int{1})
	for _, u := range p.Upstreams {
		if u.Name == f.Upstream {
			ro.wait = u.Timeouts.FirstByte
		}
	}
	return ro
}
