package mockllm

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string literal.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscaped(b, s)
	return append(b, '"')
}

// appendEscaped appends the JSON string escaping of s, without quotes.
// Invalid UTF-8 becomes U+FFFD, and U+2028/U+2029 are escaped, as
// encoding/json does; <, > and & are left as they are.
func appendEscaped(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}

// appendModelList appends the GET /v1/models body.
func appendModelList(b []byte, models []string) []byte {
	b = append(b, `{"object":"list","data":[`...)
	for i, m := range models {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendModel(b, m)
	}
	return append(b, "]}\n"...)
}

// appendModel appends one model object.
func appendModel(b []byte, id string) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, modelsCreated, 10)
	return append(b, `,"owned_by":"mock"}`...)
}

func (s *Server) serveModels(w http.ResponseWriter, _ *http.Request, _ []byte, _ *params) {
	s.writeJSON(w, http.StatusOK, s.models)
}

func (s *Server) serveModel(w http.ResponseWriter, _ *http.Request, id string) {
	for _, m := range s.cfg.Models {
		if m == id {
			b := appendModel(make([]byte, 0, 96+len(id)), id)
			s.writeJSON(w, http.StatusOK, append(b, '\n'))
			return
		}
	}
	s.writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
		"The model '"+id+"' does not exist")
}

type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// embeddingInput is one input to embed: key seeds its vector.
type embeddingInput struct {
	key    string
	tokens int
}

func (s *Server) serveEmbeddings(w http.ResponseWriter, r *http.Request, body []byte, p *params) {
	var req embeddingRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.badJSON(w, err)
		return
	}
	if req.Model == "" {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "you must provide a model parameter")
		return
	}
	inputs, err := parseEmbeddingInput(req.Input)
	if err != nil {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid 'input': "+err.Error())
		return
	}
	dims := s.cfg.EmbeddingDims
	if req.Dimensions != nil {
		if *req.Dimensions < 1 || *req.Dimensions > 1<<16 {
			s.writeError(w, http.StatusBadRequest, "invalid_request_error", "",
				"invalid 'dimensions': expected a value between 1 and 65536")
			return
		}
		dims = *req.Dimensions
	}
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "",
			"invalid 'encoding_format': expected 'float' or 'base64'")
		return
	}
	if !p.wait.wait(p.ttft) {
		s.noticeClose(r)
		return
	}

	b := make([]byte, 0, 128+len(inputs)*(40+dims*12))
	b = append(b, `{"object":"list","data":[`...)
	vec := make([]float32, dims)
	raw := make([]byte, 4*dims)
	total := 0
	for i, in := range inputs {
		total += in.tokens
		Embedding(vec, in.key)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		if b64 {
			for j, f := range vec {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(f))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for j, f := range vec {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendString(b, req.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, "}}\n"...)
	s.writeJSON(w, http.StatusOK, b)
}

// parseEmbeddingInput accepts a string, an array of strings, a token array,
// or an array of token arrays. A string counts max(1, runes/4) tokens; a
// token array counts its length.
func parseEmbeddingInput(raw json.RawMessage) ([]embeddingInput, error) {
	raw = trimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, promptError("missing")
	}
	switch raw[0] {
	case '"':
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return nil, err
		}
		return []embeddingInput{stringInput(str)}, nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return nil, promptError("empty array")
		}
		if it := trimSpace(items[0]); len(it) > 0 && it[0] != '"' && it[0] != '[' {
			// A single token array.
			var toks []int64
			if err := json.Unmarshal(raw, &toks); err != nil {
				return nil, err
			}
			return []embeddingInput{{key: string(raw), tokens: len(toks)}}, nil
		}
		out := make([]embeddingInput, 0, len(items))
		for _, it := range items {
			it = trimSpace(it)
			if len(it) > 0 && it[0] == '[' {
				var toks []int64
				if err := json.Unmarshal(it, &toks); err != nil {
					return nil, err
				}
				out = append(out, embeddingInput{key: string(it), tokens: len(toks)})
				continue
			}
			var str string
			if err := json.Unmarshal(it, &str); err != nil {
				return nil, err
			}
			out = append(out, stringInput(str))
		}
		return out, nil
	}
	return nil, errUnsupportedPrompt
}

func stringInput(s string) embeddingInput {
	return embeddingInput{key: s, tokens: max(1, utf8.RuneCountInString(s)/4)}
}

// Embedding fills vec with the deterministic unit-length embedding of input
// that POST /v1/embeddings returns (before float32 text formatting), so tests
// can compute expected vectors.
func Embedding(vec []float32, input string) {
	h := fnv.New64a()
	h.Write([]byte(input))
	seed := h.Sum64()
	val := func(j int) float64 {
		return float64(int64(splitmix64(seed+uint64(j)*0x9e3779b97f4a7c15))) / (1 << 63)
	}
	var norm float64
	for j := range vec {
		f := val(j)
		norm += f * f
	}
	inv := 1.0
	if norm > 0 {
		inv = 1 / math.Sqrt(norm)
	}
	for j := range vec {
		vec[j] = float32(val(j) * inv)
	}
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
