//! What every phase sees: [`Exchange`], which the phase objects of
//! `phases.rs` dereference to.

use crate::abi::*;
use crate::buffer::{self, read_into};
use crate::records::MessageParts;
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
    pub(crate) ctx: u32,
}

/// The endpoint of an MCP JSON-RPC message.
const ENDPOINT_MCP: &str = "mcp";

/// Splits an MCP tool call's model, `mcp:{server}/{tool}`.
fn split_tool_model(model: &str) -> Option<(String, String)> {
    let (server, tool) = model.strip_prefix("mcp:")?.split_once('/')?;
    if server.is_empty() || tool.is_empty() {
        return None;
    }
    Some((server.to_string(), tool.to_string()))
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

    /// The API called: "chat/completions", "completions", "embeddings",
    /// "messages", "responses", or "mcp" for an MCP JSON-RPC message
    /// ([`Exchange::tool_call`]).
    pub fn endpoint(&self) -> Result<String, Error> {
        field(FIELD_ENDPOINT)
    }

    /// The MCP tool a request of the "mcp" endpoint calls: the server and
    /// the tool its model names (`mcp:{server}/{tool}`, split at the first
    /// `/`). `None` for a request of another endpoint and for an MCP
    /// message that is not a `tools/call` (its model is `mcp:{server}`).
    /// The call's arguments are the request's [`Exchange::messages`]
    /// (ABI.md, "MCP tool calls").
    pub fn tool_call(&self) -> Result<Option<(String, String)>, Error> {
        if self.endpoint()? != ENDPOINT_MCP {
            return Ok(None);
        }
        Ok(split_tool_model(&self.model()?))
    }

    /// The request's id, the X-Request-Id the client gets.
    pub fn request_id(&self) -> Result<String, Error> {
        field(FIELD_REQUEST_ID)
    }

    /// The upstream the route chose.
    pub fn upstream(&self) -> Result<String, Error> {
        field(FIELD_UPSTREAM)
    }

    /// The raw request JSON as the client sent it, or as a plugin
    /// rewrote it ([`Request::set_message_text`](crate::Request::set_message_text)).
    /// Prefer [`Exchange::messages`] to scanning it.
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

    /// The request body's length less the image payloads: no more than
    /// this many tokens of the prompt are text.
    pub fn prompt_bytes(&self) -> i64 {
        unsafe { sys::request_int(INT_PROMPT_BYTES) }.max(0)
    }

    /// The number of image parts in the request.
    pub fn image_count(&self) -> i64 {
        unsafe { sys::request_int(INT_IMAGES) }.max(0)
    }

    /// The number of parts whose tokens the body cannot bound (files,
    /// stored conversations, server-side tools).
    pub fn unbounded_parts(&self) -> i64 {
        unsafe { sys::request_int(INT_UNBOUNDED) }.max(0)
    }

    /// The number of tools the request declares.
    pub fn tool_count(&self) -> i64 {
        unsafe { sys::request_int(INT_TOOLS) }.max(0)
    }

    /// Of the declared tools, those whose definition the provider supplies.
    pub fn builtin_tool_count(&self) -> i64 {
        unsafe { sys::request_int(INT_BUILTIN_TOOLS) }.max(0)
    }

    /// How many completions the reply holds (`n`), at least 1.
    pub fn choices(&self) -> i64 {
        unsafe { sys::request_int(INT_CHOICES) }.max(1)
    }

    /// The host's upper bound of the prompt's tokens for the request's
    /// model; `None` when there is none (unbounded parts and no known
    /// context window). Never below the prompt's true count (sdk/ABI.md,
    /// "Prompt bound").
    pub fn prompt_tokens_bound(&self) -> Option<i64> {
        Some(unsafe { sys::request_int(INT_PROMPT_TOKENS_BOUND) }).filter(|&n| n >= 0)
    }

    /// The model's context window, from its price; `None` when unknown.
    pub fn model_context_window(&self) -> Option<i64> {
        Some(unsafe { sys::request_int(INT_MODEL_CONTEXT_WINDOW) }).filter(|&n| n > 0)
    }

    /// The most output tokens a reply of the model has without
    /// max_tokens, from its price; `None` when unknown.
    pub fn model_max_output(&self) -> Option<i64> {
        Some(unsafe { sys::request_int(INT_MODEL_MAX_OUTPUT) }).filter(|&n| n > 0)
    }

    /// The most input tokens one image counts for, from the model's price;
    /// `None` when unknown.
    pub fn model_image_tokens(&self) -> Option<i64> {
        Some(unsafe { sys::request_int(INT_MODEL_IMAGE_TOKENS) }).filter(|&n| n > 0)
    }

    /// Whether the model's replies may hold hidden reasoning tokens (so
    /// streamed text does not bound the output); `None` when the model has
    /// no price.
    pub fn model_reasoning(&self) -> Option<bool> {
        match unsafe { sys::request_int(INT_MODEL_REASONING) } {
            n if n < 0 => None,
            n => Some(n == 1),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_models() {
        let some = |s: &str, t: &str| Some((s.to_string(), t.to_string()));
        assert_eq!(split_tool_model("mcp:files/read_file"), some("files", "read_file"));
        assert_eq!(split_tool_model("mcp:files/ns/tool"), some("files", "ns/tool"));
        for m in ["mcp:files", "mcp:/tool", "mcp:files/", "gpt-4o", "files/read"] {
            assert_eq!(split_tool_model(m), None, "{m}");
        }
    }
}
