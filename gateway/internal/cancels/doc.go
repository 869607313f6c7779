// Package cancels is the registry of the requests a gateway is serving,
// for POST /v1/requests/{id}/cancel: it cancels a request served here at
// once, and reaches one served by another replica through Redis (a poller
// announces this gateway's requests and takes the marks others left). It
// also names the causes a request's context is cancelled with.
package cancels
