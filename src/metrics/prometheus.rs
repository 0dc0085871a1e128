//! The `sluice_status` page in Prometheus' text exposition format 0.0.4
//! (`text/plain; version=0.0.4`): every family with its HELP and TYPE,
//! counters ending in `_total`, times as `_seconds` histograms
//! (`_bucket`/`_sum`/`_count`, cumulative buckets), label values escaped.

use std::borrow::Cow;
use std::fmt::Write;

use super::hist::{Hist, le, us_secs};
use super::snapshot::{PeerSnap, Snapshot, UpstreamSnap};
use super::worker::CACHE_STATUSES;

/// A Prometheus label value: backslash, double quote and newline escaped.
fn label(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))
}

/// Milliseconds as seconds with three decimals.
fn secs(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

fn head(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = write!(o, "# HELP sluice_{name} {help}\n# TYPE sluice_{name} {kind}\n");
}

/// The samples of histogram `name` for one label set (`labels`: already
/// escaped `k="v"` pairs, or empty): every bucket of [`super::hist`],
/// empty or not, so the `le` set is the same fixed one in every scrape
/// (histogram_quantile over it is within 10 % from 10 µs to 60 s).
fn histogram(o: &mut String, name: &str, labels: &str, h: &Hist) {
    let comma = if labels.is_empty() { "" } else { "," };
    for (j, cum) in h.cumulative() {
        let _ = writeln!(o, "sluice_{name}_bucket{{{labels}{comma}le=\"{}\"}} {cum}", le(j));
    }
    let braces = |l: &str| if l.is_empty() { String::new() } else { format!("{{{l}}}") };
    let _ = writeln!(o, "sluice_{name}_sum{} {}", braces(labels), us_secs(h.sum_us));
    let _ = writeln!(o, "sluice_{name}_count{} {}", braces(labels), h.count());
}

/// One family with one sample per item of `items` (`labels` gives the
/// escaped label pairs, `value` the number; None leaves the item out).
fn family<T>(
    o: &mut String,
    (name, kind, help): (&str, &str, &str),
    items: &[T],
    labels: impl Fn(&T) -> String,
    value: impl Fn(&T) -> Option<u64>,
) {
    let rows: Vec<(String, u64)> = items.iter().filter_map(|t| Some((labels(t), value(t)?))).collect();
    if rows.is_empty() {
        return;
    }
    head(o, name, kind, help);
    for (l, v) in rows {
        let _ = writeln!(o, "sluice_{name}{{{l}}} {v}");
    }
}

pub fn prometheus(s: &Snapshot) -> String {
    let c = &s.conns;
    let a = &s.all;
    let mut o = String::with_capacity(4096);
    for (name, kind, help, v) in [
        ("config_generation", "gauge", "Configuration generation: 1 at start, one more per reload.", s.generation),
        ("connections_accepted_total", "counter", "Client connections accepted.", c.accepts),
        ("connections_handled_total", "counter", "Client connections handled.", c.handled),
        ("connections_active", "gauge", "Open client connections.", c.active),
        ("connections_reading", "gauge", "Connections reading a request head.", c.reading),
        ("connections_writing", "gauge", "Requests being answered.", c.writing),
        ("connections_waiting", "gauge", "Idle keep-alive connections.", c.waiting),
        ("connections_parked", "gauge", "Idle keep-alive connections whose buffers were released.", a.parked),
        ("http_requests_total", "counter", "Client requests.", c.requests),
        ("ssl_handshakes_failed_total", "counter", "TLS handshakes that failed or timed out.", a.handshakes_failed),
        ("http2_connections_total", "counter", "HTTP/2 connections.", a.h2_connections),
        ("http2_streams_total", "counter", "HTTP/2 streams (requests).", a.h2_streams),
        ("http3_connections_total", "counter", "HTTP/3 connections.", a.h3_connections),
        ("http3_streams_total", "counter", "HTTP/3 streams (requests).", a.h3_streams),
    ] {
        head(&mut o, name, kind, help);
        let _ = writeln!(o, "sluice_{name} {v}");
    }
    head(&mut o, "time_seconds", "gauge", "The server's clock at this scrape (unix time).");
    let _ = writeln!(o, "sluice_time_seconds {}", secs(s.time_ms));
    head(&mut o, "config_load_time_seconds", "gauge", "When the running configuration was loaded (unix time).");
    let _ = writeln!(o, "sluice_config_load_time_seconds {}", secs(s.load_ms));
    head(&mut o, "reloads_total", "counter", "Reloads by result: ok (a new generation runs) or failed.");
    let _ = writeln!(o, "sluice_reloads_total{{result=\"ok\"}} {}", s.reloads_ok);
    let _ = writeln!(o, "sluice_reloads_total{{result=\"failed\"}} {}", s.reloads_failed);
    head(&mut o, "http_responses_total", "counter", "Responses of every request by status class.");
    for (i, n) in a.responses.iter().enumerate() {
        let _ = writeln!(o, "sluice_http_responses_total{{code=\"{}xx\"}} {n}", i + 1);
    }
    head(&mut o, "http_request_duration_seconds", "histogram", "Request time of every request.");
    histogram(&mut o, "http_request_duration_seconds", "", &a.time);
    for (name, help, v) in [
        ("ssl_handshakes_total", "TLS handshakes completed, by protocol.", a.handshakes),
        ("ssl_handshakes_resumed_total", "TLS handshakes that resumed a session, by protocol.", a.resumed),
    ] {
        head(&mut o, name, "counter", help);
        for (p, n) in ["TLSv1.2", "TLSv1.3"].iter().zip(v) {
            let _ = writeln!(o, "sluice_{name}{{protocol=\"{p}\"}} {n}");
        }
    }
    zones(&mut o, s);
    caches(&mut o, s);
    upstreams(&mut o, &s.upstreams);
    stream(&mut o, s);
    mail(&mut o, s);
    o
}

/// The stream family's session zones and upstream peers
/// (`sluice_stream_*`).
fn stream(o: &mut String, s: &Snapshot) {
    let z = &s.stream_zones;
    type Zone = (std::sync::Arc<str>, super::l4::SessionTotals);
    let zl = |(n, _): &Zone| format!("zone=\"{}\"", label(n));
    type ZRow<'a> = ((&'a str, &'a str, &'a str), fn(&Zone) -> Option<u64>);
    let rows: [ZRow; 5] = [
        (("stream_connections_total", "counter", "Stream connections accepted, by server zone."), |(_, t)| {
            Some(t.connections)
        }),
        (("stream_processing", "gauge", "Stream sessions in progress, by server zone."), |(_, t)| Some(t.processing)),
        (("stream_received_bytes_total", "counter", "Bytes received from stream clients."), |(_, t)| Some(t.received)),
        (("stream_sent_bytes_total", "counter", "Bytes sent to stream clients."), |(_, t)| Some(t.sent)),
        (("stream_discarded_total", "counter", "Datagrams dropped without a session."), |(_, t)| Some(t.discarded)),
    ];
    for (meta, get) in rows {
        family(o, meta, z, zl, get);
    }
    if !z.is_empty() {
        head(o, "stream_sessions_total", "counter", "Stream sessions ended, by server zone and status class.");
        for (name, t) in z {
            for c in [2, 4, 5] {
                let n = t.sessions[c - 1];
                let _ = writeln!(o, "sluice_stream_sessions_total{{zone=\"{}\",code=\"{c}xx\"}} {n}", label(name));
            }
        }
    }
    let mut peers: Vec<(&UpstreamSnap, &PeerSnap)> = Vec::new();
    for u in &s.stream_upstreams {
        peers.extend(u.peers.iter().map(|p| (u, p)));
    }
    let pl =
        |(u, p): &(&UpstreamSnap, &PeerSnap)| format!("upstream=\"{}\",peer=\"{}\"", label(&u.name), label(&p.name));
    type PRow<'a> = ((&'a str, &'a str, &'a str), fn(&PeerSnap) -> Option<u64>);
    let rows: [PRow; 7] = [
        (("stream_upstream_peer_up", "gauge", "1 when the peer may be picked."), |p| Some(u64::from(p.state == "up"))),
        (("stream_upstream_peer_active", "gauge", "Sessions of this peer in progress."), |p| Some(p.totals.active)),
        (("stream_upstream_peer_connections_total", "counter", "Sessions given to the peer."), |p| {
            Some(p.totals.requests)
        }),
        (("stream_upstream_peer_fails_total", "counter", "Failed attempts to the peer."), |p| Some(p.totals.failures)),
        (("stream_upstream_peer_unavail_total", "counter", "Times the peer was failed out by max_fails."), |p| {
            Some(p.totals.unavail)
        }),
        (("stream_upstream_peer_sent_bytes_total", "counter", "Bytes sent to the peer."), |p| {
            Some(p.totals.traffic.sent)
        }),
        (("stream_upstream_peer_received_bytes_total", "counter", "Bytes received from the peer."), |p| {
            Some(p.totals.traffic.received)
        }),
    ];
    for (meta, get) in rows {
        family(o, meta, &peers, pl, |(_, p)| get(p));
    }
}

/// The mail family's sessions and `auth_http` answers (`sluice_mail_*`).
fn mail(o: &mut String, s: &Snapshot) {
    let m = &s.mail;
    head(o, "mail_sessions_total", "counter", "Mail sessions accepted, by protocol.");
    for (p, n) in super::l4::MAIL_PROTOCOLS.iter().zip(m.sessions) {
        let _ = writeln!(o, "sluice_mail_sessions_total{{protocol=\"{p}\"}} {n}");
    }
    head(o, "mail_processing", "gauge", "Mail sessions in progress, by protocol.");
    for (p, n) in super::l4::MAIL_PROTOCOLS.iter().zip(m.processing) {
        let _ = writeln!(o, "sluice_mail_processing{{protocol=\"{p}\"}} {n}");
    }
    head(o, "mail_auth_http_total", "counter", "auth_http exchanges by result: ok, failed (refused), error.");
    for (r, n) in super::l4::AUTH_RESULTS.iter().zip(m.auth) {
        let _ = writeln!(o, "sluice_mail_auth_http_total{{result=\"{r}\"}} {n}");
    }
}

fn zones(o: &mut String, s: &Snapshot) {
    let z = &s.zones;
    let zl = |(n, _): &(std::sync::Arc<str>, super::ZoneTotals)| format!("zone=\"{}\"", label(n));
    family(o, ("zone_requests_total", "counter", "Requests finished in a status_zone."), z, zl, |(_, t)| {
        Some(t.requests)
    });
    if !z.is_empty() {
        head(o, "zone_responses_total", "counter", "Responses of a status_zone by status class.");
        for (name, t) in z {
            for (i, n) in t.responses.iter().enumerate() {
                let _ = writeln!(o, "sluice_zone_responses_total{{zone=\"{}\",code=\"{}xx\"}} {n}", label(name), i + 1);
            }
        }
    }
    let received = ("zone_received_bytes_total", "counter", "Bytes received from clients in a status_zone.");
    family(o, received, z, zl, |(_, t)| Some(t.received));
    family(o, ("zone_sent_bytes_total", "counter", "Bytes sent to clients in a status_zone."), z, zl, |(_, t)| {
        Some(t.sent)
    });
    if !z.is_empty() {
        head(o, "zone_request_duration_seconds", "histogram", "Request time in a status_zone.");
        for zone in z {
            histogram(o, "zone_request_duration_seconds", &zl(zone), &zone.1.time);
        }
    }
}

fn caches(o: &mut String, s: &Snapshot) {
    let c = &s.caches;
    if c.is_empty() {
        return;
    }
    head(o, "cache_lookups_total", "counter", "Requests that asked a cache zone, by $upstream_cache_status.");
    for z in c {
        for (st, n) in CACHE_STATUSES.iter().zip(z.counts.statuses) {
            let _ = writeln!(
                o,
                "sluice_cache_lookups_total{{cache=\"{}\",status=\"{}\"}} {n}",
                label(&z.name),
                st.to_ascii_lowercase()
            );
        }
    }
    let cl = |z: &super::snapshot::CacheSnap| format!("cache=\"{}\"", label(&z.name));
    let evicted = ("cache_evictions_total", "counter", "Entries the cache manager removed (inactive or over limits).");
    family(o, evicted, c, cl, |z| Some(z.counts.evictions));
    family(o, ("cache_size_bytes", "gauge", "Bytes of entry files on disk."), c, cl, |z| Some(z.size));
    family(o, ("cache_max_size_bytes", "gauge", "The zone's max_size."), c, cl, |z| z.max_size);
    family(o, ("cache_memory_bytes", "gauge", "Bytes held by the memory tier."), c, cl, |z| Some(z.memory_size));
    family(o, ("cache_entries", "gauge", "Entry files on disk."), c, cl, |z| Some(z.entries));
}

fn upstreams(o: &mut String, ups: &[UpstreamSnap]) {
    let ul = |u: &UpstreamSnap| format!("upstream=\"{}\"", label(&u.name));
    let length = ("upstream_queue_length", "gauge", "Requests waiting in the upstream's queue now.");
    family(o, length, ups, ul, |u| u.queue.map(|q| q.length));
    let waits = ("upstream_queue_waits_total", "counter", "Requests that waited in the upstream's queue.");
    family(o, waits, ups, ul, |u| u.queue.map(|q| q.waits));
    let timeouts = ("upstream_queue_timeouts_total", "counter", "Waits in the upstream's queue that timed out.");
    family(o, timeouts, ups, ul, |u| u.queue.map(|q| q.timeouts));
    if !ups.is_empty() {
        let help = "From the start of a try to the end of the origin's response head.";
        head(o, "upstream_response_duration_seconds", "histogram", help);
        for u in ups {
            histogram(o, "upstream_response_duration_seconds", &ul(u), &u.totals.response);
        }
    }
    // An upstream may list one address twice (nginx allows it); the second
    // is `peer="ADDR#2"` so that every series stays unique.
    let mut peers: Vec<(&UpstreamSnap, &PeerSnap, usize)> = Vec::new();
    for u in ups {
        for (i, p) in u.peers.iter().enumerate() {
            let seen = u.peers[..i].iter().filter(|q| q.name == p.name).count();
            peers.push((u, p, seen + 1));
        }
    }
    let pl = |(u, p, n): &(&UpstreamSnap, &PeerSnap, usize)| match n {
        1 => format!("upstream=\"{}\",peer=\"{}\"", label(&u.name), label(&p.name)),
        n => format!("upstream=\"{}\",peer=\"{}#{n}\"", label(&u.name), label(&p.name)),
    };
    type Row<'a> = ((&'a str, &'a str, &'a str), fn(&PeerSnap) -> Option<u64>);
    let rows: [Row; 7] = [
        (("upstream_peer_up", "gauge", "1 when the peer may be picked (not down, unhealthy or failed out)."), |p| {
            Some(u64::from(p.state == "up"))
        }),
        (("upstream_peer_active", "gauge", "Requests of this peer in progress."), |p| Some(p.totals.active)),
        (("upstream_peer_requests_total", "counter", "Requests sent to the peer."), |p| Some(p.totals.requests)),
        (("upstream_peer_fails_total", "counter", "Failed attempts to the peer."), |p| Some(p.totals.failures)),
        (("upstream_peer_health_checks_total", "counter", "Active health checks of the peer."), |p| {
            p.health.map(|h| h.checks)
        }),
        (("upstream_peer_health_fails_total", "counter", "Active health checks the peer failed."), |p| {
            p.health.map(|h| h.fails)
        }),
        (("upstream_peer_health_up", "gauge", "1 when the last health check passed, 0 when it failed."), |p| {
            p.health.and_then(|h| h.last_up()).map(u64::from)
        }),
    ];
    for (meta, get) in rows {
        family(o, meta, &peers, pl, |(_, p, _)| get(p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_escapes_and_accumulates() {
        let p = prometheus(&super::super::snapshot::sample());
        assert!(p.contains("sluice_zone_requests_total{zone=\"a\\\"b\\\\c\"} 3\n"), "{p}");
        let zone = "sluice_zone_request_duration_seconds_bucket{zone=\"a\\\"b\\\\c\",le=";
        for (le, n) in [("0.000009152", 0), ("0.002031", 1), ("0.003162", 2), ("1", 2), ("1.304", 3), ("+Inf", 3)] {
            assert!(p.contains(&format!("{zone}\"{le}\"}} {n}\n")), "{le} {n}: {p}");
        }
        // Every bucket, empty or not: the same le set in every scrape.
        assert_eq!(p.matches(zone).count(), super::super::hist::NBUCKETS);
        assert!(p.contains("sluice_zone_request_duration_seconds_sum{zone=\"a\\\"b\\\\c\"} 1.205000\n"));
        assert!(p.contains("sluice_zone_request_duration_seconds_count{zone=\"a\\\"b\\\\c\"} 3\n"));
        assert!(p.contains("sluice_upstream_peer_up{upstream=\"up\",peer=\"127.0.0.1:2\"} 0\n"));
        assert!(p.contains("# TYPE sluice_zone_request_duration_seconds histogram\n"));
        assert!(p.contains("sluice_http_request_duration_seconds_bucket{le=\"+Inf\"} 7\n"), "{p}");
        assert!(p.contains(
            "sluice_http_request_duration_seconds_sum 100.006000\nsluice_http_request_duration_seconds_count 7\n"
        ));
        assert!(p.contains("sluice_http_responses_total{code=\"2xx\"} 5\n"));
        assert!(p.contains("sluice_reloads_total{result=\"failed\"} 1\n"));
        assert!(p.contains("sluice_ssl_handshakes_resumed_total{protocol=\"TLSv1.3\"} 2\n"));
        assert!(p.contains("sluice_cache_lookups_total{cache=\"c1\",status=\"hit\"} 4\n"), "{p}");
        assert!(p.contains("sluice_cache_max_size_bytes{cache=\"c1\"} 1048576\n"));
        assert!(p.contains("sluice_upstream_queue_waits_total{upstream=\"up\"} 3\n"));
        assert!(p.contains("sluice_upstream_response_duration_seconds_bucket{upstream=\"up\",le=\"0.01\"} 2\n"));
        // Health only for the checked peer, and no "last" before a probe.
        assert!(p.contains("sluice_upstream_peer_health_checks_total{upstream=\"up\",peer=\"127.0.0.1:1\"} 0\n"));
        assert!(!p.contains("health_checks_total{upstream=\"up\",peer=\"127.0.0.1:2\"}"));
        assert!(!p.contains("sluice_upstream_peer_health_up"), "{p}");
        assert!(p.contains("sluice_time_seconds 1700000000.123\n"));
        assert!(p.contains("sluice_stream_connections_total{zone=\"tcp1\"} 4\n"), "{p}");
        assert!(p.contains("sluice_stream_sessions_total{zone=\"tcp1\",code=\"5xx\"} 1\n"), "{p}");
        assert!(p.contains("sluice_stream_upstream_peer_sent_bytes_total{upstream=\"sb\",peer=\"127.0.0.1:3\"} 9\n"));
        assert!(p.contains("sluice_mail_sessions_total{protocol=\"smtp\"} 2\n"), "{p}");
        assert!(p.contains("sluice_mail_auth_http_total{result=\"failed\"} 1\n"), "{p}");
    }

    #[test]
    fn a_peer_listed_twice_gets_its_own_series() {
        let mut s = super::super::snapshot::sample();
        let dup = s.upstreams[0].peers[0].name.clone();
        s.upstreams[0].peers[1].name = dup;
        let p = prometheus(&s);
        assert!(p.contains("sluice_upstream_peer_up{upstream=\"up\",peer=\"127.0.0.1:1\"} 1\n"), "{p}");
        assert!(p.contains("sluice_upstream_peer_up{upstream=\"up\",peer=\"127.0.0.1:1#2\"} 0\n"), "{p}");
    }
}
