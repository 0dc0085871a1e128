//! NGINX Plus's run-time API on a zone's servers, protocol-free: the
//! `/api/N/{http,stream}/upstreams/NAME/servers[/ID]` subset (list, show,
//! add, change, remove), with Plus's JSON shapes and error codes. The HTTP
//! family's `api` location (`crate::http::api`) routes requests here and
//! wraps errors in Plus's envelope. A change is made under the zone's
//! lock, published to every worker at once (the next request of each sees
//! the new list) and written to the `state` file.
//!
//! A server's fields: `server`, `service`, `weight`, `max_conns`,
//! `max_fails`, `fail_timeout`, `slow_start`, `backup`, `down`, `drain`,
//! `route` (the server's `route=`, which `sticky` reads; empty: none). `id`, `backup`,
//! `service` and `server` cannot be changed (Plus changes `server`;
//! sluice refuses it: remove and add instead).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use super::{ServerSpec, Zone};
use crate::config::proxy::PeerConf;

/// An API error: Plus's status, code and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub text: String,
}

fn err(status: u16, code: &'static str, text: impl Into<String>) -> ApiError {
    ApiError { status, code, text: text.into() }
}

fn format_error(text: impl Into<String>) -> ApiError {
    err(400, "UpstreamConfFormatError", text)
}

/// What the API does with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Get,
    Post,
    Patch,
    Delete,
}

/// `/api/N/FAMILY/upstreams/NAME/servers[/ID]`: the answer's status and
/// JSON text.
pub fn servers(family: &str, name: &str, id: Option<&str>, op: Op, body: &[u8]) -> Result<(u16, String), ApiError> {
    let zone = match super::registry::find(family, name) {
        None => return Err(err(404, "UpstreamNotFound", "upstream not found")),
        Some(None) => return Err(err(400, "UpstreamStatic", "upstream is static")),
        Some(Some(z)) => z,
    };
    let id = match id {
        None => None,
        Some(t) => Some(t.parse::<u64>().map_err(|_| err(404, "UpstreamServerNotFound", "server not found"))?),
    };
    match (op, id) {
        (Op::Get, None) => Ok((200, list(&zone))),
        (Op::Get, Some(id)) => {
            let spec = zone.server(id).ok_or_else(not_found)?;
            Ok((200, server_json(id, &spec)))
        }
        (Op::Post, None) => {
            let fields = parse(body)?;
            let spec = new_server(&zone, &fields)?;
            let id = zone.add(spec.clone());
            Ok((201, server_json(id, &spec)))
        }
        (Op::Patch, Some(id)) => {
            let fields = parse(body)?;
            let change = changes(&fields)?;
            let spec = zone.modify(id, |p| change.apply(p)).ok_or_else(not_found)?;
            Ok((200, server_json(id, &spec)))
        }
        (Op::Delete, Some(id)) => {
            if !zone.remove(id) {
                return Err(not_found());
            }
            Ok((200, list(&zone)))
        }
        (Op::Post, Some(_)) | (Op::Patch, None) | (Op::Delete, None) => {
            Err(err(405, "MethodNotSupported", "method not supported"))
        }
    }
}

fn not_found() -> ApiError {
    err(404, "UpstreamServerNotFound", "server not found")
}

fn list(zone: &Arc<Zone>) -> String {
    let mut out = String::from("[");
    for (i, (id, spec)) in zone.servers().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&server_json(*id, spec));
    }
    out.push(']');
    out
}

/// Plus's server object, in its field order.
pub fn server_json(id: u64, spec: &ServerSpec) -> String {
    let p = &spec.params;
    let mut s = format!("{{\"id\":{},\"server\":{}", id, json_str(&spec.server));
    if let Some(svc) = &spec.service {
        let _ = write!(s, ",\"service\":{}", json_str(svc));
    }
    let _ = write!(
        s,
        ",\"weight\":{},\"max_conns\":{},\"max_fails\":{},\"fail_timeout\":\"{}\",\"slow_start\":\"{}\",\"route\":{},\"backup\":{},\"down\":{}",
        p.weight,
        p.max_conns,
        p.max_fails,
        secs(p.fail_timeout),
        secs(p.slow_start),
        json_str(p.route.as_deref().unwrap_or("")),
        p.backup,
        p.down
    );
    if p.drain {
        s.push_str(",\"drain\":true");
    }
    s.push('}');
    s
}

fn secs(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) { format!("{}s", ms / 1000) } else { format!("{}ms", ms) }
}

/// A JSON string literal.
pub fn json_str(v: &str) -> String {
    serde_json::Value::String(v.to_string()).to_string()
}

type Fields = serde_json::Map<String, serde_json::Value>;

/// The request's JSON object (Plus: a body that is not JSON is a 415
/// `JsonError`; values must be scalars).
pub fn parse(body: &[u8]) -> Result<Fields, ApiError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|_| err(415, "JsonError", "json error"))?;
    let serde_json::Value::Object(m) = v else {
        return Err(err(415, "JsonError", "json error"));
    };
    if m.values().any(|v| v.is_object() || v.is_array()) {
        return Err(format_error("nested object or list"));
    }
    Ok(m)
}

/// The parameters a request may set.
#[derive(Default, Debug)]
struct Change {
    weight: Option<u32>,
    max_conns: Option<u32>,
    max_fails: Option<u32>,
    fail_timeout: Option<Duration>,
    slow_start: Option<Duration>,
    down: Option<bool>,
    drain: Option<bool>,
    /// `route`: Some(None) clears it.
    route: Option<Option<Arc<str>>>,
}

impl Change {
    fn apply(&self, p: &mut PeerConf) {
        if let Some(v) = self.weight {
            p.weight = v;
        }
        if let Some(v) = self.max_conns {
            p.max_conns = v;
        }
        if let Some(v) = self.max_fails {
            p.max_fails = v;
        }
        if let Some(v) = self.fail_timeout {
            p.fail_timeout = v;
        }
        if let Some(v) = self.slow_start {
            p.slow_start = v;
        }
        if let Some(v) = self.down {
            p.down = v;
        }
        if let Some(v) = self.drain {
            p.drain = v;
        }
        if let Some(v) = &self.route {
            p.route = v.clone();
        }
    }
}

fn number(k: &str, v: &serde_json::Value, code: &'static str, min: u64) -> Result<u32, ApiError> {
    let n = match v {
        serde_json::Value::Number(n) => n.as_u64().ok_or_else(|| err(400, code, format!("invalid \"{}\"", k)))?,
        serde_json::Value::String(s) => {
            s.parse::<u64>().map_err(|_| format_error(format!("invalid \"{}\" value", k)))?
        }
        _ => return Err(format_error(format!("invalid \"{}\" value", k))),
    };
    if n < min || (n > 1_000_000 && k == "weight") || n > u64::from(u32::MAX) {
        return Err(err(400, code, format!("invalid \"{}\"", k)));
    }
    Ok(n as u32)
}

fn time(k: &str, v: &serde_json::Value, code: &'static str) -> Result<Duration, ApiError> {
    match v {
        serde_json::Value::Number(n) => {
            n.as_u64().map(Duration::from_secs).ok_or_else(|| err(400, code, format!("invalid \"{}\"", k)))
        }
        serde_json::Value::String(s) => {
            crate::config::value::parse_time(s).ok_or_else(|| err(400, code, format!("invalid \"{}\"", k)))
        }
        _ => Err(format_error(format!("invalid \"{}\" value", k))),
    }
}

fn boolean(k: &str, v: &serde_json::Value) -> Result<bool, ApiError> {
    v.as_bool().ok_or_else(|| format_error(format!("invalid \"{}\" value", k)))
}

/// The changeable parameters of a request (`server`, `service`, `backup`
/// and `id` are read by the caller or refused).
fn changes(fields: &Fields) -> Result<Change, ApiError> {
    let mut c = Change::default();
    for (k, v) in fields {
        match k.as_str() {
            "weight" => c.weight = Some(number(k, v, "UpstreamBadWeight", 1)?),
            "max_conns" => c.max_conns = Some(number(k, v, "UpstreamBadMaxConns", 0)?),
            "max_fails" => c.max_fails = Some(number(k, v, "UpstreamBadMaxFails", 0)?),
            "fail_timeout" => c.fail_timeout = Some(time(k, v, "UpstreamBadFailTimeout")?),
            "slow_start" => c.slow_start = Some(time(k, v, "UpstreamBadSlowStart")?),
            "down" => c.down = Some(boolean(k, v)?),
            "drain" => c.drain = Some(boolean(k, v)?),
            "route" => {
                // As the configuration's `route=`: at most 32 bytes.
                let Some(r) = v.as_str() else { return Err(format_error("invalid \"route\" value")) };
                if r.len() > 32 {
                    return Err(err(400, "UpstreamBadRoute", "invalid \"route\""));
                }
                c.route = Some((!r.is_empty()).then(|| Arc::from(r)));
            }
            "id" | "server" | "service" | "backup" => {
                return Err(format_error(format!("the \"{}\" parameter cannot be changed", k)));
            }
            other => return Err(format_error(format!("unknown parameter \"{}\"", other))),
        }
    }
    Ok(c)
}

/// A POST's server: its address read as a configuration's `server` line
/// would be (a name is resolved at run time, which needs the upstream's
/// `resolver`), then the parameters.
fn new_server(zone: &Zone, fields: &Fields) -> Result<ServerSpec, ApiError> {
    let server = match fields.get("server") {
        None => return Err(format_error("missing \"server\" argument")),
        Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err(format_error("invalid \"server\" value")),
    };
    let service = match fields.get("service") {
        None => None,
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(format_error("invalid \"service\" value")),
    };
    let backup = match fields.get("backup") {
        None => false,
        Some(v) => boolean("backup", v)?,
    };
    let mut rest = fields.clone();
    for k in ["server", "service", "backup", "id"] {
        rest.remove(k);
    }
    let change = changes(&rest)?;
    let host = server.strip_prefix('[').map_or(server.as_str(), |r| r.split(']').next().unwrap_or(r));
    let host = if server.starts_with('[') { host } else { host.split(':').next().unwrap_or(host) };
    let is_name = !server.starts_with("unix:") && host.parse::<std::net::IpAddr>().is_err();
    if is_name && zone.conf.resolver.is_none() {
        return Err(err(400, "UpstreamBadAddress", format!("no resolver defined to resolve \"{}\"", host)));
    }
    let mut words = vec![server.clone()];
    if is_name {
        words.push("resolve".into());
    }
    if let Some(s) = &service {
        words.push(format!("service={s}"));
    }
    if backup {
        if !zone.conf.backups {
            return Err(err(400, "UpstreamBadAddress", "balancing method does not support \"backup\""));
        }
        words.push("backup".into());
    }
    let span = crate::config::parser::Span { file: Arc::new("api".into()), line: 1 };
    let d = crate::config::parser::Directive {
        name: "server".into(),
        args: words.into_iter().map(|text| crate::config::lexer::Word { text, quoted: false, line: 1 }).collect(),
        block: None,
        span,
        end_line: 1,
    };
    let mut spec = crate::config::upstream_block::server_spec(&d, zone.conf.l4)
        .map_err(|e| err(400, "UpstreamBadAddress", e.msg))?;
    change.apply(&mut spec.params);
    Ok(spec)
}

/// A POST body read into the server it adds (for the fuzzing target).
pub fn post_body(zone: &Zone, body: &[u8]) -> Result<ServerSpec, ApiError> {
    new_server(zone, &parse(body)?)
}

/// A PATCH body applied to `p` (for the fuzzing target).
pub fn patch_body(body: &[u8], p: &mut PeerConf) -> Result<(), ApiError> {
    changes(&parse(body)?)?.apply(p);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_read_as_plus_reads_them() {
        assert_eq!(parse(b"{").unwrap_err().code, "JsonError");
        assert_eq!(parse(b"[1]").unwrap_err().code, "JsonError");
        assert_eq!(parse(br#"{"server":{"a":1}}"#).unwrap_err().text, "nested object or list");
        let f = parse(br#"{"weight":0}"#).unwrap();
        assert_eq!(changes(&f).unwrap_err().code, "UpstreamBadWeight");
        let f = parse(br#"{"weight":"x"}"#).unwrap();
        assert_eq!(changes(&f).unwrap_err().code, "UpstreamConfFormatError");
        let f = parse(br#"{"colour":1}"#).unwrap();
        assert_eq!(changes(&f).unwrap_err().text, "unknown parameter \"colour\"");
        let f = parse(br#"{"weight":3,"down":true,"fail_timeout":"5s","slow_start":30}"#).unwrap();
        let c = changes(&f).unwrap();
        assert_eq!(
            (c.weight, c.down, c.fail_timeout, c.slow_start),
            (Some(3), Some(true), Some(Duration::from_secs(5)), Some(Duration::from_secs(30)))
        );
        assert_eq!(json_str("a\"b"), "\"a\\\"b\"");
    }
}
