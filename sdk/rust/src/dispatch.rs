//! Dispatched calls (ABI.md, "Dispatched calls"): a phase method queues
//! calls with [`dispatch`] or [`dispatch_http`] and answers
//! [`Verdict::Pause`](crate::Verdict::Pause); the host makes them once the
//! method returned, with none of the plugin's instances held, and hands
//! each response to [`Plugin::on_call_response`](crate::Plugin::on_call_response),
//! whose verdict is then the phase's.

use std::ops::Deref;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::abi::{Error, Phases, USAGE_STATUS};
use crate::buffer;
use crate::exchange::Exchange;
use crate::phases::{Chunk, End, Request, Response};
use crate::sys;

/// A dispatched call's id within its request, as [`dispatch`] returned it
/// and [`CallResponse::id`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallId(pub i32);

/// Calls dispatched by this instance, for the end phase's implicit PAUSE.
static DISPATCHED: AtomicU32 = AtomicU32::new(0);

pub(crate) fn dispatched() -> u32 {
    DISPATCHED.load(Ordering::Relaxed)
}

/// Queues a call of the host service `service` with `request` (copied by
/// the host) and returns its id. The call starts only if the phase method
/// then returns [`Verdict::Pause`](crate::Verdict::Pause) (or
/// [`Verdict::Defer`](crate::Verdict::Defer), from `on_request`); any
/// other verdict abandons it. No I/O happens here. Errors:
/// [`Error::NotAllowed`] outside a phase or when the policy does not grant
/// the call, [`Error::Invalid`] for a request the service cannot parse,
/// [`Error::Unavailable`] when the host does not serve `service`,
/// [`Error::Busy`] past 16 outstanding calls. Every service
/// [`call`](crate::call) reaches can be dispatched (its result is the
/// body, with status 0).
pub fn dispatch(service: &str, request: &[u8]) -> Result<CallId, Error> {
    let n = unsafe { sys::dispatch(service.as_ptr(), service.len(), request.as_ptr(), request.len()) };
    if let Some(e) = Error::from_code(n) {
        return Err(e);
    }
    DISPATCHED.fetch_add(1, Ordering::Relaxed);
    Ok(CallId(n))
}

/// How many prefixes [`expect_response`] takes per call.
pub const MAX_EXPECT_PREFIXES: usize = 4;

/// The longest prefix [`expect_response`] takes, in bytes.
pub const MAX_EXPECT_PREFIX: usize = 64;

/// Tells the host that the phase method needs no
/// [`Plugin::on_call_response`](crate::Plugin::on_call_response) for an
/// answer of `call` (just dispatched by this method, not yet started) that
/// is a host service's result (status 0) starting with one of `prefixes`:
/// the host consumes such an answer as if `on_call_response` had answered
/// [`Verdict::Pause`](crate::Verdict::Pause) while other calls of the
/// method are outstanding, [`Verdict::Continue`](crate::Verdict::Continue)
/// after the last. Any other answer reaches `on_call_response` as usual.
/// Do before dispatching what `on_call_response` would do on an expected
/// answer (state, facts, skip_phases): it will not run.
/// [`Error::Invalid`] for a call this method did not dispatch, more than
/// [`MAX_EXPECT_PREFIXES`] prefixes for the call in all, or one over
/// [`MAX_EXPECT_PREFIX`] bytes; the prefixes before the bad one are taken.
pub fn expect_response(call: CallId, prefixes: &[&str]) -> Result<(), Error> {
    for p in prefixes {
        let n = unsafe { sys::expect_response(call.0, p.as_ptr(), p.len()) };
        if let Some(e) = Error::from_code(n) {
            return Err(e);
        }
    }
    Ok(())
}

/// The longest [`HttpRequest::cache_ttl`] the host accepts.
pub const MAX_CACHE_TTL: Duration = Duration::from_secs(3600);

/// A call of the host's `http` service. The URL must fall under a prefix
/// the policy grants the plugin; the host adds the credentials the policy
/// configures, which the plugin never sees.
#[derive(Clone, Debug, Default)]
pub struct HttpRequest<'a> {
    /// The method; "" means POST with a body, else GET.
    pub method: &'a str,
    /// The URL.
    pub url: &'a str,
    /// Request headers, validated like [`Request::set_header`](crate::Request::set_header).
    pub headers: &'a [(&'a str, &'a str)],
    /// The request body.
    pub body: &'a [u8],
    /// When not empty, the host answers a call of this plugin with the same
    /// key from its cache for `cache_ttl` after a 2xx answer.
    pub cache_key: &'a str,
    /// How long a cached answer serves (0 < ttl ≤ [`MAX_CACHE_TTL`]).
    pub cache_ttl: Duration,
}

/// Dispatches a call of the `http` service (see [`dispatch`]);
/// [`Error::Invalid`] for a request that does not fit the format (see
/// [`append_http_request`]).
pub fn dispatch_http(r: &HttpRequest<'_>) -> Result<CallId, Error> {
    let mut b = Vec::with_capacity(256 + r.body.len());
    append_http_request(&mut b, r)?;
    dispatch("http", &b)
}

/// Appends `r` in the `http` service's request format (ABI.md,
/// "Dispatched calls") to `dst`: [`Error::Invalid`], with `dst` as it was,
/// for a method or header name that is not a token, a URL that is empty or
/// holds a space, CR, LF or NUL in any line, and a cache TTL out of range.
pub fn append_http_request(dst: &mut Vec<u8>, r: &HttpRequest<'_>) -> Result<(), Error> {
    let method = match r.method {
        "" if r.body.is_empty() => "GET",
        "" => "POST",
        m => m,
    };
    let ttl_ms = r.cache_ttl.as_millis();
    let valid = token(method)
        && !r.url.is_empty()
        && line_safe(r.url)
        && !r.url.contains(' ')
        && r.headers.iter().all(|(n, v)| token(n) && line_safe(v))
        && (r.cache_key.is_empty() || (line_safe(r.cache_key) && ttl_ms > 0 && r.cache_ttl <= MAX_CACHE_TTL));
    if !valid {
        return Err(Error::Invalid);
    }
    let mut line = |parts: &[&[u8]]| {
        for p in parts {
            dst.extend_from_slice(p);
        }
        dst.push(b'\n');
    };
    line(&[method.as_bytes(), b" ", r.url.as_bytes()]);
    for (n, v) in r.headers {
        line(&[n.as_bytes(), b": ", v.as_bytes()]);
    }
    if !r.cache_key.is_empty() {
        line(&[b":cache ", ttl_ms.to_string().as_bytes(), b" ", r.cache_key.as_bytes()]);
    }
    line(&[]);
    dst.extend_from_slice(r.body);
    Ok(())
}

fn token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

fn line_safe(s: &str) -> bool {
    !s.bytes().any(|c| c == b'\r' || c == b'\n' || c == 0)
}

/// `on_call_response`'s view: one dispatched call's response, and the
/// dispatching phase's object.
#[derive(Debug)]
pub struct CallResponse {
    x: Exchange,
    id: CallId,
    status: i32,
    len: usize,
    phase: Phases,
    flags: u32,
}

impl Deref for CallResponse {
    type Target = Exchange;
    fn deref(&self) -> &Exchange {
        &self.x
    }
}

impl CallResponse {
    pub(crate) fn new(ctx: u32, call: i32, status: i32, len: i32, phase: u32, flags: u32) -> Self {
        CallResponse { x: Exchange { ctx }, id: CallId(call), status, len: len.max(0) as usize, phase: Phases(phase), flags }
    }

    /// The call's id, as [`dispatch`] returned it.
    pub fn id(&self) -> CallId {
        self.id
    }

    /// The HTTP status for `http`, 0 for a host service's result, negative
    /// when the call failed (see [`CallResponse::error`]).
    pub fn status(&self) -> i32 {
        self.status
    }

    /// Why the call got no response: [`Error::Unavailable`],
    /// [`Error::Timeout`], [`Error::TooLarge`], [`Error::Busy`] or
    /// [`Error::Invalid`]; `None` when it got one (whatever its status).
    pub fn error(&self) -> Option<Error> {
        Error::from_code(self.status)
    }

    /// The phase of the method that dispatched the call.
    pub fn phase(&self) -> Phases {
        self.phase
    }

    /// The response body.
    pub fn body(&self) -> Result<Vec<u8>, Error> {
        let mut v = Vec::new();
        self.body_into(&mut v)?;
        Ok(v)
    }

    /// [`CallResponse::body`] appended to `dst`.
    pub fn body_into(&self, dst: &mut Vec<u8>) -> Result<(), Error> {
        if self.len == 0 {
            return Ok(());
        }
        buffer::append(dst, self.len, |b, c| unsafe { sys::call_response(b, c) })
    }

    /// A response header (case-insensitive name); `None` when absent.
    pub fn header(&self, name: &str) -> Result<Option<String>, Error> {
        buffer::read_string_opt(|b, c| unsafe { sys::call_response_header(name.as_ptr(), name.len(), b, c) })
    }

    /// The request phase's view, when the call was dispatched there.
    pub fn request(&self) -> Option<Request> {
        (self.phase == Phases::REQUEST).then(|| Request::new(self.x.ctx))
    }

    /// The response_headers phase's view, when the call was dispatched
    /// there.
    pub fn response(&self) -> Option<Response> {
        let status = || unsafe { sys::usage(USAGE_STATUS) } as i32;
        (self.phase == Phases::RESPONSE_HEADERS).then(|| Response::new(self.x.ctx, status()))
    }

    /// The chunk phase's view of the event being decided, when the call was
    /// dispatched there. Text the dispatching method emitted counts
    /// towards `Replace` and `Stop`.
    pub fn chunk(&self) -> Option<Chunk> {
        let len = || unsafe { sys::chunk_text(std::ptr::null_mut(), 0) }.max(0);
        (self.phase == Phases::CHUNK).then(|| Chunk::new(self.x.ctx, len(), self.flags))
    }

    /// The end phase's view, when the call was dispatched there.
    pub fn end(&self) -> Option<End> {
        (self.phase == Phases::END).then(|| End::new(self.x.ctx, self.flags))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(r: &HttpRequest<'_>) -> Result<String, Error> {
        let mut b = b"prefix".to_vec();
        append_http_request(&mut b, r)?;
        Ok(String::from_utf8(b).unwrap())
    }

    #[test]
    fn http_request_format() {
        assert_eq!(http(&HttpRequest { url: "https://x.test/a?b=1", ..Default::default() }).unwrap(), "prefixGET https://x.test/a?b=1\n\n");
        let r = HttpRequest {
            url: "https://x.test/v1/moderations",
            headers: &[("Content-Type", "application/json"), ("X-A", "b c")],
            body: b"{\"input\":\"hi\"}",
            cache_key: "sha 12",
            cache_ttl: Duration::from_secs(90),
            ..Default::default()
        };
        assert_eq!(
            http(&r).unwrap(),
            "prefixPOST https://x.test/v1/moderations\nContent-Type: application/json\nX-A: b c\n:cache 90000 sha 12\n\n{\"input\":\"hi\"}"
        );
    }

    #[test]
    fn http_request_refusals() {
        let bad = [
            HttpRequest::default(),
            HttpRequest { url: "http://h/a b", ..Default::default() },
            HttpRequest { url: "http://h/\nX: 1", ..Default::default() },
            HttpRequest { method: "GE T", url: "http://h/", ..Default::default() },
            HttpRequest { url: "http://h/", headers: &[("X:Y", "1")], ..Default::default() },
            HttpRequest { url: "http://h/", headers: &[("X", "1\r\nY: 2")], ..Default::default() },
            HttpRequest { url: "http://h/", cache_key: "k", ..Default::default() },
            HttpRequest { url: "http://h/", cache_key: "k", cache_ttl: Duration::from_secs(3601), ..Default::default() },
            HttpRequest { url: "http://h/", cache_key: "k\n", cache_ttl: Duration::from_secs(1), ..Default::default() },
        ];
        for r in &bad {
            let mut b = b"keep".to_vec();
            assert_eq!(append_http_request(&mut b, r), Err(Error::Invalid), "{:?}", r);
            assert_eq!(b, b"keep");
        }
    }

    #[test]
    fn error_codes() {
        assert_eq!(Error::from_code(-5), Some(Error::Timeout));
        assert_eq!(Error::from_code(-6), Some(Error::TooLarge));
        assert_eq!(Error::from_code(-7), Some(Error::Busy));
        assert_eq!(CallResponse::new(1, 0, 200, 0, 1, 0).error(), None);
        assert_eq!(CallResponse::new(1, 0, -5, 0, 1, 0).error(), Some(Error::Timeout));
        assert_eq!(crate::Verdict::Pause.name(), "pause");
        assert_eq!(crate::Verdict::Defer.name(), "defer");
        assert_eq!(crate::Verdict::Defer as i32, 8);
        assert_eq!(crate::Verdict::Fail as i32, 7);
    }
}
