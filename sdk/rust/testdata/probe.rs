//! A plugin that exercises every part of the SDK for probe_test.go: the
//! request header `x-action` picks what the request phase does, and the
//! chunk phase acts on the event's text or tool calls.

use tollgate::json;
use std::time::Duration;

use tollgate::{CallId, CallResponse, Chunk, End, Error, HttpRequest, Level, Phases, Plugin, Request, Response, Verdict};

#[derive(Default)]
struct Probe {
    tag: String,
}

impl Plugin for Probe {
    const PHASES: Phases = Phases::REQUEST.union(Phases::RESPONSE_HEADERS).union(Phases::CHUNK).union(Phases::END);

    fn on_configure(&mut self, config: &[u8]) -> Result<(), String> {
        let v = json::parse(config).map_err(|e| e.to_string())?;
        if let Some(msg) = v.get("refuse").and_then(json::Value::as_str) {
            return Err(msg.to_string());
        }
        self.tag = v.get("tag").and_then(json::Value::as_str).unwrap_or("none").to_string();
        tollgate::log(Level::Info, &format!("probe configured with tag {}", self.tag));
        Ok(())
    }

    fn on_request(&mut self, r: &Request) -> Verdict {
        match self.act(r) {
            Ok(v) => v,
            Err(e) => tollgate::fail_callback(&format!("probe: {}", e)),
        }
    }

    fn on_response_headers(&mut self, r: &Response) -> Verdict {
        // plugintest has no response_headers phase: linking the import is
        // what is checked (its signature, at instantiation).
        match r.header("x-upstream") {
            Ok(_) => Verdict::Continue,
            Err(e) => tollgate::fail_callback(&e.to_string()),
        }
    }

    fn on_chunk(&mut self, c: &Chunk) -> Verdict {
        if c.flags().contains(tollgate::ChunkFlags::TOOL_CALLS) {
            let calls = c.tool_calls().unwrap();
            for d in calls.deltas() {
                let d = d.unwrap();
                let s = format!("{}:{}:{};", d.index, String::from_utf8_lossy(d.name), String::from_utf8_lossy(d.arguments));
                c.emit(s.as_bytes()).unwrap();
            }
            return Verdict::Replace;
        }
        let text = c.text().unwrap();
        assert_eq!(text.len(), c.len());
        match &text[..] {
            b"upper" => c.replace(&text.to_ascii_uppercase()),
            b"stop" => c.stop(b"bye", "length"),
            b"count" => {
                // The state carries a count across the events of a request.
                let n = c.state().unwrap().map(|s| s.len()).unwrap_or(0);
                c.set_state(&vec![b'x'; n + 1]).unwrap();
                c.replace(format!("{}", n + 1).as_bytes())
            }
            _ => Verdict::Continue,
        }
    }

    fn on_call_response(&mut self, c: &CallResponse) -> Verdict {
        match self.respond(c) {
            Ok(v) => v,
            Err(e) => tollgate::fail_callback(&format!("probe: {}", e)),
        }
    }

    fn on_end(&mut self, e: &End) {
        if e.flags().contains(tollgate::EndFlags::COMPLETED) {
            tollgate::metric_add("ends", 1).unwrap();
        }
        tollgate::metric_add("end_text_bytes", e.usage().text_bytes).unwrap();
    }
}

impl Probe {
    fn act(&self, r: &Request) -> Result<Verdict, Error> {
        let action = r.header("x-action")?.unwrap_or_default();
        let up = |v: &str| r.set_header("x-up", v);
        match action.as_str() {
            "headers" => {
                up(&r.header("x-in")?.unwrap_or_else(|| "absent".into()))?;
                r.set_response_header("x-client", &self.tag)?;
                let missing = r.header("x-missing")?;
                r.set_response_header("x-missing", if missing.is_none() { "none" } else { "some" })?;
            }
            "reject" => return Ok(r.reject(451, "", "probe_code", "probe message")),
            "panic" => panic!("probe panic"),
            "fail" => tollgate::fail_callback("probe failing"),
            "facts" => {
                let v = format!("{}|{}|{}", r.model()?, r.endpoint()?, r.request_id()?);
                r.set_fact("probe.k", v.as_bytes())?;
                r.set_state(b"s1")?;
                let fact = r.fact("probe.k")?.unwrap_or_default();
                up(&String::from_utf8_lossy(&fact))?;
                let state = r.state()?.unwrap_or_default();
                r.set_response_header("x-state", &String::from_utf8_lossy(&state))?;
                r.set_response_header("x-nofact", &format!("{:?}", r.fact("probe.none")?))?;
            }
            "body" => {
                let body = r.body()?;
                up(&format!("{}|{}|{}|{:?}", body.len(), r.body_bytes(), r.stream(), r.max_tokens()))?;
            }
            "messages" => {
                let m = r.messages()?;
                let mut s = String::new();
                for p in m.parts() {
                    let p = p.map_err(|_| Error::Malformed)?;
                    s += &format!("{}:{}:{}:{}:{};", p.index, p.kind.name(), String::from_utf8_lossy(p.role), String::from_utf8_lossy(p.name), String::from_utf8_lossy(p.text));
                }
                up(&s.replace('\n', "\\n"))?; // a header value cannot hold LF
                let counts = format!("{}|{}|{}|{:?}", r.message_count(), r.prompt_tokens_estimate(), r.prompt_chars(), r.upstream()?);
                r.set_response_header("x-counts", &counts)?;
            }
            "rewrite" => {
                let m = r.messages()?;
                let mut out = Vec::new();
                for p in m.parts() {
                    let p = p.map_err(|_| Error::Malformed)?;
                    if p.text == b"secret" {
                        out.push(format!("{:?}", r.set_message_text(p.record, "[x]")));
                    }
                }
                out.push(format!("{:?}", r.set_message_text(99, "x")));
                up(&out.join("|"))?;
                r.set_response_header("x-body", &String::from_utf8_lossy(&r.body()?))?;
                r.set_response_header("x-chars", &r.prompt_chars().to_string())?;
            }
            "bigheader" => up(&r.header("x-big")?.unwrap_or_default().len().to_string())?,
            "tenant" => up(&format!("{:?}", r.tenant()?.map(|t| t.id)))?,
            "call" => {
                let res = tollgate::call("svc", b"req")?;
                up(&format!("{}", res.len()))?;
                let missing = tollgate::call("nosuch", b"");
                r.set_response_header("x-nosuch", &format!("{:?}", missing))?;
            }
            "errors" => {
                let e = r.set_header("Host", "x").unwrap_err();
                up(&format!("{:?}|{}", e, e))?;
            }
            "skip" => r.skip_phases(Phases::CHUNK.union(Phases::END))?,
            "dispatch" | "defer" => {
                let a = tollgate::dispatch_http(&HttpRequest {
                    method: "POST",
                    url: "https://probe.test/classify",
                    headers: &[("X-A", "1")],
                    body: b"ping",
                    cache_key: "k",
                    cache_ttl: Duration::from_secs(60),
                })?;
                let b = tollgate::dispatch("svc2", b"q")?;
                let refused = tollgate::dispatch_http(&HttpRequest { url: "https://elsewhere.test/", ..Default::default() });
                r.set_response_header("x-dispatch", &format!("{}|{}|{:?}", a.0, b.0, refused))?;
                return Ok(if action == "defer" { Verdict::Defer } else { Verdict::Pause });
            }
            "expect" => {
                // The second answer is expected: respond sees only the
                // first, so x-up is never set.
                let a = tollgate::dispatch("svc2", b"a")?;
                let b = tollgate::dispatch("svc2", b"b")?;
                tollgate::expect_response(b, &["r2"])?;
                let long = tollgate::expect_response(a, &[&"x".repeat(tollgate::MAX_EXPECT_PREFIX + 1)]);
                let unknown = tollgate::expect_response(CallId(9), &["r2"]);
                r.set_response_header("x-expect", &format!("{:?}|{:?}", long, unknown))?;
                return Ok(Verdict::Pause);
            }
            "respond" => {
                r.set_response_header("x-answered", "whole")?;
                return Ok(r.respond(200, REPLY));
            }
            "respond_events" => {
                // The refused events first: none of them joins the answer.
                let refused = [&b""[..], b"{\"a\":\n1}", b"[DONE]"].map(|e| format!("{:?}", r.respond_event(e))).join("|");
                r.set_response_header("x-refused", &refused)?;
                for e in EVENTS {
                    r.respond_event(e.as_bytes())?;
                }
                // An empty body after the events sets the stream's status.
                return Ok(r.respond(201, b""));
            }
            "respond_refused" => {
                // A status out of range: logged, and the request goes on.
                up(&format!("{:?}", r.respond(101, REPLY)))?;
            }
            "respond_limits" => {
                let over = r.respond_event(&vec![b'x'; tollgate::MAX_ANSWER_EVENT + 1]);
                let max = r.respond_event(&vec![b'x'; tollgate::MAX_ANSWER_EVENT]);
                // A whole reply after events is refused; the answer set is
                // dropped when the verdict is not Respond.
                let whole = r.respond(200, REPLY);
                up(&format!("{:?}|{:?}|{:?}", over, max, whole))?;
                return Ok(whole);
            }
            "respond_call" => {
                tollgate::dispatch("svc2", b"q")?;
                return Ok(Verdict::Pause);
            }
            _ => {}
        }
        Ok(Verdict::Continue)
    }
}

/// The whole reply the "respond" actions answer with.
const REPLY: &[u8] = br#"{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"from the probe"},"finish_reason":"stop"}]}"#;

/// The events of the "respond_events" action's stream.
const EVENTS: [&str; 3] = [
    r#"{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
    r#"{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"streamed"}}]}"#,
    r#"{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
];

impl Probe {
    /// Records each response in the state as "ID:STATUS:BODY:X-B;"; once
    /// both are in, sends the record upstream as x-up.
    fn respond(&self, c: &CallResponse) -> Result<Verdict, Error> {
        let r = c.request().ok_or(Error::NotAllowed)?;
        if r.header("x-action")?.as_deref() == Some("respond_call") {
            // Answers with the call's body as the reply's content.
            let body = String::from_utf8_lossy(&c.body()?).into_owned();
            let reply = format!(r#"{{"object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"{}"}},"finish_reason":"stop"}}]}}"#, body);
            return Ok(r.respond(200, reply.as_bytes()));
        }
        let mut st = c.state()?.unwrap_or_default();
        let body = c.body()?;
        let hdr = c.header("X-B")?.unwrap_or_else(|| "none".into());
        st.extend_from_slice(format!("{}:{}:{}:{};", c.id().0, c.status(), String::from_utf8_lossy(&body), hdr).as_bytes());
        c.set_state(&st)?;
        if st.iter().filter(|&&b| b == b';').count() < 2 {
            return Ok(Verdict::Pause);
        }
        r.set_header("x-up", &String::from_utf8_lossy(&st))?;
        Ok(Verdict::Continue)
    }
}

tollgate::export_plugin!(Probe);
