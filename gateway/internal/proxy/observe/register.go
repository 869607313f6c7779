package observe

import "github.com/prometheus/client_golang/prometheus"

// Register adds collectors another component owns (the call-outs'
// metrics) to the registry Handler serves. It panics on a duplicate, like
// prometheus.MustRegister: a programming error.
func (o *Metrics) Register(cs ...prometheus.Collector) { o.reg.MustRegister(cs...) }
