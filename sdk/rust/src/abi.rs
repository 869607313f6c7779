//! The constants of sdk/ABI.md: verdicts, phases, flags, log levels and
//! result codes.

use std::fmt;
use std::ops::BitOr;

/// The plugin ABI this SDK implements (sdk/ABI.md); the
/// `tollgate_abi_version` export returns it.
pub const ABI_VERSION: i32 = 1;

/// A phase callback's answer to the host. Which verdicts a phase accepts is
/// part of the ABI; the host treats any other as a plugin failure.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Go on. In the chunk phase the event is forwarded, after any events
    /// held before it. Valid in every phase.
    Continue = 0,
    /// Answer the client with the error set by `reject` (a default 403 if
    /// none) and stop. Request and response_headers phases only.
    Reject = 1,
    /// Keep this event in the host; it and every later event wait, in
    /// order, until a Release, Continue or Replace. Chunk phase only.
    Hold = 2,
    /// Forward every held event and this one. Chunk phase only.
    Release = 3,
    /// This event's text becomes the bytes emitted during this callback
    /// (empty if none); held events go first. Chunk phase only.
    Replace = 4,
    /// End the reply now: held events and this one are dropped, the emitted
    /// text (if any) is sent as a final delta with the finish reason set by
    /// `set_finish_reason` (default `content_filter`), and the upstream
    /// request is canceled. Chunk phase only.
    Stop = 5,
    /// The verdict waits on the calls this callback dispatched
    /// ([`dispatch`](crate::dispatch)): [`Plugin::on_call_response`](crate::Plugin::on_call_response)
    /// gives it once they answer. Request, response_headers and chunk
    /// phases (and end, see [`Plugin::on_end`](crate::Plugin::on_end));
    /// without a call outstanding the callback fails.
    Pause = 6,
    /// The callback is a plugin failure: the policy's `on_error` decides
    /// (fail_closed: the client gets an error; fail_open: as `Continue`).
    /// Every phase; how a plugin leaves a call-out's failure to the
    /// operator.
    Fail = 7,
    /// [`Verdict::Pause`] for an `on_request` whose calls may wait for the
    /// plugins after it: their `on_request` runs before the response
    /// reaches [`Plugin::on_call_response`](crate::Plugin::on_call_response),
    /// and the host may start this method's calls together with theirs (a
    /// rate limit's admission and a budget's hold in one round trip to the
    /// store). Request phase only, from the phase method itself (from
    /// `on_call_response` it counts as `Pause`); without a dispatched
    /// call the callback fails. What the response handler sets is not
    /// seen by the later plugins' `on_request`, and when a later plugin
    /// rejects the request before the calls started they never start.
    Defer = 8,
    /// Answer the request with the reply set by
    /// [`Request::respond`](crate::Request::respond) or
    /// [`Request::respond_event`](crate::Request::respond_event): nothing
    /// goes upstream, later plugins' `on_request` do not run, and the
    /// response_headers, chunk and end phases of every plugin run on the
    /// answer as on an upstream's reply. Request phase only (its
    /// `on_call_response` included); without an answer set the callback
    /// fails. Best through [`Request::respond`](crate::Request::respond).
    Respond = 9,
}

impl Verdict {
    /// The verdict's ABI name in lower case ("continue", ...).
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Continue => "continue",
            Verdict::Reject => "reject",
            Verdict::Hold => "hold",
            Verdict::Release => "release",
            Verdict::Replace => "replace",
            Verdict::Stop => "stop",
            Verdict::Pause => "pause",
            Verdict::Fail => "fail",
            Verdict::Defer => "defer",
            Verdict::Respond => "respond",
        }
    }
}

macro_rules! bitset {
    ($(#[$doc:meta])* $name:ident { $($(#[$cdoc:meta])* $c:ident = $v:expr,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name(pub u32);

        impl $name {
            /// The empty set.
            pub const NONE: $name = $name(0);
            $( $(#[$cdoc])* pub const $c: $name = $name($v); )*

            /// Whether every bit of `other` is set in `self`.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// The union of both sets, usable in a `const`.
            pub const fn union(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }
        }

        impl BitOr for $name {
            type Output = $name;
            fn bitor(self, other: $name) -> $name {
                self.union(other)
            }
        }
    };
}

bitset! {
    /// A set of phases: the bitmask of the `tollgate_phases` export and of
    /// `skip_phases`.
    Phases {
        /// on_request: the parsed request, before anything goes upstream.
        REQUEST = 1,
        /// on_response_headers: the upstream's status and headers.
        RESPONSE_HEADERS = 2,
        /// on_chunk: every streamed event, or the whole reply once.
        CHUNK = 4,
        /// on_end: the exchange is over.
        END = 8,
    }
}

bitset! {
    /// What one event passed to the chunk phase carries (ABI.md, "on_chunk
    /// flags").
    ChunkFlags {
        /// The event carries a text delta.
        TEXT = 1,
        /// The event carries tool-call deltas.
        TOOL_CALLS = 2,
        /// The event carries a finish_reason.
        FINISH = 4,
        /// The event carries usage.
        USAGE = 8,
        /// Not a stream: the text is the whole reply.
        WHOLE = 16,
        /// The stream's terminating event.
        DONE = 32,
        /// The event carries the assistant role (the first event).
        ROLE = 64,
    }
}

bitset! {
    /// How an exchange ended (ABI.md, "on_end flags").
    EndFlags {
        /// The upstream reply was complete.
        COMPLETED = 1,
        /// The client disconnected.
        CLIENT_GONE = 2,
        /// The upstream failed or timed out.
        UPSTREAM_ERROR = 4,
        /// A plugin stopped the stream.
        STOPPED = 8,
        /// The request was rejected before or instead of forwarding.
        REJECTED = 16,
        /// The request was cancelled (`POST /v1/requests/{id}/cancel`).
        CANCELLED = 32,
    }
}

/// The severity of a [`log`](crate::log) line.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// Detail for debugging a plugin.
    Debug = 0,
    /// Normal events.
    Info = 1,
    /// Something unexpected the plugin handled.
    Warn = 2,
    /// A failure.
    Error = 3,
}

/// A failed host call: the ABI's negative result codes, and the two ways
/// the SDK itself can find a value unusable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// −1 ABSENT: there is no such value (a header, fact, tenant, ...).
    Absent,
    /// −2 INVALID: a bad argument, such as a header value with CR or LF, a
    /// protected header, or a value over one of the host's limits.
    Invalid,
    /// −3 NOT_ALLOWED: the import is not available in this phase.
    NotAllowed,
    /// −4 UNAVAILABLE: the service is not configured or is down (for a
    /// dispatched call: connection refused or reset, DNS, TLS).
    Unavailable,
    /// −5 TIMEOUT: a dispatched call's timeout passed.
    Timeout,
    /// −6 TOO_LARGE: a dispatched call's response was over the host's cap.
    TooLarge,
    /// −7 BUSY: too many calls in flight (16 outstanding for the plugin and
    /// request, or the host's in-flight cap for the plugin).
    Busy,
    /// Another negative code, from a newer host.
    Host(i32),
    /// The value's length kept changing between reads, which the ABI rules
    /// out.
    Unstable,
    /// A record value (tool-call deltas, message parts) the SDK could not
    /// parse.
    Malformed,
}

impl Error {
    /// The error for a negative host result; `None` for `n ≥ 0`.
    pub fn from_code(n: i32) -> Option<Error> {
        match n {
            n if n >= 0 => None,
            -1 => Some(Error::Absent),
            -2 => Some(Error::Invalid),
            -3 => Some(Error::NotAllowed),
            -4 => Some(Error::Unavailable),
            -5 => Some(Error::Timeout),
            -6 => Some(Error::TooLarge),
            -7 => Some(Error::Busy),
            n => Some(Error::Host(n)),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Absent => f.write_str("tollgate: absent"),
            Error::Invalid => f.write_str("tollgate: invalid argument"),
            Error::NotAllowed => f.write_str("tollgate: not allowed in this phase"),
            Error::Unavailable => f.write_str("tollgate: unavailable"),
            Error::Timeout => f.write_str("tollgate: timed out"),
            Error::TooLarge => f.write_str("tollgate: response too large"),
            Error::Busy => f.write_str("tollgate: busy"),
            Error::Host(n) => write!(f, "tollgate: host error {}", n),
            Error::Unstable => {
                f.write_str("tollgate: the value's length kept changing between reads")
            }
            Error::Malformed => f.write_str("tollgate: malformed value from the host"),
        }
    }
}

impl std::error::Error for Error {}

/// A host status result as a `Result`: `Ok` for `n ≥ 0`.
pub(crate) fn status(n: i32) -> Result<(), Error> {
    match Error::from_code(n) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

// Request fields (request_field / request_int).
pub(crate) const FIELD_MODEL: i32 = 1;
pub(crate) const FIELD_ENDPOINT: i32 = 2;
pub(crate) const FIELD_REQUEST_ID: i32 = 3;
pub(crate) const FIELD_BODY: i32 = 4;
pub(crate) const FIELD_UPSTREAM: i32 = 5;

pub(crate) const INT_STREAM: i32 = 1;
pub(crate) const INT_MAX_TOKENS: i32 = 2;
pub(crate) const INT_MESSAGES: i32 = 3;
pub(crate) const INT_PROMPT_TOKENS: i32 = 4;
pub(crate) const INT_BODY_BYTES: i32 = 5;
pub(crate) const INT_PROMPT_CHARS: i32 = 6;
pub(crate) const INT_PROMPT_BYTES: i32 = 7;
pub(crate) const INT_IMAGES: i32 = 8;
pub(crate) const INT_UNBOUNDED: i32 = 9;
pub(crate) const INT_TOOLS: i32 = 10;
pub(crate) const INT_BUILTIN_TOOLS: i32 = 11;
pub(crate) const INT_CHOICES: i32 = 12;
pub(crate) const INT_PROMPT_TOKENS_BOUND: i32 = 13;
pub(crate) const INT_MODEL_CONTEXT_WINDOW: i32 = 14;
pub(crate) const INT_MODEL_MAX_OUTPUT: i32 = 15;
pub(crate) const INT_MODEL_IMAGE_TOKENS: i32 = 16;
pub(crate) const INT_MODEL_REASONING: i32 = 17;

// Tenant fields (tenant_field / tenant_int).
pub(crate) const TENANT_ID: i32 = 1;
pub(crate) const TENANT_KEY_ID: i32 = 2;
pub(crate) const TENANT_PLAN: i32 = 3;
pub(crate) const TENANT_STATUS: i32 = 4;

pub(crate) const TENANT_RPM: i32 = 1;
pub(crate) const TENANT_TPM: i32 = 2;
pub(crate) const TENANT_BUDGET_MICROS: i32 = 3;
pub(crate) const TENANT_MAX_TOKENS: i32 = 4;
pub(crate) const TENANT_PLAN_RPM: i32 = 5;
pub(crate) const TENANT_PLAN_TPM: i32 = 6;
pub(crate) const TENANT_KEY_RPM: i32 = 7;
pub(crate) const TENANT_KEY_TPM: i32 = 8;

// Usage fields (usage).
pub(crate) const USAGE_PROMPT: i32 = 1;
pub(crate) const USAGE_COMPLETION: i32 = 2;
pub(crate) const USAGE_STATUS: i32 = 3;
pub(crate) const USAGE_TEXT_BYTES: i32 = 4;
pub(crate) const USAGE_REPORTED: i32 = 5;
