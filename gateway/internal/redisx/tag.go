package redisx

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// AppendTenantTag appends the content of a tenant's hash tag (what goes
// between '{' and '}'): the tenant id itself, or '#' and the hex SHA-256 of
// the id when the id is empty (Redis ignores an empty tag), contains a
// brace (which would end or split the tag) or starts with '#' (so no id can
// pass for another one's hash). Counters that key a tenant's state with
// this tag put all of it in one Redis Cluster slot, so one script can touch
// a request's rate limits and budgets together; the rate limiter's tag
// (limiter.appendTenantTag) is the same for every non-empty id.
func AppendTenantTag(b []byte, tenant string) []byte {
	if tenant != "" && !strings.HasPrefix(tenant, "#") && !strings.ContainsAny(tenant, "{}") {
		return append(b, tenant...)
	}
	sum := sha256.Sum256([]byte(tenant))
	b = append(b, '#')
	return hex.AppendEncode(b, sum[:])
}

// TenantTag is AppendTenantTag as a string.
func TenantTag(tenant string) string {
	if tenant != "" && !strings.HasPrefix(tenant, "#") && !strings.ContainsAny(tenant, "{}") {
		return tenant
	}
	return string(AppendTenantTag(make([]byte, 0, 65), tenant))
}
