//! denyguard, a Tollgate plugin: rejects requests whose messages contain a
//! denied term, and stops replies that produce one. See README.md.

use tollgate::json::{self, Value};
use tollgate::{Chunk, Level, Messages, PartKind, Phases, Plugin, Request, Verdict};

/// The longest term accepted, in bytes: the stream state keeps at most
/// this many bytes minus one between events.
const MAX_TERM: usize = 256;

/// The guard: its config, and buffers reused from callback to callback
/// (never data of one request: the next callback of a request may run on
/// another instance).
#[derive(Default)]
struct DenyGuard {
    /// The terms, in ASCII lower case.
    deny: Vec<Vec<u8>>,
    /// What a stopped reply ends with.
    replacement: Vec<u8>,
    /// The longest term's length.
    longest: usize,
    /// The previous events' tail followed by this event's text; kept to
    /// reuse its allocation.
    window: Vec<u8>,
    /// The request's messages; kept to reuse the allocation.
    messages: Messages,
}

impl Plugin for DenyGuard {
    const PHASES: Phases = Phases::REQUEST.union(Phases::CHUNK);

    fn on_configure(&mut self, config: &[u8]) -> Result<(), String> {
        let cfg = json::parse(config).map_err(|e| format!("denyguard: the config is not JSON ({}): write {}", e, EXAMPLE))?;
        let members = cfg.as_object().ok_or_else(|| format!("denyguard: the config is {}, not an object: write {}", cfg.kind(), EXAMPLE))?;
        self.replacement = b"[blocked]".to_vec();
        for (key, v) in members {
            match key.as_str() {
                "deny" => self.deny = terms(v)?,
                "replacement" => {
                    let s = v.as_str().ok_or_else(|| format!("denyguard: \"replacement\" is {}, not a string: write e.g. \"[blocked]\"", v.kind()))?;
                    self.replacement = s.as_bytes().to_vec();
                }
                _ => return Err(format!("denyguard: unknown config field {:?}: the fields are \"deny\" and \"replacement\"", key)),
            }
        }
        if self.deny.is_empty() {
            return Err(format!("denyguard: \"deny\" is missing: write {}", EXAMPLE));
        }
        self.longest = self.deny.iter().map(Vec::len).max().unwrap_or(0);
        Ok(())
    }

    fn on_request(&mut self, r: &Request) -> Verdict {
        if let Err(e) = r.messages_into(&mut self.messages) {
            tollgate::fail_callback(&format!("denyguard: reading the messages: {}", e));
        }
        for part in self.messages.parts() {
            let part = match part {
                Ok(p) => p,
                Err(_) => tollgate::fail_callback("denyguard: the host's messages are malformed"),
            };
            // Tool calls are the assistant's own earlier output, which the
            // chunk phase checked when it was produced: not scanned.
            let scanned = matches!(part.kind, PartKind::Text | PartKind::ToolResult);
            if scanned && self.find(part.text) {
                // The log and the error never name the term.
                tollgate::log(Level::Info, "denyguard: request blocked");
                return r.reject(400, "invalid_request_error", "content_blocked", "The request contains a blocked term.");
            }
        }
        Verdict::Continue
    }

    fn on_chunk(&mut self, c: &Chunk) -> Verdict {
        if c.is_empty() {
            return Verdict::Continue;
        }
        let mut window = std::mem::take(&mut self.window);
        let verdict = self.check_chunk(c, &mut window);
        self.window = window;
        verdict
    }
}

const EXAMPLE: &str = r#"{"deny": ["secret"], "replacement": "[blocked]"}"#;

/// The deny terms of the config, in lower case.
fn terms(v: &Value) -> Result<Vec<Vec<u8>>, String> {
    let list = v.as_array().ok_or_else(|| format!("denyguard: \"deny\" is {}, not an array: write an array of terms, e.g. {}", v.kind(), EXAMPLE))?;
    if list.is_empty() {
        return Err(format!("denyguard: \"deny\" is empty: list at least one term, e.g. {}", EXAMPLE));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let t = t.as_str().ok_or_else(|| format!("denyguard: deny[{}] is {}, not a string: every term is a string", i, t.kind()))?;
        if t.is_empty() || t.len() > MAX_TERM {
            return Err(format!("denyguard: deny[{}] is {} bytes long: a term has 1 to {} bytes", i, t.len(), MAX_TERM));
        }
        out.push(t.to_ascii_lowercase().into_bytes());
    }
    Ok(out)
}

impl DenyGuard {
    /// Whether `text` contains a term, ASCII case-insensitively.
    fn find(&self, text: &[u8]) -> bool {
        self.deny.iter().any(|t| contains_fold(text, t))
    }

    /// Checks the previous events' tail (the request's state) followed by
    /// this event's text, so that a term split across events is caught when
    /// its last byte arrives; the client never gets the whole term.
    fn check_chunk(&self, c: &Chunk, window: &mut Vec<u8>) -> Verdict {
        window.clear();
        if !c.is_whole() {
            if let Err(e) = c.state_into(window) {
                tollgate::fail_callback(&format!("denyguard: reading the state: {}", e));
            }
        }
        let kept = window.len();
        if let Err(e) = c.text_into(window) {
            tollgate::fail_callback(&format!("denyguard: reading the text: {}", e));
        }
        if self.find(window) {
            tollgate::log(Level::Info, "denyguard: reply stopped");
            return c.stop(&self.replacement, "content_filter");
        }
        if c.is_whole() {
            return Verdict::Continue;
        }
        let tail = &window[window.len().saturating_sub(self.longest.saturating_sub(1))..];
        if kept != 0 || !tail.is_empty() {
            if let Err(e) = c.set_state(tail) {
                tollgate::fail_callback(&format!("denyguard: saving the state: {}", e));
            }
        }
        Verdict::Continue
    }
}

/// Whether `text` contains `term` (already lower case), ignoring ASCII
/// case.
fn contains_fold(text: &[u8], term: &[u8]) -> bool {
    term.len() <= text.len() && text.windows(term.len()).any(|w| w.iter().zip(term).all(|(a, b)| a.to_ascii_lowercase() == *b))
}

tollgate::export_plugin!(DenyGuard);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_fold_cases() {
        let tests = [("a SeCrEt b", "secret", true), ("secre", "secret", false), ("", "a", false), ("p@SSW0RD", "p@ssw0rd", true), ("é secret", "secret", true)];
        for (text, term, want) in tests {
            assert_eq!(contains_fold(text.as_bytes(), term.as_bytes()), want, "{:?} in {:?}", term, text);
        }
    }

    #[test]
    fn config_errors() {
        let tests = [
            (r#"{"deny": ["a"]}"#, ""),
            (r#"[]"#, "not an object"),
            (r#"{}"#, "\"deny\" is missing"),
            (r#"{"deny": []}"#, "\"deny\" is empty"),
            (r#"{"deny": "a"}"#, "\"deny\" is a string, not an array"),
            (r#"{"deny": [""]}"#, "deny[0] is 0 bytes long"),
            (r#"{"deny": ["a", 1]}"#, "deny[1] is a number, not a string"),
            (r#"{"deny": ["a"], "replacement": 1}"#, "\"replacement\" is a number, not a string"),
            (r#"{"deny": ["a"], "extra": 1}"#, "unknown config field \"extra\""),
            (r#"{"deny": "#, "not JSON"),
        ];
        for (cfg, want) in tests {
            let got = DenyGuard::default().on_configure(cfg.as_bytes());
            match (got, want) {
                (Ok(()), "") => {}
                (Err(msg), w) if !w.is_empty() && msg.contains(w) && msg.starts_with("denyguard: ") => {}
                (got, _) => panic!("{}: got {:?}, want {:?}", cfg, got, want),
            }
        }
    }
}
