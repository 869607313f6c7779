//! A small strict JSON reader for plugin configs (RFC 8259), so that a
//! plugin needs no dependency to read the JSON its policy gives it.
//!
//! Strings decode as Go's encoding/json decodes them: invalid UTF-8 and
//! lone surrogates become U+FFFD. Numbers are kept as their text; read
//! them with [`Value::as_f64`] or [`Value::as_i64`]. Object members keep
//! their order, duplicates included ([`Value::get`] returns the last, as
//! encoding/json keeps the last).

use std::fmt;

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as written.
    Number(String),
    /// A string, decoded.
    String(String),
    /// An array's elements in order.
    Array(Vec<Value>),
    /// An object's members in order.
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The member `key` of an object (the last, if repeated); `None` for
    /// other values.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string, if the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements, if the value is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The members, if the value is an object.
    pub fn as_object(&self) -> Option<&[(String, Value)]> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The boolean, if the value is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number as an f64, if the value is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// The number as an i64, if the value is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// The value's kind, for error messages ("a string", "an array", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }
}

/// Why a document is not JSON, and the byte offset where that was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where the problem was found.
    pub offset: usize,
    /// What the problem is.
    pub msg: &'static str,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON at byte {}: {}", self.offset, self.msg)
    }
}

impl std::error::Error for SyntaxError {}

/// How deep arrays and objects may nest: a bound on the reader's stack.
const MAX_DEPTH: usize = 128;

/// Parses one JSON document (whitespace around it allowed).
pub fn parse(b: &[u8]) -> Result<Value, SyntaxError> {
    let mut p = Parser { b, at: 0 };
    let v = p.value(0)?;
    p.space();
    if p.at != b.len() {
        return Err(p.err("data after the value"));
    }
    Ok(v)
}

struct Parser<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, msg: &'static str) -> SyntaxError {
        SyntaxError { offset: self.at, msg }
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.at) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.space();
        if self.b.get(self.at) == Some(&c) {
            self.at += 1;
            return true;
        }
        false
    }

    fn value(&mut self, depth: usize) -> Result<Value, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        self.space();
        match self.b.get(self.at) {
            None => Err(self.err("unexpected end")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Value, SyntaxError> {
        if self.b[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            return Ok(v);
        }
        Err(self.err("unexpected character"))
    }

    fn object(&mut self, depth: usize) -> Result<Value, SyntaxError> {
        self.at += 1;
        let mut members = Vec::new();
        if self.eat(b'}') {
            return Ok(Value::Object(members));
        }
        loop {
            self.space();
            if self.b.get(self.at) != Some(&b'"') {
                return Err(self.err("expected a member name"));
            }
            let k = self.string()?;
            if !self.eat(b':') {
                return Err(self.err("expected ':'"));
            }
            members.push((k, self.value(depth + 1)?));
            if self.eat(b'}') {
                return Ok(Value::Object(members));
            }
            if !self.eat(b',') {
                return Err(self.err("expected ',' or '}'"));
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, SyntaxError> {
        self.at += 1;
        let mut elems = Vec::new();
        if self.eat(b']') {
            return Ok(Value::Array(elems));
        }
        loop {
            elems.push(self.value(depth + 1)?);
            if self.eat(b']') {
                return Ok(Value::Array(elems));
            }
            if !self.eat(b',') {
                return Err(self.err("expected ',' or ']'"));
            }
        }
    }

    fn digits(&mut self) -> usize {
        let n = self.b[self.at..].iter().take_while(|c| c.is_ascii_digit()).count();
        self.at += n;
        n
    }

    fn number(&mut self) -> Result<Value, SyntaxError> {
        let start = self.at;
        if self.b[self.at] == b'-' {
            self.at += 1;
        }
        let int_start = self.at;
        match self.digits() {
            0 => return Err(self.err("expected a digit")),
            n if n > 1 && self.b[int_start] == b'0' => return Err(SyntaxError { offset: int_start, msg: "leading zero" }),
            _ => {}
        }
        if self.b.get(self.at) == Some(&b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(self.err("expected a digit"));
            }
        }
        if let Some(b'e' | b'E') = self.b.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.b.get(self.at) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("expected a digit"));
            }
        }
        // The bytes are ASCII digits and signs.
        Ok(Value::Number(String::from_utf8_lossy(&self.b[start..self.at]).into_owned()))
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let h = self.b.get(self.at..self.at + 4).ok_or_else(|| self.err("short \\u escape"))?;
        let mut v = 0u32;
        for &c in h {
            let d = (c as char).to_digit(16).ok_or_else(|| self.err("bad \\u escape"))?;
            v = v * 16 + d;
        }
        self.at += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        self.at += 1; // the opening quote
        let mut out: Vec<u8> = Vec::new();
        loop {
            let c = *self.b.get(self.at).ok_or_else(|| self.err("unterminated string"))?;
            match c {
                b'"' => {
                    self.at += 1;
                    // Invalid UTF-8 becomes U+FFFD, as in encoding/json.
                    return Ok(crate::buffer::into_string(out));
                }
                b'\\' => {
                    self.at += 1;
                    let e = *self.b.get(self.at).ok_or_else(|| self.err("unterminated string"))?;
                    self.at += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return Err(self.err("bad escape")),
                    };
                    let mut tmp = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                }
                0..=0x1f => return Err(self.err("control character in string")),
                _ => {
                    out.push(c);
                    self.at += 1;
                }
            }
        }
    }

    /// The character of a `\uXXXX` escape (after the `u`), joining a
    /// surrogate pair; a lone surrogate is U+FFFD.
    fn unicode_escape(&mut self) -> Result<char, SyntaxError> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) && self.b[self.at..].starts_with(b"\\u") {
            let save = self.at;
            self.at += 2;
            let lo = self.hex4()?;
            if (0xDC00..0xE000).contains(&lo) {
                let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                return Ok(char::from_u32(c).unwrap_or('\u{FFFD}'));
            }
            self.at = save; // not a pair: the second escape stands alone
        }
        Ok(char::from_u32(hi).unwrap_or('\u{FFFD}'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::String(v.to_string())
    }

    #[test]
    fn parses() {
        let tests: Vec<(&str, Value)> = vec![
            ("null", Value::Null),
            (" true ", Value::Bool(true)),
            ("-1.5e3", Value::Number("-1.5e3".into())),
            ("0", Value::Number("0".into())),
            (r#""a\"\\\/\b\f\n\r\t\u00e9""#, s("a\"\\/\u{8}\u{c}\n\r\t\u{e9}")),
            (r#""\ud83d\ude00""#, s("\u{1F600}")),
            (r#""\ud83d""#, s("\u{FFFD}")),
            (r#""\ud83dx""#, s("\u{FFFD}x")),
            (r#""\ude00\ud83d\u0041""#, s("\u{FFFD}\u{FFFD}A")),
            ("[]", Value::Array(vec![])),
            (r#"{"deny": ["a", "b"], "n": {}}"#, Value::Object(vec![
                ("deny".into(), Value::Array(vec![s("a"), s("b")])),
                ("n".into(), Value::Object(vec![])),
            ])),
        ];
        for (doc, want) in tests {
            assert_eq!(parse(doc.as_bytes()), Ok(want), "{}", doc);
        }
        assert_eq!(parse(b"\"\xff\""), Ok(s("\u{FFFD}")));
    }

    #[test]
    fn rejects() {
        for doc in ["", "{", "[1,]", "{\"a\" 1}", "01", "1.", "-", "1e", "tru", "\"a", "\"\\x\"", "\"\t\"", "1 2", "{\"a\":1,}", "[1 2]", "\"\\u12\""] {
            assert!(parse(doc.as_bytes()).is_err(), "{:?} parsed", doc);
        }
        let deep = "[".repeat(MAX_DEPTH + 2);
        assert_eq!(parse(deep.as_bytes()).unwrap_err().msg, "nested too deeply");
    }

    #[test]
    fn accessors() {
        let v = parse(br#"{"a": 1, "a": "x", "b": [true], "n": -7}"#).unwrap();
        assert_eq!(v.get("a"), Some(&s("x")));
        assert_eq!(v.get("b").and_then(Value::as_array).map(|a| a.len()), Some(1));
        assert_eq!(v.get("n").and_then(Value::as_i64), Some(-7));
        assert_eq!(v.get("zz"), None);
        assert_eq!(v.kind(), "an object");
    }

    #[test]
    fn mutations_never_panic() {
        let valid: &[u8] = br#"{"deny": ["se\u00e9cret", "p@ss", "\ud83d\ude00"], "n": [1.5e-3, null, false, {"a": []}]}"#;
        let alphabet = br#"{}[],:"\u0123456789.eE+-tfnrlsa "#;
        let mut seed = 7u64;
        for _ in 0..20000 {
            let mut v = valid.to_vec();
            for _ in 0..1 + crate::records::tests::lcg(&mut seed) % 3 {
                let i = (crate::records::tests::lcg(&mut seed) as usize) % v.len();
                let c = alphabet[(crate::records::tests::lcg(&mut seed) as usize) % alphabet.len()];
                match crate::records::tests::lcg(&mut seed) % 3 {
                    0 => v[i] = c,
                    1 => {
                        v.remove(i);
                    }
                    _ => v.insert(i, c),
                }
            }
            if let Ok(doc) = parse(&v) {
                // What parses, re-parsed from a canonical rendering, is
                // the same value.
                assert_eq!(parse(render(&doc).as_bytes()), Ok(doc.clone()), "{:?}", String::from_utf8_lossy(&v));
            }
        }
    }

    /// A JSON rendering of a value (strings escaped with Debug-like rules
    /// JSON shares: quotes, backslashes and control characters).
    fn render(v: &Value) -> String {
        match v {
            Value::Null => "null".into(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.clone(),
            Value::String(s) => quote(s),
            Value::Array(a) => format!("[{}]", a.iter().map(render).collect::<Vec<_>>().join(",")),
            Value::Object(m) => format!("{{{}}}", m.iter().map(|(k, v)| format!("{}:{}", quote(k), render(v))).collect::<Vec<_>>().join(",")),
        }
    }

    fn quote(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn every_prefix_terminates() {
        let doc = br#"{"deny": ["se\u00e9cret", "p@ss"], "replacement": "[x]", "n": [1.5e-3, null, false]}"#;
        for n in 0..doc.len() {
            assert!(parse(&doc[..n]).is_err(), "prefix {} parsed", n);
        }
        assert!(parse(doc).is_ok());
    }
}
