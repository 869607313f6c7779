// Package sse splits a text/event-stream (Server-Sent Events) byte stream
// into events without copying or allocating per event.
//
// The gateway forwards upstream events byte for byte, so the Reader hands
// out each event's raw bytes (including the blank line that ends it) and
// AppendData extracts the data field for inspection on the side. Both are
// built for the streaming hot path: a Reader reuses one buffer across events
// and across streams (see Reader.Reset), and AppendData appends into a
// caller-owned slice.
package sse
