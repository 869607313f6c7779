package mcp

import (
	"path"
	"strings"
)

// The model an MCP message is metered, limited and allowed as: plans'
// allowed_models and rate-limit patterns name MCP servers and tools the
// way they name models.
const modelPrefix = "mcp:"

// AppendModel appends the model of a message to server: mcp:SERVER, or
// mcp:SERVER/TOOL for a tools/call of tool (nil: none).
func AppendModel(dst []byte, server string, tool []byte) []byte {
	dst = append(append(dst, modelPrefix...), server...)
	if tool != nil {
		dst = append(append(dst, '/'), tool...)
	}
	return dst
}

// Allowed reports whether a plan's allowed-model patterns admit model,
// with the preflight plugin's rules (plugins/preflight): no patterns admit
// everything; a pattern is an exact name, "prefix*" whose * matches any
// run of characters but '/', or a path.Match pattern.
func Allowed(patterns []string, model string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		switch i := strings.IndexAny(p, `*?[\`); {
		case i < 0:
			if p == model {
				return true
			}
		case i == len(p)-1 && p[i] == '*':
			if len(model) >= i && p[:i] == model[:i] && !strings.Contains(model[i:], "/") {
				return true
			}
		default:
			if ok, _ := path.Match(p, model); ok {
				return true
			}
		}
	}
	return false
}
