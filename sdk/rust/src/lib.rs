//! Guest SDK for Tollgate plugins in Rust.
//!
//! A Tollgate plugin is a WebAssembly module the gateway calls in the
//! phases of each request (sdk/ABI.md is the contract). With this crate a
//! plugin is a type implementing [`Plugin`], exported with
//! [`export_plugin!`]:
//!
//! ```ignore
//! use tollgate::{Chunk, Phases, Plugin, Request, Verdict};
//!
//! #[derive(Default)]
//! struct Guard;
//!
//! impl Plugin for Guard {
//!     const PHASES: Phases = Phases::REQUEST;
//!     fn on_request(&mut self, r: &Request) -> Verdict {
//!         match r.messages() {
//!             Ok(m) if m.parts().any(|p| matches!(p, Ok(p) if p.text == b"hi")) => {
//!                 r.reject(400, "invalid_request_error", "no_hi", "No greetings.")
//!             }
//!             Ok(_) => Verdict::Continue,
//!             Err(e) => tollgate::fail_callback(&format!("reading the messages: {}", e)),
//!         }
//!     }
//! }
//!
//! tollgate::export_plugin!(Guard);
//! ```
//!
//! Build it for `wasm32-unknown-unknown` as a `cdylib` with
//! `-C panic=abort` (README.md). The crate has no dependencies and builds
//! with rustc 1.63.
//!
//! Every host import is wrapped: values are read into buffers the guest
//! owns, grown and read again when the host reports a longer value, and
//! the ABI's negative codes come back as [`Error`]. The SDK does not panic;
//! a panic in a plugin traps the instance (see [`Plugin`]).

#![warn(missing_docs)]

mod abi;
mod buffer;
mod dispatch;
mod exchange;
mod host;
pub mod json;
mod phases;
mod plugin;
mod records;
mod sys;

pub use abi::{ChunkFlags, EndFlags, Error, Level, Phases, Verdict, ABI_VERSION};
pub use dispatch::{
    append_http_request, dispatch, dispatch_http, expect_response, CallId, CallResponse, HttpRequest, MAX_CACHE_TTL,
    MAX_EXPECT_PREFIX, MAX_EXPECT_PREFIXES,
};
pub use exchange::{Exchange, Messages, Tenant};
pub use phases::{Chunk, End, Request, Response, ToolCalls, Usage, MAX_ANSWER, MAX_ANSWER_EVENT};
pub use host::{call, fail_callback, log, metric_add};
pub use plugin::Plugin;
pub use records::{Malformed, MessagePart, MessageParts, PartKind, ToolCallDelta, ToolCallDeltas};

/// What [`export_plugin!`] expands to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::plugin::rt;
    pub use crate::plugin::Slot;
}
