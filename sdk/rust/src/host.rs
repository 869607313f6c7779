//! Host functions that belong to no phase object: logging, metrics, host
//! services, and failing a callback.

use crate::abi::{status, Error, Level};
use crate::buffer;
use crate::sys;

/// Writes a line to the gateway's log with the plugin's name and the
/// current phase; the host keeps at most 4 KiB of it. Callable from
/// `on_configure` (and the plugin's `Default`, which runs in it) and from
/// every phase.
pub fn log(level: Level, msg: &str) {
    unsafe { sys::log(level as i32, msg.as_ptr(), msg.len()) }
}

/// Adds `value` to the plugin's counter `name`, exported by the gateway as
/// `tollgate_plugin_events_total{plugin="…",name="…"}`. Names are
/// `[a-z0-9_]{1,64}` and a plugin may use at most 32; otherwise
/// [`Error::Invalid`].
pub fn metric_add(name: &str, value: i64) -> Result<(), Error> {
    status(unsafe { sys::metric_add(name.as_ptr(), name.len(), value) })
}

/// Calls the host service `service` with `request` and returns its result
/// ([`Error::Unavailable`] when the host does not serve that name or the
/// service is down). A result longer than the SDK's first buffer is fetched
/// with `call_result`: the call is made once.
pub fn call(service: &str, request: &[u8]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(4096);
    let cap = out.capacity();
    let n = unsafe {
        sys::call(service.as_ptr(), service.len(), request.as_ptr(), request.len(), out.as_mut_ptr(), cap)
    };
    if let Some(e) = Error::from_code(n) {
        return Err(e);
    }
    if n as usize <= cap {
        // SAFETY: the host wrote n ≤ capacity bytes.
        unsafe { out.set_len(n as usize) };
        return Ok(out);
    }
    buffer::read(n as usize, |b, c| unsafe { sys::call_result(b, c) })
}

/// Fails the current callback: logs `msg` at error level, then traps, so
/// that the plugin's `on_error` applies (fail_closed by default: the client
/// gets an error). This is what a guard does with a value it could not
/// read: it never passes content it did not check.
pub fn fail_callback(msg: &str) -> ! {
    log(Level::Error, msg);
    trap()
}

/// Traps the instance (the wasm `unreachable` instruction).
pub(crate) fn trap() -> ! {
    #[cfg(target_arch = "wasm32")]
    core::arch::wasm32::unreachable();
    #[cfg(not(target_arch = "wasm32"))]
    std::process::abort();
}
