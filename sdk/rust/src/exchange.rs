//! What the phases see: [`Exchange`] (every phase) and the four phase
//! objects built on it, [`Request`], [`Response`], [`Chunk`] and [`End`].

use std::ops::Deref;

use crate::abi::*;
use crate::buffer::{self, read_into};
use crate::records::{MessageParts, ToolCallDeltas};
use crate::sys;

/// What every phase can see of the request being served: its facts as the
/// gateway parsed them, its conversation, the tenant, the facts plugins
/// share, and this plugin's private state. [`Request`], [`Response`],
/// [`Chunk`] and [`End`] dereference to it.
///
/// Two callbacks of one request may run on different instances of the
/// plugin, and one instance serves many requests: keep per-request data in
/// [`Exchange::set_state`] or [`Exchange::set_fact`], never in the plugin
/// value.
#[derive(Debug)]
pub struct Exchange {
    ctx: u32,
}

fn field(f: i32) -> Result<String, Error> {
    buffer::read_string(|b, c| unsafe { sys::request_field(f, b, c) })
}

impl Exchange {
    /// The request's id among those in flight (the ABI's `ctx`), the same
    /// in every phase of one request.
    pub fn ctx(&self) -> u32 {
        self.ctx
    }

    /// The model the client asked for ("" if none).
    pub fn model(&self) -> Result<String, Error> {
        field(FIELD_MODEL)
    }

    /// The API called: "chat/completions", "completions" or "embeddings".
    pub fn endpoint(&self) -> Result<String, Error> {
        field(FIELD_ENDPOINT)
    }

    /// The request's id, the X-Request-Id the client gets.
    pub fn request_id(&self) -> Result<String, Error> {
        field(FIELD_REQUEST_ID)
    }

    /// The upstream the route chose.
    pub fn upstream(&self) -> Result<String, Error> {
        field(FIELD_UPSTREAM)
    }

    /// The raw request JSON as the client sent it. Prefer
    /// [`Exchange::messages`] to scanning it.
    pub fn body(&self) -> Result<Vec<u8>, Error> {
        let hint = unsafe { sys::request_int(INT_BODY_BYTES) }.max(0) as usize;
        buffer::read(hint, |b, c| unsafe { sys::request_field(FIELD_BODY, b, c) })
    }

    /// The request's conversation, one record per message part (text, tool
    /// call, tool result), as the host extracted it from the body.
    pub fn messages(&self) -> Result<Messages, Error> {
        let mut m = Messages { value: Vec::new() };
        self.messages_into(&mut m)?;
        Ok(m)
    }

    /// [`Exchange::messages`] into `m`, reusing its buffer.
    pub fn messages_into(&self, m: &mut Messages) -> Result<(), Error> {
        read_into(&mut m.value, 0, |b, c| unsafe { sys::request_messages(b, c) })
    }

    /// Whether the client asked for a streamed reply.
    pub fn stream(&self) -> bool {
        unsafe { sys::request_int(INT_STREAM) == 1 }
    }

    /// The request's max_tokens (or max_completion_tokens); `None` when the
    /// client set none.
    pub fn max_tokens(&self) -> Option<i64> {
        Some(unsafe { sys::request_int(INT_MAX_TOKENS) }).filter(|&n| n >= 0)
    }

    /// The number of messages (or prompts, or inputs) in the request.
    pub fn message_count(&self) -> i64 {
        unsafe { sys::request_int(INT_MESSAGES) }.max(0)
    }

    /// The gateway's estimate of the prompt's tokens.
    pub fn prompt_tokens_estimate(&self) -> i64 {
        unsafe { sys::request_int(INT_PROMPT_TOKENS) }.max(0)
    }

    /// The size of the request body in bytes.
    pub fn body_bytes(&self) -> i64 {
        unsafe { sys::request_int(INT_BODY_BYTES) }.max(0)
    }

    /// The number of bytes of prompt text in the request.
    pub fn prompt_chars(&self) -> i64 {
        unsafe { sys::request_int(INT_PROMPT_CHARS) }.max(0)
    }

    /// The request's tenant as the host's tenant service resolved it;
    /// `None` when none is resolved (yet). Twelve host calls.
    pub fn tenant(&self) -> Result<Option<Tenant>, Error> {
        let s = |f: i32| buffer::read_string_opt(|b, c| unsafe { sys::tenant_field(f, b, c) });
        let i = |f: i32| unsafe { sys::tenant_int(f) };
        let id = match s(TENANT_ID)? {
            Some(id) => id,
            None => return Ok(None),
        };
        Ok(Some(Tenant {
            id,
            key_id: s(TENANT_KEY_ID)?.unwrap_or_default(),
            plan: s(TENANT_PLAN)?.unwrap_or_default(),
            status: s(TENANT_STATUS)?.unwrap_or_default(),
            rpm: i(TENANT_RPM),
            tpm: i(TENANT_TPM),
            monthly_budget_micros: i(TENANT_BUDGET_MICROS),
            max_tokens: i(TENANT_MAX_TOKENS),
            plan_rpm: i(TENANT_PLAN_RPM),
            plan_tpm: i(TENANT_PLAN_TPM),
            key_rpm: i(TENANT_KEY_RPM),
            key_tpm: i(TENANT_KEY_TPM),
        }))
    }

    /// Opts this plugin out of later phases of this request
    /// (`RESPONSE_HEADERS`, `CHUNK`, `END`), so the host does not call it
    /// there. From the request, response_headers or chunk phase.
    pub fn skip_phases(&self, p: Phases) -> Result<(), Error> {
        status(unsafe { sys::skip_phases(p.0 as i32) })
    }

    /// The fact stored under `key` by any plugin of this request; `None`
    /// when there is none.
    pub fn fact(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        buffer::read_opt(|b, c| unsafe { sys::fact(key.as_ptr(), key.len(), b, c) })
    }

    /// Stores a fact for this request, replacing any with the same key.
    /// Keys ≤ 64 bytes, values ≤ 64 KiB, ≤ 64 facts, else
    /// [`Error::Invalid`].
    pub fn set_fact(&self, key: &str, value: &[u8]) -> Result<(), Error> {
        status(unsafe { sys::set_fact(key.as_ptr(), key.len(), value.as_ptr(), value.len()) })
    }

    /// This plugin's private state for this request, as the last
    /// [`Exchange::set_state`] of any callback of the request left it;
    /// `None` when none was set.
    pub fn state(&self) -> Result<Option<Vec<u8>>, Error> {
        buffer::read_opt(|b, c| unsafe { sys::state_get(b, c) })
    }

    /// [`Exchange::state`] into `dst`, reusing its buffer; `false` (and
    /// `dst` empty) when none was set.
    pub fn state_into(&self, dst: &mut Vec<u8>) -> Result<bool, Error> {
        match read_into(dst, 0, |b, c| unsafe { sys::state_get(b, c) }) {
            Ok(()) => Ok(true),
            Err(Error::Absent) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Replaces this plugin's private state for this request (≤ 1 MiB, else
    /// [`Error::Invalid`]). The host copies it.
    pub fn set_state(&self, state: &[u8]) -> Result<(), Error> {
        status(unsafe { sys::state_set(state.as_ptr(), state.len()) })
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

/// The tenant snapshot (`tenant_field`, `tenant_int`). Limits are −1 when
/// not set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tenant {
    /// The tenant's id.
    pub id: String,
    /// The id of the API key the request used.
    pub key_id: String,
    /// The tenant's plan.
    pub plan: String,
    /// The tenant's status, as the tenant service reports it.
    pub status: String,
    /// The key's requests per minute where set, else the plan's.
    pub rpm: i64,
    /// The key's tokens per minute where set, else the plan's.
    pub tpm: i64,
    /// The monthly budget in millionths of the currency unit.
    pub monthly_budget_micros: i64,
    /// The key's cap on max_tokens where set, else the plan's.
    pub max_tokens: i64,
    /// The plan's requests per minute.
    pub plan_rpm: i64,
    /// The plan's tokens per minute.
    pub plan_tpm: i64,
    /// The key's own requests per minute.
    pub key_rpm: i64,
    /// The key's own tokens per minute.
    pub key_tpm: i64,
}

/// The request's conversation as `request_messages` renders it; iterate
/// over it with [`Messages::parts`].
#[derive(Clone, Debug, Default)]
pub struct Messages {
    value: Vec<u8>,
}

impl Messages {
    /// The message parts in conversation order. Each item is a part, or
    /// `Err(Malformed)` (once, then the end) if the host's value cannot be
    /// parsed — which only a host bug can cause; treat it as a failure.
    pub fn parts(&self) -> MessageParts<'_> {
        MessageParts::new(&self.value)
    }

    /// The raw value (ABI.md, request_messages).
    pub fn as_bytes(&self) -> &[u8] {
        &self.value
    }
}

/// The request phase's view: the request was parsed and nothing was sent
/// upstream yet.
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
