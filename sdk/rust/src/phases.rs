//! The four phase objects, [`Request`], [`Response`], [`Chunk`] and
//! [`End`]: what each phase may do beyond what [`Exchange`] offers.

use std::ops::Deref;

use crate::abi::*;
use crate::buffer::{self, read_into};
use crate::exchange::Exchange;
use crate::records::ToolCallDeltas;
use crate::sys;

/// The most bytes a request's answer holds: [`Request::respond`]'s body and
/// [`Request::respond_event`]'s events together.
pub const MAX_ANSWER: usize = 4 << 20;

/// The most bytes one [`Request::respond_event`] takes.
pub const MAX_ANSWER_EVENT: usize = 1 << 20;

/// The request phase's view: the request was parsed and nothing was sent
/// upstream yet. Besides reading and changing the request, it can reject
/// it ([`Request::reject`]) or answer it without an upstream
/// ([`Request::respond`], [`Request::respond_event`]).
#[derive(Debug)]
pub struct Request {
    x: Exchange,
}

impl Deref for Request {
    type Target = Exchange;
    fn deref(&self) -> &Exchange {
        &self.x
    }
}

impl Request {
    pub(crate) fn new(ctx: u32) -> Self {
        Request { x: Exchange { ctx } }
    }

    /// A header of the client's request (case-insensitive name); `None`
    /// when absent.
    pub fn header(&self, name: &str) -> Result<Option<String>, Error> {
        header(sys::request_header, name)
    }

    /// Sets a header on the request sent upstream; an empty value removes
    /// it. [`Error::Invalid`] for names or values with CR, LF or NUL and
    /// for Host, Content-Length, Transfer-Encoding and Connection.
    pub fn set_header(&self, name: &str, value: &str) -> Result<(), Error> {
        set_header(sys::set_request_header, name, value)
    }

    /// Sets a header on the response to the client (also on a rejection).
    pub fn set_response_header(&self, name: &str, value: &str) -> Result<(), Error> {
        set_header(sys::set_response_header, name, value)
    }

    /// Sets the OpenAI-style error the client gets and returns
    /// [`Verdict::Reject`]: `return r.reject(400, "invalid_request_error",
    /// "code", "message")`. `status` is 400–599; an empty `typ` gets a
    /// default from the status. If the host refuses the error the SDK logs
    /// why and the request is still rejected, with the host's default 403.
    pub fn reject(&self, status: u16, typ: &str, code: &str, msg: &str) -> Verdict {
        reject(status, typ, code, msg)
    }

    /// Sets a whole reply as the request's answer and returns
    /// [`Verdict::Respond`], so a method can end with `return
    /// r.respond(200, body)`: the client gets `status` and `body` (JSON in
    /// the format of its endpoint: a `chat.completion` for
    /// chat/completions), the headers set with
    /// [`Request::set_response_header`], and nothing goes upstream. A
    /// streamed request (`"stream": true`) gets the reply as a stream.
    /// `status` is 200–599 and `body` at most [`MAX_ANSWER`] bytes; after
    /// [`Request::respond_event`] an empty `body` sets the stream's status.
    /// If the host refuses the answer (a status out of range, a body over
    /// the limit; [`Error::NotAllowed`] on an endpoint the gateway cannot
    /// answer, such as a passthrough) the SDK logs why and returns
    /// [`Verdict::Continue`]: the request goes upstream. Also from
    /// [`Plugin::on_call_response`](crate::Plugin::on_call_response),
    /// through [`CallResponse::request`](crate::CallResponse::request).
    pub fn respond(&self, status: u16, body: &[u8]) -> Verdict {
        let n = unsafe { sys::respond(i32::from(status), body.as_ptr(), body.len()) };
        if let Some(e) = Error::from_code(n) {
            crate::log(Level::Error, &format!("sdk: respond({}): {}", status, e));
            return Verdict::Continue;
        }
        Verdict::Respond
    }

    /// Appends one event to the request's answer, which becomes a stream:
    /// `data` is one SSE event's data (an OpenAI chunk for
    /// chat/completions), without `data: ` or the terminating `[DONE]`,
    /// which the host adds. End the method with [`Verdict::Respond`] (the
    /// status is 200 unless [`Request::respond`] sets another with an
    /// empty body). A request that did not ask for a stream gets the
    /// events assembled into one reply. [`Error::Invalid`] for an empty
    /// event, one holding CR or LF, `[DONE]`, one over
    /// [`MAX_ANSWER_EVENT`] bytes or taking the answer over
    /// [`MAX_ANSWER`], or after a whole reply was set;
    /// [`Error::NotAllowed`] outside the request phase or on an endpoint
    /// the gateway cannot answer.
    pub fn respond_event(&self, data: &[u8]) -> Result<(), Error> {
        status(unsafe { sys::respond_event(data.as_ptr(), data.len()) })
    }

    /// Replaces the text of a part of the request's conversation:
    /// `record` is the part's [`MessagePart::record`](crate::MessagePart::record).
    /// The host rewrites the request body at once (the part's JSON string
    /// re-encoded in place), so this plugin's later reads, the plugins
    /// after it and the upstream see the new text, and the prompt's sizes
    /// are the new body's (ABI.md, "Request rewriting"). [`Error::Absent`]:
    /// no such record; [`Error::Invalid`]: the part's text is not one JSON
    /// string in the body (an Anthropic tool_use input, a tool result
    /// joined from several parts), or the body would pass the gateway's
    /// size limit. Values read before the call keep their bytes; read them
    /// again for the new ones.
    pub fn set_message_text(&self, record: usize, text: &str) -> Result<(), Error> {
        if record > i32::MAX as usize {
            return Err(Error::Absent);
        }
        status(unsafe { sys::set_message_text(record as i32, text.as_ptr(), text.len()) })
    }
}

/// The response_headers phase's view: the upstream's status and headers
/// arrived, nothing was sent to the client yet.
#[derive(Debug)]
pub struct Response {
    x: Exchange,
    status: i32,
}

impl Deref for Response {
    type Target = Exchange;
    fn deref(&self) -> &Exchange {
        &self.x
    }
}

impl Response {
    pub(crate) fn new(ctx: u32, status: i32) -> Self {
        Response { x: Exchange { ctx }, status }
    }

    /// The upstream's HTTP status.
    pub fn status(&self) -> i32 {
        self.status
    }

    /// A header of the upstream's response; `None` when absent.
    pub fn header(&self, name: &str) -> Result<Option<String>, Error> {
        header(sys::response_header, name)
    }

    /// A header of the client's request; `None` when absent.
    pub fn request_header(&self, name: &str) -> Result<Option<String>, Error> {
        header(sys::request_header, name)
    }

    /// Sets a header on the response to the client; an empty value removes
    /// it. Validation as for [`Request::set_header`].
    pub fn set_response_header(&self, name: &str, value: &str) -> Result<(), Error> {
        set_header(sys::set_response_header, name, value)
    }

    /// Replaces the upstream's response with an OpenAI-style error; see
    /// [`Request::reject`].
    pub fn reject(&self, status: u16, typ: &str, code: &str, msg: &str) -> Verdict {
        reject(status, typ, code, msg)
    }
}

/// What the host knows of an exchange's usage; counts are −1 while
/// unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Completion tokens.
    pub completion_tokens: i64,
    /// The HTTP status sent to the client.
    pub status: i64,
    /// Bytes of reply text sent to the client.
    pub text_bytes: i64,
    /// The upstream reported usage (else the counts are the gateway's).
    pub reported: bool,
}

fn read_usage() -> Usage {
    let u = |f: i32| unsafe { sys::usage(f) };
    Usage {
        prompt_tokens: u(USAGE_PROMPT),
        completion_tokens: u(USAGE_COMPLETION),
        status: u(USAGE_STATUS),
        text_bytes: u(USAGE_TEXT_BYTES),
        reported: u(USAGE_REPORTED) == 1,
    }
}

/// The chunk phase's view of one reply event: a streamed event, or the
/// whole reply when it was not streamed ([`ChunkFlags::WHOLE`]).
#[derive(Debug)]
pub struct Chunk {
    x: Exchange,
    len: usize,
    flags: ChunkFlags,
}

impl Deref for Chunk {
    type Target = Exchange;
    fn deref(&self) -> &Exchange {
        &self.x
    }
}

impl Chunk {
    pub(crate) fn new(ctx: u32, len: i32, flags: u32) -> Self {
        Chunk { x: Exchange { ctx }, len: len.max(0) as usize, flags: ChunkFlags(flags) }
    }

    /// The event's flags.
    pub fn flags(&self) -> ChunkFlags {
        self.flags
    }

    /// Whether the reply was not streamed: the text is the whole reply, and
    /// [`Verdict::Replace`] replaces the reply's message content.
    pub fn is_whole(&self) -> bool {
        self.flags.contains(ChunkFlags::WHOLE)
    }

    /// Whether this is the stream's terminating event.
    pub fn is_done(&self) -> bool {
        self.flags.contains(ChunkFlags::DONE)
    }

    /// The length in bytes of the event's text, known without reading it.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the event has no text.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The event's text (the whole reply with [`ChunkFlags::WHOLE`]).
    pub fn text(&self) -> Result<Vec<u8>, Error> {
        let mut v = Vec::new();
        self.text_into(&mut v)?;
        Ok(v)
    }

    /// [`Chunk::text`] appended to `dst` — no allocation once `dst` has
    /// room, so a plugin can keep one buffer for every event.
    pub fn text_into(&self, dst: &mut Vec<u8>) -> Result<(), Error> {
        if self.len == 0 {
            return Ok(());
        }
        buffer::append(dst, self.len, |b, c| unsafe { sys::chunk_text(b, c) })
    }

    /// The event's tool-call deltas; empty, without a host call, when the
    /// event carries none.
    pub fn tool_calls(&self) -> Result<ToolCalls, Error> {
        let mut t = ToolCalls { value: Vec::new() };
        if self.flags.contains(ChunkFlags::TOOL_CALLS) {
            read_into(&mut t.value, 0, |b, c| unsafe { sys::chunk_tool_calls(b, c) })?;
        }
        Ok(t)
    }

    /// A header of the upstream's response; `None` when absent.
    pub fn response_header(&self, name: &str) -> Result<Option<String>, Error> {
        header(sys::response_header, name)
    }

    /// The exchange's usage as far as it is known at this event.
    pub fn usage(&self) -> Usage {
        read_usage()
    }

    /// Appends to this callback's replacement text, used with
    /// [`Verdict::Replace`] and [`Verdict::Stop`] (≤ 1 MiB per callback).
    pub fn emit(&self, text: &[u8]) -> Result<(), Error> {
        status(unsafe { sys::emit(text.as_ptr(), text.len()) })
    }

    /// Makes `text` this event's text and returns [`Verdict::Replace`].
    /// A host error is logged.
    pub fn replace(&self, text: &[u8]) -> Verdict {
        if let Err(e) = self.emit(text) {
            crate::log(Level::Error, &format!("sdk: emit: {}", e));
        }
        Verdict::Replace
    }

    /// Sets the finish_reason sent with [`Verdict::Stop`] (default
    /// `content_filter`); [`Error::Invalid`] for more than 64 bytes or
    /// non-printable ones.
    pub fn set_finish_reason(&self, reason: &str) -> Result<(), Error> {
        status(unsafe { sys::set_finish_reason(reason.as_ptr(), reason.len()) })
    }

    /// Ends the reply and returns [`Verdict::Stop`]: `correction`, if not
    /// empty, is sent as a final text delta with `finish_reason` (""
    /// for the default, `content_filter`). Host errors are logged.
    pub fn stop(&self, correction: &[u8], finish_reason: &str) -> Verdict {
        if !correction.is_empty() {
            if let Err(e) = self.emit(correction) {
                crate::log(Level::Error, &format!("sdk: emit: {}", e));
            }
        }
        if !finish_reason.is_empty() {
            if let Err(e) = self.set_finish_reason(finish_reason) {
                crate::log(Level::Error, &format!("sdk: set_finish_reason: {}", e));
            }
        }
        Verdict::Stop
    }
}

/// The event's tool-call deltas as `chunk_tool_calls` renders them;
/// iterate over them with [`ToolCalls::deltas`].
#[derive(Clone, Debug, Default)]
pub struct ToolCalls {
    value: Vec<u8>,
}

impl ToolCalls {
    /// The deltas in order; `Err(Malformed)` (once, then the end) if the
    /// host's value cannot be parsed.
    pub fn deltas(&self) -> ToolCallDeltas<'_> {
        ToolCallDeltas::new(&self.value)
    }

    /// The raw value (ABI.md, "Tool-call deltas").
    pub fn as_bytes(&self) -> &[u8] {
        &self.value
    }
}

/// The end phase's view: the exchange is over.
#[derive(Debug)]
pub struct End {
    x: Exchange,
    flags: EndFlags,
}

impl Deref for End {
    type Target = Exchange;
    fn deref(&self) -> &Exchange {
        &self.x
    }
}

impl End {
    pub(crate) fn new(ctx: u32, flags: u32) -> Self {
        End { x: Exchange { ctx }, flags: EndFlags(flags) }
    }

    /// How the exchange ended.
    pub fn flags(&self) -> EndFlags {
        self.flags
    }

    /// The exchange's final usage.
    pub fn usage(&self) -> Usage {
        read_usage()
    }

    /// A header of the upstream's response; `None` when absent (also when
    /// there was no upstream response).
    pub fn response_header(&self, name: &str) -> Result<Option<String>, Error> {
        header(sys::response_header, name)
    }
}

fn header(get: unsafe extern "C" fn(*const u8, usize, *mut u8, usize) -> i32, name: &str) -> Result<Option<String>, Error> {
    buffer::read_string_opt(|b, c| unsafe { get(name.as_ptr(), name.len(), b, c) })
}

fn set_header(set: unsafe extern "C" fn(*const u8, usize, *const u8, usize) -> i32, name: &str, value: &str) -> Result<(), Error> {
    status(unsafe { set(name.as_ptr(), name.len(), value.as_ptr(), value.len()) })
}

fn reject(status: u16, typ: &str, code: &str, msg: &str) -> Verdict {
    let n = unsafe {
        sys::reject(i32::from(status), typ.as_ptr(), typ.len(), code.as_ptr(), code.len(), msg.as_ptr(), msg.len())
    };
    if let Some(e) = Error::from_code(n) {
        crate::log(Level::Error, &format!("sdk: reject({}): {}", status, e));
    }
    Verdict::Reject
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn respond_verdict() {
        assert_eq!(Verdict::Respond as i32, 9);
        assert_eq!(Verdict::Respond.name(), "respond");
    }

    // Off wasm32 every import answers NOT_ALLOWED, as a gateway does on an
    // endpoint it cannot answer: respond logs and lets the request go on.
    #[test]
    fn refused_answers() {
        let r = Request::new(1);
        assert_eq!(r.respond(200, b"{}"), Verdict::Continue);
        assert_eq!(r.respond_event(b"{}"), Err(Error::NotAllowed));
    }
}
