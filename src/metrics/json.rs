//! The `sluice_status` page as JSON (`application/json`): one object, the
//! keys documented in docs/configuration.md (`sluice_status`). Written by
//! hand: a few `write!`s into one string, no serializer on the scrape path.

use std::fmt::Write;

use super::hist::{Hist, NBOUNDS, le, ns_secs, us_secs};
use super::snapshot::{CacheSnap, PeerSnap, Snapshot, UpstreamSnap};
use super::worker::CACHE_STATUSES;

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

/// `{"sum":SECONDS,"count":N,"p50":SECONDS,"p90":..,"p99":..,"buckets":{..}}`:
/// the percentiles as [`Hist::quantile`] estimates them (null without
/// observations or past the last bound), and the cumulative count at each
/// bound where it grows and at the bound just below each such one (the
/// bucket's lower edge), then `+Inf` (the count). Empty stretches are left
/// out: a histogram of fast local requests is a few keys, not 180, and the
/// count at a bound not listed is that of the next lower listed one.
pub(super) fn hist(o: &mut String, h: &Hist) {
    let _ = write!(o, "{{\"sum\":{},\"count\":{}", us_secs(h.sum_us), h.count());
    for (name, p) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        match h.quantile(p) {
            Some(q) if q.is_finite() => {
                let _ = write!(o, ",\"{name}\":{}", ns_secs((q * 1e9).round() as u64));
            }
            _ => {
                let _ = write!(o, ",\"{name}\":null");
            }
        }
    }
    o.push_str(",\"buckets\":{");
    let (mut listed, mut below) = (None, 0u64);
    let key = |o: &mut String, listed: &mut Option<usize>, j: usize, n: u64| {
        let _ = write!(o, "{}\"{}\":{n}", if listed.is_some() { "," } else { "" }, le(j));
        *listed = Some(j);
    };
    for (j, cum) in h.cumulative() {
        let own = h.buckets[j];
        if own > 0 && j > 0 && listed != Some(j - 1) {
            key(o, &mut listed, j - 1, below);
        }
        if own > 0 || j == NBOUNDS {
            key(o, &mut listed, j, cum);
        }
        below = cum;
    }
    o.push_str("}}");
}

fn classes(o: &mut String, r: &[u64; 5]) {
    let _ = write!(o, "{{\"1xx\":{},\"2xx\":{},\"3xx\":{},\"4xx\":{},\"5xx\":{}}}", r[0], r[1], r[2], r[3], r[4]);
}

/// `,` before every item but the first.
fn sep(o: &mut String, i: usize) {
    if i > 0 {
        o.push(',');
    }
}

pub fn json(s: &Snapshot) -> String {
    let c = &s.conns;
    let a = &s.all;
    let mut o = String::with_capacity(1024);
    let _ = write!(
        o,
        "{{\"generation\":{},\"time_ms\":{},\"load_ms\":{},\"reloads\":{{\"ok\":{},\"failed\":{}}},\
         \"connections\":{{\"accepted\":{},\"handled\":{},\"active\":{},\"reading\":{},\"writing\":{},\"waiting\":{},\"parked\":{}}},\
         \"requests\":{{\"total\":{}}},\"responses\":",
        s.generation,
        s.time_ms,
        s.load_ms,
        s.reloads_ok,
        s.reloads_failed,
        c.accepts,
        c.handled,
        c.active,
        c.reading,
        c.writing,
        c.waiting,
        a.parked,
        c.requests
    );
    classes(&mut o, &a.responses);
    o.push_str(",\"request_time\":");
    hist(&mut o, &a.time);
    let _ = write!(
        o,
        ",\"ssl\":{{\"handshakes\":{{\"TLSv1.2\":{},\"TLSv1.3\":{}}},\"resumed\":{{\"TLSv1.2\":{},\"TLSv1.3\":{}}},\"failed\":{}}},\
         \"http2\":{{\"connections\":{},\"streams\":{}}},\"http3\":{{\"connections\":{},\"streams\":{}}},\"server_zones\":{{",
        a.handshakes[0],
        a.handshakes[1],
        a.resumed[0],
        a.resumed[1],
        a.handshakes_failed,
        a.h2_connections,
        a.h2_streams,
        a.h3_connections,
        a.h3_streams
    );
    for (i, (name, z)) in s.zones.iter().enumerate() {
        sep(&mut o, i);
        json_str(&mut o, name);
        let _ = write!(o, ":{{\"requests\":{},\"responses\":", z.requests);
        classes(&mut o, &z.responses);
        let _ = write!(o, ",\"received\":{},\"sent\":{},\"request_time\":", z.received, z.sent);
        hist(&mut o, &z.time);
        o.push('}');
    }
    o.push_str("},\"caches\":{");
    for (i, c) in s.caches.iter().enumerate() {
        sep(&mut o, i);
        cache(&mut o, c);
    }
    o.push_str("},\"upstreams\":{");
    for (i, u) in s.upstreams.iter().enumerate() {
        sep(&mut o, i);
        upstream(&mut o, u);
    }
    o.push_str("},\"stream\":{\"server_zones\":{");
    for (i, (name, z)) in s.stream_zones.iter().enumerate() {
        sep(&mut o, i);
        json_str(&mut o, name);
        let c = &z.sessions;
        let _ = write!(
            o,
            ":{{\"processing\":{},\"connections\":{},\"sessions\":{{\"2xx\":{},\"4xx\":{},\"5xx\":{},\"total\":{}}},\
             \"discarded\":{},\"received\":{},\"sent\":{}}}",
            z.processing,
            z.connections,
            c[1],
            c[3],
            c[4],
            z.total(),
            z.discarded,
            z.received,
            z.sent
        );
    }
    o.push_str("},\"upstreams\":{");
    for (i, u) in s.stream_upstreams.iter().enumerate() {
        sep(&mut o, i);
        stream_upstream(&mut o, u);
    }
    let m = &s.mail;
    o.push_str("}},\"mail\":{\"sessions\":{");
    for (i, p) in super::l4::MAIL_PROTOCOLS.iter().enumerate() {
        sep(&mut o, i);
        let _ = write!(o, "\"{p}\":{{\"total\":{},\"processing\":{}}}", m.sessions[i], m.processing[i]);
    }
    o.push_str("},\"auth_http\":{");
    for (i, r) in super::l4::AUTH_RESULTS.iter().enumerate() {
        sep(&mut o, i);
        let _ = write!(o, "\"{r}\":{}", m.auth[i]);
    }
    o.push_str("}}}\n");
    o
}

/// A stream upstream in NGINX Plus's `stream.upstreams` shape: per peer,
/// `connections` (sessions given to it), bytes, `fails` and `unavail`,
/// the average times in ms, and `selected`, when the balancer last gave
/// it a session, as Plus writes it (null before any of each).
fn stream_upstream(o: &mut String, u: &UpstreamSnap) {
    json_str(o, &u.name);
    o.push_str(":{");
    peers(o, u, |o, p| {
        let t = &p.totals;
        let _ = write!(
            o,
            ",\"state\":\"{}\",\"active\":{},\"connections\":{},\"sent\":{},\"received\":{},\"fails\":{},\"unavail\":{}",
            p.state, t.active, t.requests, t.traffic.sent, t.traffic.received, t.failures, t.unavail
        );
        for (k, key) in ["connect_time", "first_byte_time", "response_time"].iter().enumerate() {
            match t.traffic.average_ms(k) {
                Some(ms) => {
                    let _ = write!(o, ",\"{key}\":{ms}");
                }
                None => {
                    let _ = write!(o, ",\"{key}\":null");
                }
            }
        }
        match t.traffic.selected_ms {
            0 => o.push_str(",\"selected\":null"),
            ms => {
                let _ = write!(o, ",\"selected\":\"{}\"", iso8601_ms(ms));
            }
        }
    });
    o.push('}');
}

/// Unix milliseconds as NGINX Plus's API writes times:
/// `2026-11-30T16:18:11.123Z` (UTC).
fn iso8601_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = crate::clock::civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, ms % 1000)
}

/// `"peers":[...]` of an upstream, each peer's own fields written by
/// `fields` between its name and its health (the http and stream shapes).
fn peers(o: &mut String, u: &UpstreamSnap, fields: impl Fn(&mut String, &PeerSnap)) {
    o.push_str("\"peers\":[");
    for (i, p) in u.peers.iter().enumerate() {
        sep(o, i);
        o.push_str("{\"server\":");
        json_str(o, &p.name);
        fields(o, p);
        if let Some(h) = &p.health {
            let _ =
                write!(o, ",\"health\":{{\"checks\":{},\"fails\":{},\"last\":\"{}\"}}", h.checks, h.fails, h.last());
        }
        o.push('}');
    }
    o.push(']');
}

fn cache(o: &mut String, c: &CacheSnap) {
    json_str(o, &c.name);
    o.push_str(":{");
    for (i, (name, n)) in CACHE_STATUSES.iter().zip(c.counts.statuses).enumerate() {
        sep(o, i);
        let _ = write!(o, "\"{}\":{n}", name.to_ascii_lowercase());
    }
    let _ = write!(o, ",\"evictions\":{},\"size\":{}", c.counts.evictions, c.size);
    if let Some(max) = c.max_size {
        let _ = write!(o, ",\"max_size\":{max}");
    }
    let _ = write!(o, ",\"memory_size\":{},\"entries\":{}}}", c.memory_size, c.entries);
}

fn upstream(o: &mut String, u: &UpstreamSnap) {
    json_str(o, &u.name);
    o.push(':');
    o.push('{');
    peers(o, u, |o, p| {
        let t = &p.totals;
        let _ = write!(
            o,
            ",\"state\":\"{}\",\"active\":{},\"requests\":{},\"fails\":{}",
            p.state, t.active, t.requests, t.failures
        );
    });
    if let Some(q) = &u.queue {
        let _ = write!(o, ",\"queue\":{{\"length\":{},\"waits\":{},\"timeouts\":{}}}", q.length, q.waits, q.timeouts);
    }
    o.push_str(",\"response_time\":");
    hist(o, &u.totals.response);
    o.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plus_times() {
        assert_eq!(iso8601_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_ms(951_782_400_007), "2000-02-29T00:00:00.007Z");
        assert_eq!(iso8601_ms(1_795_356_154_999), "2026-11-22T14:02:34.999Z");
        assert_eq!(iso8601_ms(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn json_shape() {
        let j = json(&super::super::snapshot::sample());
        assert!(j.starts_with("{\"generation\":1,\"time_ms\":1700000000123,\"load_ms\":1700000000000,"), "{j}");
        assert!(j.contains("\"reloads\":{\"ok\":2,\"failed\":1},\"connections\":{\"accepted\":2,"), "{j}");
        assert!(j.contains("\"waiting\":0,\"parked\":0},\"requests\":{\"total\":4},"), "{j}");
        assert!(j.contains("\"responses\":{\"1xx\":0,\"2xx\":5,\"3xx\":1,\"4xx\":1,\"5xx\":0},"), "{j}");
        // Six requests of 1 ms and one of 100 s: the buckets where the count
        // grows, the bound below each, and +Inf.
        assert!(
            j.contains(
                "\"request_time\":{\"sum\":100.006000,\"count\":7,\"p50\":0.000964667,\"p90\":null,\"p99\":null,\
                 \"buckets\":{\"0.0009152\":0,\"0.001\":6,\"64.22\":6,\"+Inf\":7}}"
            ),
            "{j}"
        );
        assert!(
            j.contains(
                "\"request_time\":{\"sum\":1.205000,\"count\":3,\"p50\":0.003028,\"p90\":1.271,\"p99\":1.3007,\
                 \"buckets\":{\"0.001859\":0,\"0.002031\":1,\"0.002894\":1,\"0.003162\":2,\"1.194\":2,\"1.304\":3,\"+Inf\":3}}"
            ),
            "{j}"
        );
        assert!(j.contains("\"ssl\":{\"handshakes\":{\"TLSv1.2\":1,\"TLSv1.3\":4},\"resumed\":{\"TLSv1.2\":0,\"TLSv1.3\":2},\"failed\":0}"));
        assert!(j.contains("\"http2\":{\"connections\":2,\"streams\":7}"), "{j}");
        assert!(j.contains("\"a\\\"b\\\\c\":{\"requests\":3,\"responses\":{\"1xx\":0,\"2xx\":2,"), "{j}");
        assert!(j.contains("\"caches\":{\"c1\":{\"hit\":4,\"miss\":2,\"expired\":0,\"stale\":0,\"updating\":0,\"revalidated\":0,\"bypass\":0,\"evictions\":3,\"size\":4096,\"max_size\":1048576,\"memory_size\":300,\"entries\":2}}"), "{j}");
        assert!(j.contains("\"upstreams\":{\"up\":{\"peers\":[{\"server\":\"127.0.0.1:1\",\"state\":\"up\""), "{j}");
        assert!(
            j.contains(
                "\"fails\":0,\"health\":{\"checks\":0,\"fails\":0,\"last\":\"none\"}},{\"server\":\"127.0.0.1:2\""
            ),
            "{j}"
        );
        assert!(
            j.contains("\"queue\":{\"length\":1,\"waits\":3,\"timeouts\":1},\"response_time\":{\"sum\":0.012000,"),
            "{j}"
        );
        assert!(
            j.contains(
                "\"buckets\":{\"0.004924\":0,\"0.00538\":1,\"0.006422\":1,\"0.007017\":2,\"+Inf\":2}}}},\"stream\":"
            ),
            "{j}"
        );
        assert!(
            j.contains(
                "\"stream\":{\"server_zones\":{\"tcp1\":{\"processing\":1,\"connections\":4,\
                 \"sessions\":{\"2xx\":2,\"4xx\":0,\"5xx\":1,\"total\":3},\"discarded\":1,\"received\":9,\"sent\":12}},\
                 \"upstreams\":{\"sb\":{\"peers\":[{\"server\":\"127.0.0.1:3\",\"state\":\"up\",\"active\":0,\
                 \"connections\":3,\"sent\":9,\"received\":12,\"fails\":1,\"unavail\":1,\"connect_time\":1,\
                 \"first_byte_time\":5,\"response_time\":null,\"selected\":\"2023-11-14T22:13:20.123Z\"}]}}}"
            ),
            "{j}"
        );
        assert!(
            j.ends_with(
                "\"mail\":{\"sessions\":{\"imap\":{\"total\":1,\"processing\":0},\"pop3\":{\"total\":0,\"processing\":0},\
                 \"smtp\":{\"total\":2,\"processing\":1}},\"auth_http\":{\"ok\":2,\"failed\":1,\"error\":0}}}\n"
            ),
            "{j}"
        );
    }
}
