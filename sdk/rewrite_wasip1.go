//go:build wasip1

package sdk

//go:wasmimport tollgate set_message_text
func tgSetMessageText(record int32, text string) int32

func hostSetMessageText(record int32, text string) int32 { return tgSetMessageText(record, text) }
