package sdk

// SetMessageText replaces the text of a part of the request's conversation
// with text: record is the part's [MessagePart.Record] (its number in
// [Exchange.Messages] order). The host rewrites the request body at once,
// re-encoding the part's JSON string in place, so that from then on this
// plugin, the plugins after it and the upstream see the new text, and the
// prompt's sizes (BodyBytes, PromptChars, PromptTokens, PromptTokensBound)
// are those of the new body (ABI.md, "Request rewriting").
//
// It returns [ErrAbsent] when there is no such record; [ErrInvalid] when
// the part's text is not one JSON string in the body (an Anthropic
// tool_use's input, which is JSON; a tool result joined from several
// parts), when text is not valid UTF-8 or when the new body would be over
// the gateway's size limit; [ErrNotAllowed] outside the request phase.
//
// Parts, bodies and records read before the call keep their values; read
// them again for the new ones (the numbering of the records does not
// change).
func (r *Request) SetMessageText(record int, text string) error {
	if record < 0 || record > 1<<31-1 {
		return ErrAbsent
	}
	if err := status(hostSetMessageText(int32(record), text)); err != nil {
		return err
	}
	// What this callback read of the old body stays as it was: the
	// buffers it aliases are let go, not reused.
	bodyCache.call, messagesCache.call = 0, 0
	bodyBuf, messagesBuf = buffer{}, buffer{}
	return nil
}
