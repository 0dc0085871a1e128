//! `check_status [html|csv|json|prometheus]` (server or location; default html): Tengine's
//! status page of every checked peer of the configuration, numbered across all upstreams in
//! config order. The query string may pick another format (`?format=json`) and show only the
//! peers that are `?status=up` or `?status=down`; a bad value is logged and ignored, as in
//! Tengine. GET and HEAD only (else 405).

use std::borrow::Cow;
use std::fmt::Write;
use std::sync::Arc;

use super::Check;
use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::http::handler::ctx::ReqCtx;
use crate::http::request::Method;
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_req;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Html,
    Csv,
    Json,
    Prometheus,
}

impl Format {
    fn parse(v: &[u8]) -> Option<Format> {
        match v {
            b"html" => Some(Format::Html),
            b"csv" => Some(Format::Csv),
            b"json" => Some(Format::Json),
            b"prometheus" => Some(Format::Prometheus),
            _ => None,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::Html => "text/html",
            Format::Json => "application/json",
            Format::Csv | Format::Prometheus => "text/plain",
        }
    }
}

/// A `check_status` location: its default format and the configuration's checks.
#[derive(Debug)]
pub struct StatusPage {
    pub format: Format,
    pub checks: Vec<Arc<Check>>,
}

/// The `check_status` directive: makes the level's content handler the status page of every
/// upstream block (all built before any server, so the page sees them all).
pub fn directive(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> Result<(), ConfError> {
    let format = match d.args.first() {
        None => Format::Html,
        Some(w) => Format::parse(w.text.as_bytes())
            .ok_or_else(|| ConfError::at(format!("invalid check format \"{}\"", w.text), &d.span))?,
    };
    let checks = ctx.upstream_list.iter().filter_map(|u| u.check.clone()).collect();
    c.check_status = Some(Arc::new(StatusPage { format, checks }));
    Ok(())
}

/// Which peers to list (`?status=`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Only {
    All,
    Up,
    Down,
}

/// nginx's `ngx_http_arg`: the value of the first `name=` argument (name case-insensitive).
fn arg<'a>(args: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    args.split(|&b| b == b'&').find_map(|kv| {
        let (k, v) = kv.split_at(kv.iter().position(|&b| b == b'=')?);
        k.eq_ignore_ascii_case(name).then(|| &v[1..])
    })
}

pub fn respond<'c>(ctx: &ReqCtx<'c, '_>, page: &StatusPage) -> Response<'c> {
    if !matches!(ctx.req.method(), Method::Get | Method::Head) {
        return crate::http::handler::error(ctx, 405);
    }
    let mut format = page.format;
    let mut only = Only::All;
    if let Some(args) = ctx.req.args.as_deref() {
        let bad = |v: &[u8]| {
            log_req!(ctx, Level::Error, "http upstream check, bad argument: \"{}\"", String::from_utf8_lossy(v));
        };
        if let Some(v) = arg(args, b"format") {
            match Format::parse(v) {
                Some(f) => format = f,
                None => bad(v),
            }
        }
        if let Some(v) = arg(args, b"status") {
            if v.eq_ignore_ascii_case(b"down") {
                only = Only::Down;
            } else if v.eq_ignore_ascii_case(b"up") {
                only = Only::Up;
            } else {
                bad(v);
            }
        }
    }
    let mut r = Response::new(200);
    r.content_type = Some(Cow::Borrowed(format.content_type()));
    r.body = Body::Owned(render(page, format, only).into_bytes());
    r
}

/// One listed peer.
struct Row<'a> {
    index: usize,
    check: &'a Check,
    name: &'a str,
    down: bool,
    rise: u32,
    fall: u32,
}

fn rows(page: &StatusPage, only: Only) -> Vec<Row<'_>> {
    let mut out = Vec::new();
    let mut index = 0;
    for c in &page.checks {
        for (j, p) in c.peers.iter().enumerate() {
            let i = index;
            index += 1;
            let Some(s) = c.snapshot(j) else { continue };
            if (only == Only::Down && !s.down) || (only == Only::Up && s.down) {
                continue;
            }
            out.push(Row { index: i, check: c, name: &p.name, down: s.down, rise: s.rise, fall: s.fall });
        }
    }
    out
}

fn status(down: bool) -> &'static str {
    if down { "down" } else { "up" }
}

fn generation(page: &StatusPage) -> u64 {
    page.checks.first().map_or_else(super::current_generation, |c| c.generation())
}

fn render(page: &StatusPage, format: Format, only: Only) -> String {
    let rows = rows(page, only);
    let generation = generation(page);
    let mut s = String::with_capacity(512 + rows.len() * 200);
    match format {
        Format::Html => html(&mut s, &rows, generation),
        Format::Csv => {
            for r in &rows {
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{},{},{}",
                    r.index,
                    r.check.upstream,
                    r.name,
                    status(r.down),
                    r.rise,
                    r.fall,
                    r.check.conf.kind.name(),
                    r.check.conf.port
                );
            }
        }
        Format::Json => json(&mut s, &rows, generation),
        Format::Prometheus => prometheus(&mut s, &rows, generation),
    }
    s
}

fn html_escape(v: &str) -> Cow<'_, str> {
    if !v.contains(['<', '>', '&', '"']) {
        return Cow::Borrowed(v);
    }
    Cow::Owned(v.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;"))
}

fn html(s: &mut String, rows: &[Row], generation: u64) {
    // Tengine's page, byte for byte (including its unterminated DOCTYPE public id).
    let _ = write!(
        s,
        "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Strict//EN\n\
         \"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd\">\n\
         <html xmlns=\"http://www.w3.org/1999/xhtml\">\n<head>\n  \
         <title>Nginx http upstream check status</title>\n</head>\n<body>\n\
         <h1>Nginx http upstream check status</h1>\n\
         <h2>Check upstream server number: {}, generation: {}</h2>\n\
         <table style=\"background-color:white\" cellspacing=\"0\"        cellpadding=\"3\" border=\"1\">\n  \
         <tr bgcolor=\"#C0C0C0\">\n    <th>Index</th>\n    <th>Upstream</th>\n    <th>Name</th>\n    \
         <th>Status</th>\n    <th>Rise counts</th>\n    <th>Fall counts</th>\n    <th>Check type</th>\n    \
         <th>Check port</th>\n  </tr>\n",
        rows.len(),
        generation
    );
    for r in rows {
        let _ = write!(
            s,
            "  <tr{}>\n    <td>{}</td>\n    <td>{}</td>\n    <td>{}</td>\n    <td>{}</td>\n    <td>{}</td>\n    \
             <td>{}</td>\n    <td>{}</td>\n    <td>{}</td>\n  </tr>\n",
            if r.down { " bgcolor=\"#FF0000\"" } else { "" },
            r.index,
            html_escape(&r.check.upstream),
            html_escape(r.name),
            status(r.down),
            r.rise,
            r.fall,
            r.check.conf.kind.name(),
            r.check.conf.port
        );
    }
    s.push_str("</table>\n</body>\n</html>\n");
}

fn json_escape(v: &str) -> Cow<'_, str> {
    if !v.contains(|c: char| c == '"' || c == '\\' || c.is_control()) {
        return Cow::Borrowed(v);
    }
    let mut out = String::with_capacity(v.len() + 8);
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn json(s: &mut String, rows: &[Row], generation: u64) {
    let down = rows.iter().filter(|r| r.down).count();
    let _ = write!(
        s,
        "{{\"servers\": {{\n  \"total\": {},\n  \"up\": {},\n  \"down\": {},\n  \"generation\": {},\n  \"server\": [\n",
        rows.len(),
        rows.len() - down,
        down,
        generation
    );
    for (n, r) in rows.iter().enumerate() {
        let _ = writeln!(
            s,
            "    {{\"index\": {}, \"upstream\": \"{}\", \"name\": \"{}\", \"status\": \"{}\", \"rise\": {}, \
             \"fall\": {}, \"type\": \"{}\", \"port\": {}}}{}",
            r.index,
            json_escape(&r.check.upstream),
            json_escape(r.name),
            status(r.down),
            r.rise,
            r.fall,
            r.check.conf.kind.name(),
            r.check.conf.port,
            if n + 1 == rows.len() { "" } else { "," }
        );
    }
    s.push_str("  ]\n}}\n");
}

fn prometheus(s: &mut String, rows: &[Row], generation: u64) {
    let down = rows.iter().filter(|r| r.down).count();
    for (name, help, v) in [
        ("count_total", "Nginx total number of servers", rows.len() as u64),
        ("count_up", "Nginx total number of servers that are UP", (rows.len() - down) as u64),
        ("count_down", "Nginx total number of servers that are DOWN", down as u64),
        ("count_generation", "Nginx generation", generation),
    ] {
        let _ = write!(
            s,
            "# HELP nginx_upstream_{name} {help}\n# TYPE nginx_upstream_{name} gauge\nnginx_upstream_{name} {v}\n"
        );
    }
    let labels = |r: &Row, with_status: bool| {
        let st = if with_status { format!(",status=\"{}\"", status(r.down)) } else { String::new() };
        format!(
            "index=\"{}\",upstream=\"{}\",name=\"{}\"{},type=\"{}\",port=\"{}\"",
            r.index,
            json_escape(&r.check.upstream),
            json_escape(r.name),
            st,
            r.check.conf.kind.name(),
            r.check.conf.port
        )
    };
    for (metric, help, kind) in [("rise", "Nginx rise counter", "counter"), ("fall", "Nginx fall counter", "counter")] {
        let _ =
            write!(s, "# HELP nginx_upstream_server_{metric} {help}\n# TYPE nginx_upstream_server_{metric} {kind}\n");
        for r in rows {
            let v = if metric == "rise" { r.rise } else { r.fall };
            let _ = writeln!(s, "nginx_upstream_server_{metric}{{{}}} {v}", labels(r, true));
        }
    }
    s.push_str(
        "# HELP nginx_upstream_server_active Nginx active 1 for UP / 0 for DOWN\n\
         # TYPE nginx_upstream_server_active gauge\n",
    );
    for r in rows {
        let _ = writeln!(s, "nginx_upstream_server_active{{{}}} {}", labels(r, false), u8::from(!r.down));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::proxy::PeerConf;
    use crate::upstream::check::{CheckConf, Kind};
    use std::time::Duration;

    fn page() -> StatusPage {
        let peer = |port: u16, down: bool| PeerConf {
            addr: ([127, 0, 0, 1], port).into(),
            unix: None,
            name: format!("localhost:{port}").into(),
            weight: 1,
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            backup: false,
            down,
            max_conns: 0,
            drain: false,
            slow_start: Duration::ZERO,
            route: None,
        };
        let conf = |kind, default_down| CheckConf {
            kind,
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            rise: 1,
            fall: 1,
            default_down,
            port: 0,
            send: Vec::new(),
            alive: 4,
        };
        let a = Check::new("a", conf(Kind::Http, false), &[peer(81, false), peer(82, true), peer(83, false)]);
        let b = Check::new("b", conf(Kind::Tcp, true), &[peer(84, false)]);
        a.restore(1, crate::upstream::check::Snapshot { down: true, rise: 0, fall: 1, health: Default::default() });
        StatusPage { format: Format::Html, checks: vec![Arc::new(a), Arc::new(b)] }
    }

    #[test]
    fn json_csv_and_filters() {
        let p = page();
        let want = "{\"servers\": {\n  \"total\": 3,\n  \"up\": 1,\n  \"down\": 2,\n  \"generation\": 0,\n  \"server\": [\n    \
            {\"index\": 0, \"upstream\": \"a\", \"name\": \"127.0.0.1:81\", \"status\": \"up\", \"rise\": 0, \"fall\": 0, \"type\": \"http\", \"port\": 0},\n    \
            {\"index\": 1, \"upstream\": \"a\", \"name\": \"127.0.0.1:83\", \"status\": \"down\", \"rise\": 0, \"fall\": 1, \"type\": \"http\", \"port\": 0},\n    \
            {\"index\": 2, \"upstream\": \"b\", \"name\": \"127.0.0.1:84\", \"status\": \"down\", \"rise\": 0, \"fall\": 0, \"type\": \"tcp\", \"port\": 0}\n  ]\n}}\n";
        assert_eq!(render(&p, Format::Json, Only::All), want);
        assert_eq!(
            render(&p, Format::Csv, Only::Down),
            "1,a,127.0.0.1:83,down,0,1,http,0\n2,b,127.0.0.1:84,down,0,0,tcp,0\n"
        );
        assert_eq!(render(&p, Format::Csv, Only::Up), "0,a,127.0.0.1:81,up,0,0,http,0\n");
    }

    #[test]
    fn html_and_prometheus() {
        let p = page();
        let h = render(&p, Format::Html, Only::All);
        let head = "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Strict//EN\n\"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd\">\n<html xmlns=\"http://www.w3.org/1999/xhtml\">\n<head>\n  <title>Nginx http upstream check status</title>\n</head>\n<body>\n<h1>Nginx http upstream check status</h1>\n<h2>Check upstream server number: 3, generation: 0</h2>\n<table style=\"background-color:white\" cellspacing=\"0\"        cellpadding=\"3\" border=\"1\">\n  <tr bgcolor=\"#C0C0C0\">\n    <th>Index</th>\n    <th>Upstream</th>\n    <th>Name</th>\n    <th>Status</th>\n    <th>Rise counts</th>\n    <th>Fall counts</th>\n    <th>Check type</th>\n    <th>Check port</th>\n  </tr>\n  <tr>\n    <td>0</td>";
        assert!(h.starts_with(head), "{h}");
        assert!(h.contains("  <tr bgcolor=\"#FF0000\">\n    <td>1</td>\n    <td>a</td>\n    <td>127.0.0.1:83</td>\n    <td>down</td>\n"), "{h}");
        assert!(h.ends_with("</tr>\n</table>\n</body>\n</html>\n"), "{h}");
        let m = render(&p, Format::Prometheus, Only::All);
        assert!(m.contains("nginx_upstream_count_down 2\n"), "{m}");
        assert!(m.contains("nginx_upstream_server_fall{index=\"1\",upstream=\"a\",name=\"127.0.0.1:83\",status=\"down\",type=\"http\",port=\"0\"} 1\n"), "{m}");
        assert!(m.contains("nginx_upstream_server_active{index=\"0\",upstream=\"a\",name=\"127.0.0.1:81\",type=\"http\",port=\"0\"} 1\n"), "{m}");
    }

    #[test]
    fn args() {
        assert_eq!(arg(b"a=1&FORMAT=json&format=csv", b"format"), Some(&b"json"[..]));
        assert_eq!(arg(b"formats=x&status", b"format"), None);
        assert_eq!(arg(b"status=", b"status"), Some(&b""[..]));
    }
}
