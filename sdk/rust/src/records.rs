//! Parsers of the two record values the host renders: the tool-call deltas
//! of `chunk_tool_calls` and the message parts of `request_messages`
//! (ABI.md). Both are a header line of decimal numbers and a kind, then
//! byte strings read by their lengths (so they may contain any byte,
//! including LF), then LF.

/// One element of a streamed event's `delta.tool_calls` (or of a whole
/// reply's `message.tool_calls`), borrowed from the host's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolCallDelta<'a> {
    /// The call's index among the reply's tool calls (0 when the upstream
    /// sent none).
    pub index: i64,
    /// `function.name`, JSON-decoded; empty when absent (usually on every
    /// delta but a call's first).
    pub name: &'a [u8],
    /// This event's fragment of `function.arguments`, JSON-decoded; the
    /// fragments of one index, concatenated, make the call's arguments.
    pub arguments: &'a [u8],
}

/// What a message part is (the KIND of a `request_messages` record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PartKind {
    /// Text: a string content, a text part of an array content, a
    /// completions prompt or an embeddings input.
    Text,
    /// A tool call the assistant made: name = the function, text = its
    /// arguments.
    ToolCall,
    /// A tool's result: name = the call's id, text = the result's text.
    ToolResult,
}

impl PartKind {
    /// The kind named `b`. An unknown kind is malformed, as in the Go SDK:
    /// a guard must not pass a part it cannot tell the meaning of.
    fn parse(b: &[u8]) -> Result<PartKind, Malformed> {
        match b {
            b"text" => Ok(PartKind::Text),
            b"tool_call" => Ok(PartKind::ToolCall),
            b"tool_result" => Ok(PartKind::ToolResult),
            _ => Err(Malformed),
        }
    }

    /// The kind's name in the ABI ("text", "tool_call", "tool_result").
    pub fn name(self) -> &'static str {
        match self {
            PartKind::Text => "text",
            PartKind::ToolCall => "tool_call",
            PartKind::ToolResult => "tool_result",
        }
    }
}

/// One part of one message of the request's conversation, borrowed from
/// the host's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessagePart<'a> {
    /// The message's number in conversation order from 0; all parts of one
    /// message share it (an Anthropic top-level `system` is message 0).
    pub index: u64,
    /// What the part is.
    pub kind: PartKind,
    /// The message's role as sent (`system`, `user`, `assistant`, `tool`,
    /// ...; `tool` for an Anthropic tool_result).
    pub role: &'a [u8],
    /// The tool's name for a tool call, the call's id for a tool result;
    /// empty for text.
    pub name: &'a [u8],
    /// The part's text, JSON-decoded.
    pub text: &'a [u8],
    /// The part's number in the conversation from 0, across messages:
    /// what [`Request::set_message_text`](crate::Request::set_message_text)
    /// takes to replace `text`.
    pub record: usize,
}

/// The record parsers' error: the value does not follow the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// An iterator over the records of a `chunk_tool_calls` value. It yields
/// `Err(Malformed)` once, then ends, at the first record it cannot parse.
#[derive(Clone, Debug)]
pub struct ToolCallDeltas<'a> {
    rest: &'a [u8],
}

impl<'a> ToolCallDeltas<'a> {
    /// The deltas of `value`, in the format of `chunk_tool_calls`.
    pub fn new(value: &'a [u8]) -> Self {
        ToolCallDeltas { rest: value }
    }

    fn next_record(&mut self) -> Result<ToolCallDelta<'a>, Malformed> {
        let (index, b) = decimal(self.rest, b' ', true)?;
        let (name_len, b) = decimal(b, b' ', false)?;
        let (args_len, b) = decimal(b, b'\n', false)?;
        let (strs, rest) = strings(b, &[name_len, args_len])?;
        self.rest = rest;
        Ok(ToolCallDelta { index, name: strs[0], arguments: strs[1] })
    }
}

impl<'a> Iterator for ToolCallDeltas<'a> {
    type Item = Result<ToolCallDelta<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = self.next_record();
        if r.is_err() {
            self.rest = &[];
        }
        Some(r)
    }
}

/// An iterator over the records of a `request_messages` value. It yields
/// `Err(Malformed)` once, then ends, at the first record it cannot parse.
#[derive(Clone, Debug)]
pub struct MessageParts<'a> {
    rest: &'a [u8],
    record: usize,
}

impl<'a> MessageParts<'a> {
    /// The parts of `value`, in the format of `request_messages`.
    pub fn new(value: &'a [u8]) -> Self {
        MessageParts { rest: value, record: 0 }
    }

    fn next_record(&mut self) -> Result<MessagePart<'a>, Malformed> {
        let (index, b) = decimal(self.rest, b' ', false)?;
        let sp = b.iter().position(|&c| c == b' ').ok_or(Malformed)?;
        let (kind, b) = (PartKind::parse(&b[..sp])?, &b[sp + 1..]);
        let (role_len, b) = decimal(b, b' ', false)?;
        let (name_len, b) = decimal(b, b' ', false)?;
        let (text_len, b) = decimal(b, b'\n', false)?;
        let (strs, rest) = strings(b, &[role_len, name_len, text_len])?;
        self.rest = rest;
        let record = self.record;
        self.record += 1;
        Ok(MessagePart {
            index: index as u64,
            kind,
            role: strs[0],
            name: strs[1],
            text: strs[2],
            record,
        })
    }
}

impl<'a> Iterator for MessageParts<'a> {
    type Item = Result<MessagePart<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = self.next_record();
        if r.is_err() {
            self.rest = &[];
        }
        Some(r)
    }
}

/// Splits `b` into strings of the given lengths followed by LF, and what
/// follows the LF.
fn strings<'a>(b: &'a [u8], lens: &[i64]) -> Result<([&'a [u8]; 3], &'a [u8]), Malformed> {
    let mut out: [&[u8]; 3] = [&[], &[], &[]];
    let mut at = 0usize;
    for (i, &n) in lens.iter().enumerate() {
        let n = n as usize; // lengths are unsigned and at most 10 digits
        let end = at.checked_add(n).filter(|&e| e <= b.len()).ok_or(Malformed)?;
        out[i] = &b[at..end];
        at = end;
    }
    if b.get(at) != Some(&b'\n') {
        return Err(Malformed);
    }
    Ok((out, &b[at + 1..]))
}

/// Reads a decimal integer written by a canonical formatter (no leading
/// zeros, no `+`, a leading `-` only when `signed` and never on 0), ending
/// at `sep`, and returns it and what follows `sep`.
fn decimal(b: &[u8], sep: u8, signed: bool) -> Result<(i64, &[u8]), Malformed> {
    let (neg, digits) = match b.first() {
        Some(b'-') if signed => (true, &b[1..]),
        _ => (false, b),
    };
    let n = digits.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || n > 10 || digits.get(n) != Some(&sep) || (n > 1 && digits[0] == b'0') {
        return Err(Malformed);
    }
    let v = digits[..n].iter().fold(0i64, |v, &c| v * 10 + i64::from(c - b'0'));
    if neg && v == 0 {
        return Err(Malformed);
    }
    Ok((if neg { -v } else { v }, &digits[n + 1..]))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn part<'a>(index: u64, kind: PartKind, role: &'a str, name: &'a str, text: &'a str) -> MessagePart<'a> {
        MessagePart { index, kind, role: role.as_bytes(), name: name.as_bytes(), text: text.as_bytes(), record: 0 }
    }

    #[test]
    fn message_parts() {
        let tests: Vec<(&str, &[u8], Vec<MessagePart>, bool)> = vec![
            ("empty", b"", vec![], true),
            (
                "three kinds",
                b"0 text 6 0 5\nsystembe ok\n1 tool_call 9 3 8\nassistantget{\"a\":1}\n\n2 tool_result 4 4 2\ntoolid_1ok\n",
                vec![
                    part(0, PartKind::Text, "system", "", "be ok"),
                    part(1, PartKind::ToolCall, "assistant", "get", "{\"a\":1}\n"),
                    part(2, PartKind::ToolResult, "tool", "id_1", "ok"),
                ],
                true,
            ),
            ("text with LF and unicode", "3 text 4 0 7\nuserа\nb\u{e9}c\n".as_bytes(), vec![part(3, PartKind::Text, "user", "", "а\nbéc")], true),
            ("unknown kind", b"0 image 4 0 0\nuser\n", vec![], false),
            ("leading zero", b"01 text 4 0 0\nuser\n", vec![], false),
            ("negative index", b"-1 text 4 0 0\nuser\n", vec![], false),
            ("short text", b"0 text 4 0 9\nuserabc\n", vec![], false),
            ("no final LF", b"0 text 4 0 3\nuserabc", vec![], false),
            ("empty kind", b"0  4 0 3\nuserabc\n", vec![], false),
            ("good then bad", b"0 text 4 0 1\nusera\n1 text", vec![part(0, PartKind::Text, "user", "", "a")], false),
            ("huge length", b"0 text 4 0 9999999999\nuser\n", vec![], false),
        ];
        for (name, value, want, ok) in tests {
            // Records are numbered in order.
            let want: Vec<MessagePart> = want
                .into_iter()
                .enumerate()
                .map(|(i, mut p)| {
                    p.record = i;
                    p
                })
                .collect();
            let mut got = Vec::new();
            let mut good = true;
            for p in MessageParts::new(value) {
                match p {
                    Ok(p) => got.push(p),
                    Err(Malformed) => good = false,
                }
            }
            assert_eq!(got, want, "{}", name);
            assert_eq!(good, ok, "{}: well-formed", name);
        }
    }

    #[test]
    fn tool_call_deltas() {
        // name, value, the deltas as (index, name, arguments), well-formed
        type Case<'a> = (&'a str, &'a [u8], Vec<(i64, &'a str, &'a str)>, bool);
        let tests: Vec<Case> = vec![
            ("empty", b"", vec![], true),
            (
                "two events of one call",
                b"0 9 11\nget_image{\"url\":\"htt\n0 0 17\nps://host/x.png\"}\n",
                vec![(0, "get_image", "{\"url\":\"htt"), (0, "", "ps://host/x.png\"}")],
                true,
            ),
            ("negative index", b"-2 1 0\nf\n", vec![(-2, "f", "")], true),
            ("minus zero", b"-0 1 0\nf\n", vec![], false),
            ("plus", b"+1 1 0\nf\n", vec![], false),
            ("missing LF", b"0 1 0\nfX", vec![], false),
            ("eleven digits", b"12345678901 0 0\n\n", vec![], false),
        ];
        for (name, value, want, ok) in tests {
            let mut got = Vec::new();
            let mut good = true;
            for d in ToolCallDeltas::new(value) {
                match d {
                    Ok(d) => got.push((d.index, std::str::from_utf8(d.name).unwrap(), std::str::from_utf8(d.arguments).unwrap())),
                    Err(Malformed) => good = false,
                }
            }
            assert_eq!(got, want, "{}", name);
            assert_eq!(good, ok, "{}: well-formed", name);
        }
    }

    /// A small deterministic generator for the mutation tests.
    pub(crate) fn lcg(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn mutations_never_panic() {
        // Each mutation of a valid value parses to parts that lie within
        // it, or stops at Malformed, without panicking.
        let valid: &[u8] = b"0 text 6 0 5\nsystembe ok\n1 tool_call 9 3 8\nassistantget{\"a\":1}\n\n2 tool_result 4 4 2\ntoolid_1ok\n";
        let alphabet = b"0123456789 \n-atexoolcr_";
        let mut seed = 1u64;
        for _ in 0..20000 {
            let mut v = valid.to_vec();
            for _ in 0..1 + lcg(&mut seed) % 3 {
                let i = (lcg(&mut seed) as usize) % v.len();
                match lcg(&mut seed) % 3 {
                    0 => v[i] = alphabet[(lcg(&mut seed) as usize) % alphabet.len()],
                    1 => {
                        v.remove(i);
                    }
                    _ => v.insert(i, alphabet[(lcg(&mut seed) as usize) % alphabet.len()]),
                }
            }
            let mut total = 0;
            for p in MessageParts::new(&v).flatten() {
                total += p.role.len() + p.name.len() + p.text.len();
            }
            assert!(total <= v.len());
            let deltas: usize = ToolCallDeltas::new(&v).flatten().map(|d| d.name.len() + d.arguments.len()).sum();
            assert!(deltas <= v.len());
        }
    }

    #[test]
    fn any_input_terminates() {
        // Every prefix of a valid value parses or fails without panicking.
        let value = b"0 text 6 0 5\nsystembe ok\n1 tool_call 9 3 8\nassistantget{\"a\":1}\n\n";
        for n in 0..=value.len() {
            let count = MessageParts::new(&value[..n]).count();
            assert!(count <= 2, "prefix {}", n);
            let _ = ToolCallDeltas::new(&value[..n]).count();
        }
    }
}
