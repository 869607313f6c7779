//! Reading host values into guest-owned buffers.
//!
//! The host never allocates in the guest: to read a value the guest passes
//! a buffer, and the host returns the value's length, writing it only when
//! it fits (ABI.md, "Guest-owned buffers"). When the value is longer than
//! the buffer, the SDK grows the buffer to the length the host reported and
//! asks again.

use crate::abi::Error;

/// The first capacity tried for a value of unknown length: most headers,
/// fields and facts fit, so most reads take one host call.
const FIRST_BUFFER: usize = 256;

/// How many times a read is tried before the value counts as unstable:
/// the second try has the length the host reported, so only a value that
/// changed between calls needs a third.
const TRIES: usize = 3;

/// Reads a value into `dst`, replacing its contents; see [`append`].
pub(crate) fn read_into<F>(dst: &mut Vec<u8>, hint: usize, get: F) -> Result<(), Error>
where
    F: Fn(*mut u8, usize) -> i32,
{
    dst.clear();
    append(dst, hint, get)
}

/// Appends a value to `dst`. `hint` is the value's length when the caller
/// knows it (0 otherwise). `get` is the import, given a pointer to `dst`'s
/// spare capacity and its size. `dst` keeps its capacity, so a buffer
/// reused from call to call stops allocating once it has held the longest
/// value. On an error `dst` is as it was.
pub(crate) fn append<F>(dst: &mut Vec<u8>, hint: usize, get: F) -> Result<(), Error>
where
    F: Fn(*mut u8, usize) -> i32,
{
    let len = dst.len();
    let mut want = hint.max(FIRST_BUFFER);
    for _ in 0..TRIES {
        dst.reserve(want);
        let spare = dst.capacity() - len;
        // SAFETY: the pointer is within (or one past) the allocation.
        let n = get(unsafe { dst.as_mut_ptr().add(len) }, spare);
        if let Some(e) = Error::from_code(n) {
            return Err(e);
        }
        let n = n as usize;
        if n <= spare {
            // SAFETY: the host wrote n ≤ spare bytes after len, and u8 has
            // no invalid values.
            unsafe { dst.set_len(len + n) };
            return Ok(());
        }
        want = n;
    }
    Err(Error::Unstable)
}

/// Reads a value into a new vector.
pub(crate) fn read<F>(hint: usize, get: F) -> Result<Vec<u8>, Error>
where
    F: Fn(*mut u8, usize) -> i32,
{
    let mut v = Vec::new();
    read_into(&mut v, hint, get)?;
    Ok(v)
}

/// Reads a value that may be absent: `Ok(None)` for ABSENT.
pub(crate) fn read_opt<F>(get: F) -> Result<Option<Vec<u8>>, Error>
where
    F: Fn(*mut u8, usize) -> i32,
{
    match read(0, get) {
        Ok(v) => Ok(Some(v)),
        Err(Error::Absent) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads a value that may be absent as a string (invalid UTF-8 replaced).
pub(crate) fn read_string_opt<F>(get: F) -> Result<Option<String>, Error>
where
    F: Fn(*mut u8, usize) -> i32,
{
    Ok(read_opt(get)?.map(into_string))
}

/// Reads a string value; an absent one is empty.
pub(crate) fn read_string<F>(get: F) -> Result<String, Error>
where
    F: Fn(*mut u8, usize) -> i32,
{
    Ok(read_string_opt(get)?.unwrap_or_default())
}

/// The bytes as a string, without a copy when they are valid UTF-8.
pub(crate) fn into_string(b: Vec<u8>) -> String {
    match String::from_utf8(b) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A fake import serving `value`, counting its calls.
    fn serve<'a>(value: &[u8], calls: &'a Cell<usize>) -> impl Fn(*mut u8, usize) -> i32 + 'a {
        let value = value.to_vec();
        move |buf, cap| {
            calls.set(calls.get() + 1);
            if value.len() <= cap {
                unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), buf, value.len()) };
            }
            value.len() as i32
        }
    }

    #[test]
    fn reads_short_and_long_values() {
        for (len, want_calls) in [(0usize, 1usize), (10, 1), (256, 1), (257, 2), (5000, 2)] {
            let value: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let calls = Cell::new(0);
            let got = read(0, serve(&value, &calls)).unwrap();
            assert_eq!(got, value, "len {}", len);
            assert_eq!(calls.get(), want_calls, "calls for len {}", len);
        }
    }

    #[test]
    fn reuses_capacity() {
        let calls = Cell::new(0);
        let value = vec![7u8; 1000];
        let mut buf = Vec::new();
        read_into(&mut buf, 0, serve(&value, &calls)).unwrap();
        read_into(&mut buf, 0, serve(&value, &calls)).unwrap();
        assert_eq!(calls.get(), 3); // 2 for the first read, 1 for the second
        assert_eq!(buf, value);
    }

    #[test]
    fn appends() {
        let calls = Cell::new(0);
        let mut buf = b"abc".to_vec();
        append(&mut buf, 0, serve(&vec![b'x'; 300], &calls)).unwrap();
        assert_eq!(buf.len(), 303);
        assert_eq!(&buf[..4], b"abcx");
        assert_eq!(append(&mut buf, 0, |_, _| -2), Err(Error::Invalid));
        assert_eq!(buf.len(), 303);
    }

    #[test]
    fn maps_codes() {
        for (code, want) in [(-1, Error::Absent), (-2, Error::Invalid), (-3, Error::NotAllowed), (-4, Error::Unavailable), (-9, Error::Host(-9))] {
            assert_eq!(read(0, |_, _| code), Err(want));
        }
        assert_eq!(read_opt(|_, _| -1), Ok(None));
    }

    #[test]
    fn growing_value_is_unstable() {
        let calls = Cell::new(0usize);
        let got = read(0, |_, cap| {
            calls.set(calls.get() + 1);
            (cap + 1) as i32
        });
        assert_eq!(got, Err(Error::Unstable));
        assert_eq!(calls.get(), TRIES);
    }
}
