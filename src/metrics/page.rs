//! The `sluice_status` page: every worker's counters summed at scrape time
//! (the scrape pays for the sums, the request path never does), as JSON
//! (the default), in Prometheus' text exposition format 0.0.4, or as the
//! HTML dashboard ([`super::dashboard`], what a browser's `Accept` gets)
//! that polls the JSON. `?format=` picks one unless the directive fixed it
//! (`sluice_status format=prometheus;`). GET and HEAD only (else 405).

use std::borrow::Cow;
use std::fmt::Write;
use std::sync::Arc;

use super::{BUCKETS_MS, PeerTotals, ZoneTotals};
use crate::config::proxy::Upstream;
use crate::handler::ctx::ReqCtx;
use crate::http::field_value::FieldValue;
use crate::http::request::Method;
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_req;
use crate::worker::stats::Totals;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Prometheus,
    Html,
}

impl Format {
    pub fn parse(v: &str) -> Option<Format> {
        match v {
            "json" => Some(Format::Json),
            "prometheus" => Some(Format::Prometheus),
            "html" => Some(Format::Html),
            _ => None,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Prometheus => "text/plain; version=0.0.4",
            Format::Html => "text/html; charset=utf-8",
        }
    }
}

/// A `sluice_status` location: its fixed format, if any, and the
/// configuration's upstream blocks (built before any server).
#[derive(Debug)]
pub struct Page {
    pub fixed: Option<Format>,
    pub upstreams: Vec<Arc<Upstream>>,
}

/// Everything one scrape reports.
pub struct Snapshot {
    pub conns: Totals,
    /// The configuration generation (1 at start, one more per reload).
    pub generation: u64,
    pub zones: Vec<(Arc<str>, ZoneTotals)>,
    /// (upstream, peer, state, totals).
    pub peers: Vec<(String, Arc<str>, &'static str, PeerTotals)>,
}

/// Sums every worker's counters now.
pub fn snapshot(page: &Page) -> Snapshot {
    let names = super::zone_names();
    let zones = names.iter().cloned().zip(super::zone_totals(names.len())).collect();
    let now = crate::clock::now_secs();
    let mut peers = Vec::new();
    for u in &page.upstreams {
        for (i, p) in u.peers.iter().enumerate() {
            let t = super::peer_totals(&u.name, &p.name, now);
            let checked_down = u.check.as_ref().and_then(|c| c.peer_down(i)).unwrap_or(false);
            let state = if p.down {
                "down"
            } else if checked_down {
                "unhealthy"
            } else if t.unavailable {
                "unavail"
            } else {
                "up"
            };
            peers.push((u.name.clone(), p.name.clone(), state, t));
        }
    }
    Snapshot {
        conns: crate::worker::stats::totals(),
        generation: crate::upstream::check::current_generation(),
        zones,
        peers,
    }
}

/// nginx's `ngx_http_arg`: the first `name=` argument's value.
fn arg<'a>(args: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    args.split(|&b| b == b'&').find_map(|kv| {
        let (k, v) = kv.split_at(kv.iter().position(|&b| b == b'=')?);
        k.eq_ignore_ascii_case(name).then(|| &v[1..])
    })
}

pub fn respond<'c>(ctx: &ReqCtx<'c, '_>, page: &Page) -> Response<'c> {
    if !matches!(ctx.req.method(), Method::Get | Method::Head) {
        return crate::handler::error(ctx, 405);
    }
    let mut format = Format::Json;
    let query = ctx.req.args.as_deref().and_then(|a| arg(a, b"format"));
    // Neither the directive nor the query chose: Accept does.
    let negotiated = page.fixed.is_none() && query.is_none();
    if let Some(f) = page.fixed {
        // A fixed dashboard still answers its own polls.
        format = if f == Format::Html && query == Some(b"json") { Format::Json } else { f };
    } else if let Some(v) = query {
        match std::str::from_utf8(v).ok().and_then(Format::parse) {
            Some(f) => format = f,
            None => {
                log_req!(ctx, Level::Error, "sluice_status, bad format: \"{}\"", String::from_utf8_lossy(v));
                return crate::handler::error(ctx, 400);
            }
        }
    } else if ctx.req.header("accept").is_some_and(super::dashboard::prefers_html) {
        format = Format::Html;
    }
    let text = match format {
        Format::Html => return super::dashboard::response(negotiated),
        Format::Json => json(&snapshot(page)),
        Format::Prometheus => prometheus(&snapshot(page)),
    };
    let mut r = Response::new(200);
    r.content_type = Some(Cow::Borrowed(format.content_type()));
    if negotiated {
        r.headers.push((Cow::Borrowed("Vary"), FieldValue::from_static(b"Accept")));
    }
    r.body = Body::Owned(text.into_bytes());
    r
}

/// A JSON string literal.
fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The upper bound of time bucket `j` in seconds, as Prometheus writes
/// floats (`0.005`, `1`, `2.5`, `+Inf`).
fn le(j: usize) -> String {
    BUCKETS_MS.get(j).map_or_else(|| "+Inf".to_string(), |&ms| (ms as f64 / 1000.0).to_string())
}

/// Milliseconds as seconds with three decimals.
fn secs(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

pub fn json(s: &Snapshot) -> String {
    let c = &s.conns;
    let mut o = String::with_capacity(512);
    let _ = write!(
        o,
        "{{\"generation\":{},\"connections\":{{\"accepted\":{},\"handled\":{},\"active\":{},\"reading\":{},\"writing\":{},\"waiting\":{}}},\"requests\":{{\"total\":{}}},\"server_zones\":{{",
        s.generation, c.accepts, c.handled, c.active, c.reading, c.writing, c.waiting, c.requests
    );
    for (i, (name, z)) in s.zones.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        json_str(&mut o, name);
        let r = &z.responses;
        let _ = write!(
            o,
            ":{{\"requests\":{},\"responses\":{{\"1xx\":{},\"2xx\":{},\"3xx\":{},\"4xx\":{},\"5xx\":{}}},\"received\":{},\"sent\":{},\"request_time\":{{\"sum\":{},\"buckets\":{{",
            z.requests,
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            z.received,
            z.sent,
            secs(z.time_ms)
        );
        let mut cum = 0u64;
        for (j, n) in z.buckets.iter().enumerate() {
            cum = cum.wrapping_add(*n);
            let le = le(j);
            let _ = write!(o, "{}\"{le}\":{cum}", if j > 0 { "," } else { "" });
        }
        o.push_str("}}}");
    }
    o.push_str("},\"upstreams\":{");
    let mut last: Option<&str> = None;
    for (up, peer, state, t) in &s.peers {
        if last != Some(up.as_str()) {
            if last.is_some() {
                o.push_str("]},");
            }
            json_str(&mut o, up);
            o.push_str(":{\"peers\":[");
            last = Some(up);
        } else {
            o.push(',');
        }
        o.push_str("{\"server\":");
        json_str(&mut o, peer);
        let _ = write!(
            o,
            ",\"state\":\"{state}\",\"active\":{},\"requests\":{},\"fails\":{}}}",
            t.active, t.requests, t.failures
        );
    }
    if last.is_some() {
        o.push_str("]}");
    }
    o.push_str("}}\n");
    o
}

/// A Prometheus label value: backslash, double quote and newline escaped.
fn label(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))
}

fn head(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = write!(o, "# HELP sluice_{name} {help}\n# TYPE sluice_{name} {kind}\n");
}

pub fn prometheus(s: &Snapshot) -> String {
    let c = &s.conns;
    let mut o = String::with_capacity(2048);
    for (name, kind, help, v) in [
        ("config_generation", "gauge", "Configuration generation: 1 at start, one more per reload.", s.generation),
        ("connections_accepted_total", "counter", "Client connections accepted.", c.accepts),
        ("connections_handled_total", "counter", "Client connections handled.", c.handled),
        ("connections_active", "gauge", "Open client connections.", c.active),
        ("connections_reading", "gauge", "Connections reading a request head.", c.reading),
        ("connections_writing", "gauge", "Requests being answered.", c.writing),
        ("connections_waiting", "gauge", "Idle keep-alive connections.", c.waiting),
        ("http_requests_total", "counter", "Client requests.", c.requests),
    ] {
        head(&mut o, name, kind, help);
        let _ = writeln!(o, "sluice_{name} {v}");
    }
    if !s.zones.is_empty() {
        head(&mut o, "zone_requests_total", "counter", "Requests finished in a status_zone.");
        for (z, t) in &s.zones {
            let _ = writeln!(o, "sluice_zone_requests_total{{zone=\"{}\"}} {}", label(z), t.requests);
        }
        head(&mut o, "zone_responses_total", "counter", "Responses of a status_zone by status class.");
        for (z, t) in &s.zones {
            for (i, n) in t.responses.iter().enumerate() {
                let _ = writeln!(o, "sluice_zone_responses_total{{zone=\"{}\",code=\"{}xx\"}} {n}", label(z), i + 1);
            }
        }
        head(&mut o, "zone_received_bytes_total", "counter", "Bytes received from clients in a status_zone.");
        for (z, t) in &s.zones {
            let _ = writeln!(o, "sluice_zone_received_bytes_total{{zone=\"{}\"}} {}", label(z), t.received);
        }
        head(&mut o, "zone_sent_bytes_total", "counter", "Bytes sent to clients in a status_zone.");
        for (z, t) in &s.zones {
            let _ = writeln!(o, "sluice_zone_sent_bytes_total{{zone=\"{}\"}} {}", label(z), t.sent);
        }
        head(&mut o, "zone_request_duration_seconds", "histogram", "Request time in a status_zone.");
        for (z, t) in &s.zones {
            let z = label(z);
            let mut cum = 0u64;
            for (j, n) in t.buckets.iter().enumerate() {
                cum = cum.wrapping_add(*n);
                let le = le(j);
                let _ = writeln!(o, "sluice_zone_request_duration_seconds_bucket{{zone=\"{z}\",le=\"{le}\"}} {cum}");
            }
            let _ = writeln!(o, "sluice_zone_request_duration_seconds_sum{{zone=\"{z}\"}} {}", secs(t.time_ms));
            let _ = writeln!(o, "sluice_zone_request_duration_seconds_count{{zone=\"{z}\"}} {cum}");
        }
    }
    if !s.peers.is_empty() {
        type Get = fn(&'static str, &PeerTotals) -> u64;
        let rows: [(&str, &str, &str, Get); 4] = [
            (
                "upstream_peer_up",
                "gauge",
                "1 when the peer may be picked (not down, unhealthy or failed out).",
                |st, _| u64::from(st == "up"),
            ),
            ("upstream_peer_active", "gauge", "Requests of this peer in progress.", |_, t| t.active),
            ("upstream_peer_requests_total", "counter", "Requests sent to the peer.", |_, t| t.requests),
            ("upstream_peer_fails_total", "counter", "Failed attempts to the peer.", |_, t| t.failures),
        ];
        for (name, kind, help, get) in rows {
            head(&mut o, name, kind, help);
            for (up, peer, state, t) in &s.peers {
                let _ = writeln!(
                    o,
                    "sluice_{name}{{upstream=\"{}\",peer=\"{}\"}} {}",
                    label(up),
                    label(peer),
                    get(state, t)
                );
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        let mut z = ZoneTotals { requests: 3, received: 30, sent: 300, time_ms: 1205, ..Default::default() };
        z.responses[1] = 2;
        z.responses[3] = 1;
        z.buckets[0] = 2;
        z.buckets[7] = 1;
        Snapshot {
            conns: Totals { active: 1, accepts: 2, handled: 2, requests: 4, reading: 0, writing: 1, waiting: 0 },
            generation: 1,
            zones: vec![(Arc::from("a\"b\\c"), z)],
            peers: vec![
                ("up".into(), Arc::from("127.0.0.1:1"), "up", PeerTotals { requests: 5, ..Default::default() }),
                ("up".into(), Arc::from("127.0.0.1:2"), "unavail", PeerTotals { failures: 1, ..Default::default() }),
            ],
        }
    }

    #[test]
    fn prometheus_escapes_and_accumulates() {
        let p = prometheus(&sample());
        assert!(p.contains("sluice_zone_requests_total{zone=\"a\\\"b\\\\c\"} 3\n"), "{p}");
        assert!(p.contains("le=\"0.005\"} 2\n") && p.contains("le=\"1\"} 3\n") && p.contains("le=\"+Inf\"} 3\n"));
        assert!(p.contains("sluice_zone_request_duration_seconds_sum{zone=\"a\\\"b\\\\c\"} 1.205\n"));
        assert!(p.contains("sluice_upstream_peer_up{upstream=\"up\",peer=\"127.0.0.1:2\"} 0\n"));
        assert!(p.contains("# TYPE sluice_zone_request_duration_seconds histogram\n"));
    }

    #[test]
    fn json_shape() {
        let j = json(&sample());
        assert!(j.starts_with("{\"generation\":1,\"connections\":{\"accepted\":2,"), "{j}");
        assert!(j.contains("\"a\\\"b\\\\c\":{\"requests\":3,\"responses\":{\"1xx\":0,\"2xx\":2,"), "{j}");
        assert!(j.contains("\"upstreams\":{\"up\":{\"peers\":[{\"server\":\"127.0.0.1:1\",\"state\":\"up\""), "{j}");
        assert!(j.ends_with("]}}}\n"), "{j}");
    }
}
