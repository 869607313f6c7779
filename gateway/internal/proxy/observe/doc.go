// Package observe is what Tollgate measures of its requests: the
// Prometheus metrics (those observed once a request is finished, and those
// read from the gateway's components at scrape time), the access log line
// and the OpenTelemetry spans of a request.
//
// It sees a request through two things only: a Trace, which the request
// path starts and feeds as the request goes, and a Finished record, a
// plain value filled once when the request's end work runs (its call-log
// row and the few timings and labels beside it). The scrape-time metrics
// read the components named in Sources and the policy states attached
// with Attach.
package observe
