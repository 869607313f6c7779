package admin

// RoutePatterns are the ServeMux patterns of every admin route.
func RoutePatterns() []string {
	var out []string
	for _, rt := range (&handler{}).routes() {
		out = append(out, rt.pattern)
	}
	return out
}
