//go:build !wasip1

package sdk

// rewriteHostAPI is the request-rewriting import as this package's tests
// fake it; a fake host without it has no such import.
type rewriteHostAPI interface {
	setMessageText(record int32, text string) int32
}

func hostSetMessageText(record int32, text string) int32 {
	h, ok := host().(rewriteHostAPI)
	if !ok {
		panic("sdk: set_message_text: the test host has no such import")
	}
	return h.setMessageText(record, text)
}
