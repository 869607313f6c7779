//! The [`Plugin`] trait and the runtime behind
//! [`export_plugin!`](crate::export_plugin).

use std::cell::UnsafeCell;

use crate::abi::{Phases, Verdict, ABI_VERSION};
use crate::buffer;
use crate::dispatch::{self, CallResponse};
use crate::phases::{Chunk, End, Request, Response};
use crate::sys;

/// A Tollgate plugin. Implement the phase methods the plugin takes part in,
/// list those phases in [`Plugin::PHASES`], and export the type with
/// [`export_plugin!`](crate::export_plugin).
///
/// Each instance of the module holds one value of the type, made with
/// `Default::default()` and then configured by
/// [`on_configure`](Plugin::on_configure). The value serves many requests,
/// one callback at a time, and two callbacks of one request may run on
/// different instances: keep per-request data in the exchange's state or
/// facts, and use `&mut self` only for what every request shares (a
/// scratch buffer, the parsed config).
///
/// A panic traps the instance: the callback fails and the plugin's
/// `on_error` applies (fail_closed by default). The SDK's panic hook logs
/// the panic's message at error level first. The SDK itself does not
/// panic: its calls return `Result`s.
pub trait Plugin: Default + 'static {
    /// The phases the plugin handles, e.g. `Phases::REQUEST.union(Phases::CHUNK)`;
    /// `tollgate_phases` returns it and the host calls only those
    /// methods. A method left out of it is never called, whatever it does.
    const PHASES: Phases;

    /// Called once per instance, before any phase, with the plugin's config
    /// from the policy as JSON (`{}` when the policy gives none). An `Err`
    /// refuses the config: its message goes to the host's `fail` and the
    /// plugin does not load. Say what is wrong and what to write.
    fn on_configure(&mut self, config: &[u8]) -> Result<(), String> {
        let _ = config;
        Ok(())
    }

    /// The request phase: the request was parsed, nothing was sent
    /// upstream yet. `Continue` or `Reject` (best through
    /// [`Request::reject`]).
    fn on_request(&mut self, r: &Request) -> Verdict {
        let _ = r;
        Verdict::Continue
    }

    /// The response_headers phase: the upstream's status and headers
    /// arrived. `Continue` or `Reject`.
    fn on_response_headers(&mut self, r: &Response) -> Verdict {
        let _ = r;
        Verdict::Continue
    }

    /// The chunk phase: once per streamed event, or once with the whole
    /// reply ([`ChunkFlags::WHOLE`](crate::ChunkFlags::WHOLE)). `Continue`,
    /// `Hold`, `Release`, `Replace` or `Stop`.
    fn on_chunk(&mut self, c: &Chunk) -> Verdict {
        let _ = c;
        Verdict::Continue
    }

    /// The end phase: the exchange is over and its usage is known. If it
    /// dispatched calls ([`dispatch`](crate::dispatch)), the SDK answers
    /// [`Verdict::Pause`] for it, so the calls are made and their
    /// responses handed to [`Plugin::on_call_response`].
    fn on_end(&mut self, e: &End) {
        let _ = e;
    }

    /// The response to a call a phase method dispatched before answering
    /// [`Verdict::Pause`] (or [`Verdict::Defer`]), one call at a time in
    /// dispatch order, in the dispatching phase
    /// ([`CallResponse::request`], [`CallResponse::chunk`], …). The
    /// verdict is the phase's: `Pause` waits for the next response (and
    /// for calls dispatched here; `Defer` counts as `Pause` here); any
    /// other decides, and the responses still due are dropped, their
    /// calls cancelled. The default answers `Pause`: the
    /// calls are made, and the phase fails after the last one (except in
    /// end, whose verdicts are ignored).
    fn on_call_response(&mut self, r: &CallResponse) -> Verdict {
        let _ = r;
        Verdict::Pause
    }
}

/// The instance's plugin value, in a static that
/// [`export_plugin!`](crate::export_plugin) defines. An instance runs one
/// callback at a time on its one thread (wasm32-unknown-unknown has no
/// threads), so the value is never borrowed twice.
#[doc(hidden)]
pub struct Slot<P>(UnsafeCell<Option<P>>);

// SAFETY: wasm32-unknown-unknown modules run on one thread, and the host
// never re-enters an instance during a callback.
unsafe impl<P> Sync for Slot<P> {}

impl<P: Plugin> Slot<P> {
    #[doc(hidden)]
    pub const fn new() -> Self {
        Slot(UnsafeCell::new(None))
    }

    /// The plugin value, made with `Default` if `on_configure` did not run.
    #[allow(clippy::mut_from_ref)]
    fn get(&self) -> &mut P {
        // SAFETY: one callback at a time (see Slot), and the reference does
        // not outlive the callback.
        let p = unsafe { &mut *self.0.get() };
        p.get_or_insert_with(P::default)
    }

    /// A new plugin value, replacing any.
    #[allow(clippy::mut_from_ref)]
    fn reset(&self) -> &mut P {
        // SAFETY: as for get.
        let p = unsafe { &mut *self.0.get() };
        p.insert(P::default())
    }
}

/// The export functions; only [`export_plugin!`](crate::export_plugin)
/// calls them.
#[doc(hidden)]
pub mod rt {
    use super::*;

    pub fn abi_version() -> i32 {
        ABI_VERSION
    }

    pub fn phases<P: Plugin>() -> i32 {
        P::PHASES.0 as i32
    }

    pub fn configure<P: Plugin>(slot: &Slot<P>, config_len: i32) -> i32 {
        install_panic_hook();
        let mut config = Vec::new();
        let hint = config_len.max(0) as usize;
        if let Err(e) = buffer::read_into(&mut config, hint, |b, c| unsafe { sys::config(b, c) }) {
            fail(&format!("sdk: reading the config: {}", e));
            return 1;
        }
        match slot.reset().on_configure(&config) {
            Ok(()) => 0,
            Err(msg) => {
                fail(if msg.is_empty() { "configuration refused" } else { &msg });
                1
            }
        }
    }

    pub fn request<P: Plugin>(slot: &Slot<P>, ctx: i32) -> i32 {
        slot.get().on_request(&Request::new(ctx as u32)) as i32
    }

    pub fn response_headers<P: Plugin>(slot: &Slot<P>, ctx: i32, status: i32) -> i32 {
        slot.get().on_response_headers(&Response::new(ctx as u32, status)) as i32
    }

    pub fn chunk<P: Plugin>(slot: &Slot<P>, ctx: i32, text_len: i32, flags: i32) -> i32 {
        slot.get().on_chunk(&Chunk::new(ctx as u32, text_len, flags as u32)) as i32
    }

    pub fn end<P: Plugin>(slot: &Slot<P>, ctx: i32, flags: i32) -> i32 {
        let before = dispatch::dispatched();
        slot.get().on_end(&End::new(ctx as u32, flags as u32));
        if dispatch::dispatched() != before {
            return Verdict::Pause as i32;
        }
        0
    }

    pub fn call_response<P: Plugin>(slot: &Slot<P>, ctx: i32, call: i32, status: i32, body_len: i32, phase: i32, flags: i32) -> i32 {
        let r = CallResponse::new(ctx as u32, call, status, body_len, phase as u32, flags as u32);
        slot.get().on_call_response(&r) as i32
    }

    fn fail(msg: &str) {
        unsafe { sys::fail(msg.as_ptr(), msg.len()) }
    }

    /// Logs a panic's message before the abort traps: without it the
    /// gateway's error would say only "unreachable".
    fn install_panic_hook() {
        std::panic::set_hook(Box::new(|info| {
            crate::log(crate::Level::Error, &format!("plugin panicked: {}", info));
        }));
    }
}

/// Exports a [`Plugin`] type as the module's ABI: `_initialize` (empty:
/// wasm32-unknown-unknown has no constructors to run),
/// `tollgate_abi_version`, `tollgate_phases` (the type's
/// [`Plugin::PHASES`]), `on_configure`, the four phase callbacks and
/// `on_call_response`. Use it
/// once, in the crate root of a `cdylib`:
///
/// ```ignore
/// #[derive(Default)]
/// struct Guard;
/// impl tollgate::Plugin for Guard {
///     const PHASES: tollgate::Phases = tollgate::Phases::REQUEST;
///     fn on_request(&mut self, r: &tollgate::Request) -> tollgate::Verdict { ... }
/// }
/// tollgate::export_plugin!(Guard);
/// ```
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        static __TOLLGATE_PLUGIN: $crate::__private::Slot<$plugin> = $crate::__private::Slot::new();

        #[no_mangle]
        pub extern "C" fn _initialize() {}

        #[no_mangle]
        pub extern "C" fn tollgate_abi_version() -> i32 {
            $crate::__private::rt::abi_version()
        }

        #[no_mangle]
        pub extern "C" fn tollgate_phases() -> i32 {
            $crate::__private::rt::phases::<$plugin>()
        }

        #[no_mangle]
        pub extern "C" fn on_configure(config_len: i32) -> i32 {
            $crate::__private::rt::configure(&__TOLLGATE_PLUGIN, config_len)
        }

        #[no_mangle]
        pub extern "C" fn on_request(ctx: i32) -> i32 {
            $crate::__private::rt::request(&__TOLLGATE_PLUGIN, ctx)
        }

        #[no_mangle]
        pub extern "C" fn on_response_headers(ctx: i32, status: i32) -> i32 {
            $crate::__private::rt::response_headers(&__TOLLGATE_PLUGIN, ctx, status)
        }

        #[no_mangle]
        pub extern "C" fn on_chunk(ctx: i32, text_len: i32, flags: i32) -> i32 {
            $crate::__private::rt::chunk(&__TOLLGATE_PLUGIN, ctx, text_len, flags)
        }

        #[no_mangle]
        pub extern "C" fn on_end(ctx: i32, flags: i32) -> i32 {
            $crate::__private::rt::end(&__TOLLGATE_PLUGIN, ctx, flags)
        }

        #[no_mangle]
        pub extern "C" fn on_call_response(ctx: i32, call: i32, status: i32, body_len: i32, phase: i32, flags: i32) -> i32 {
            $crate::__private::rt::call_response(&__TOLLGATE_PLUGIN, ctx, call, status, body_len, phase, flags)
        }
    };
}
