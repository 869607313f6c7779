//! The host imports of sdk/ABI.md, module `tollgate`, as raw functions.
//!
//! Pointers and lengths are the guest's linear-memory offsets (i32 in
//! wasm32). On other targets — the host's unit tests of the pure parts —
//! every import is a stub answering NOT_ALLOWED (−3; −1 for the i64 ones),
//! so the crate compiles and its parsers can be tested natively.

macro_rules! imports {
    ($( fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)?; )*) => {
        #[cfg(target_arch = "wasm32")]
        #[link(wasm_import_module = "tollgate")]
        extern "C" {
            $( pub fn $name($($arg: $ty),*) $(-> $ret)?; )*
        }

        $(
            #[cfg(not(target_arch = "wasm32"))]
            #[allow(unused_variables)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? { Stub::stub() }
        )*
    };
}

imports! {
    fn log(level: i32, ptr: *const u8, len: usize);
    fn config(buf: *mut u8, cap: usize) -> i32;
    fn fail(ptr: *const u8, len: usize);
    fn request_header(name: *const u8, name_len: usize, buf: *mut u8, cap: usize) -> i32;
    fn set_request_header(name: *const u8, name_len: usize, val: *const u8, val_len: usize) -> i32;
    fn response_header(name: *const u8, name_len: usize, buf: *mut u8, cap: usize) -> i32;
    fn set_response_header(name: *const u8, name_len: usize, val: *const u8, val_len: usize) -> i32;
    fn request_field(field: i32, buf: *mut u8, cap: usize) -> i32;
    fn request_int(field: i32) -> i64;
    fn tenant_field(field: i32, buf: *mut u8, cap: usize) -> i32;
    fn tenant_int(field: i32) -> i64;
    fn fact(key: *const u8, key_len: usize, buf: *mut u8, cap: usize) -> i32;
    fn set_fact(key: *const u8, key_len: usize, val: *const u8, val_len: usize) -> i32;
    fn state_get(buf: *mut u8, cap: usize) -> i32;
    fn state_set(ptr: *const u8, len: usize) -> i32;
    fn chunk_text(buf: *mut u8, cap: usize) -> i32;
    fn chunk_tool_calls(buf: *mut u8, cap: usize) -> i32;
    fn request_messages(buf: *mut u8, cap: usize) -> i32;
    fn set_message_text(record: i32, ptr: *const u8, len: usize) -> i32;
    fn emit(ptr: *const u8, len: usize) -> i32;
    fn set_finish_reason(ptr: *const u8, len: usize) -> i32;
    fn reject(status: i32, typ: *const u8, typ_len: usize, code: *const u8, code_len: usize, msg: *const u8, msg_len: usize) -> i32;
    fn respond(status: i32, ptr: *const u8, len: usize) -> i32;
    fn respond_event(ptr: *const u8, len: usize) -> i32;
    fn usage(field: i32) -> i64;
    fn metric_add(name: *const u8, name_len: usize, value: i64) -> i32;
    fn call(svc: *const u8, svc_len: usize, req: *const u8, req_len: usize, buf: *mut u8, cap: usize) -> i32;
    fn call_result(buf: *mut u8, cap: usize) -> i32;
    fn skip_phases(mask: i32) -> i32;
    fn dispatch(svc: *const u8, svc_len: usize, req: *const u8, req_len: usize) -> i32;
    fn expect_response(call: i32, prefix: *const u8, prefix_len: usize) -> i32;
    fn call_response(buf: *mut u8, cap: usize) -> i32;
    fn call_response_header(name: *const u8, name_len: usize, buf: *mut u8, cap: usize) -> i32;
}

/// What a stub import answers off wasm32.
#[cfg(not(target_arch = "wasm32"))]
trait Stub {
    fn stub() -> Self;
}

#[cfg(not(target_arch = "wasm32"))]
impl Stub for () {
    fn stub() {}
}

#[cfg(not(target_arch = "wasm32"))]
impl Stub for i32 {
    fn stub() -> i32 {
        -3
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Stub for i64 {
    fn stub() -> i64 {
        -1
    }
}
