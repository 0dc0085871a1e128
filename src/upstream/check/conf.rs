//! The `check*` directives inside an `upstream` block, read as Tengine reads them:
//!
//! * `check interval=MS [fall=N] [rise=N] [timeout=MS] [default_down=true|false]
//!   [type=tcp|http] [port=N] [unique=true|false]`: defaults `interval=30000 fall=5 rise=2
//!   timeout=1000 default_down=true type=tcp`. Numbers are plain digits (milliseconds for the
//!   times, no units) and must not be 0. A later `check` replaces the earlier one's parameters
//!   but keeps its `type` unless given again.
//! * `check_http_send "GET / HTTP/1.0\r\n\r\n"` (the default for `type=http`): only after
//!   `check`, and only with `type=http` (an empty string is allowed with any type). The
//!   config lexer turns `\r` and `\n` into CR and LF, as nginx's does.
//! * `check_http_expect_alive http_2xx ...` (`http_1xx` to `http_5xx`; default `http_2xx
//!   http_3xx`), anywhere in the block.
//! * `check_keepalive_requests N`: accepted and validated; every probe uses a new connection.
//!
//! Tengine's other types (`ssl_hello`, `mysql`, `ajp`, `fastcgi`) are refused as invalid
//! parameters, and so is `check_fastcgi_param` (an unknown directive).

use std::sync::Arc;
use std::time::Duration;

use super::{Check, CheckConf, Kind, class_bit};
use crate::config::parser::{ConfError, Directive};
use crate::config::proxy::PeerConf;

/// The `check*` directives of one block as they are read.
#[derive(Default)]
pub struct Pending {
    check: Option<CheckConf>,
    send: Option<Vec<u8>>,
    alive: Option<u8>,
}

fn arity(d: &Directive, ok: bool) -> Result<(), ConfError> {
    if ok {
        return Ok(());
    }
    Err(ConfError::at(format!("invalid number of arguments in \"{}\" directive", d.name), &d.span))
}

/// nginx's `ngx_atoi`: digits only, no sign, no overflow; Tengine also refuses 0 here.
fn positive(v: &str) -> Option<u64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<u64>().ok().filter(|&n| n > 0)
}

/// One of the `check*` directives; the caller passes any directive whose name starts with
/// `check` and is not `check_status` (which belongs to locations).
pub fn directive(p: &mut Pending, d: &Directive) -> Result<(), ConfError> {
    let args: Vec<&str> = d.args.iter().map(|w| w.text.as_str()).collect();
    match d.name.as_str() {
        "check" => {
            arity(d, !args.is_empty())?;
            p.check = Some(check(d, &args, p.check.as_ref().map(|c| c.kind))?);
        }
        "check_http_send" => {
            arity(d, args.len() == 1)?;
            let Some(c) = &p.check else {
                return Err(ConfError::at("invalid check_http_send should set [check] first", &d.span));
            };
            if !args[0].is_empty() && c.kind != Kind::Http {
                let msg = format!("invalid check_http_send for type \"{}\"", c.kind.name());
                return Err(ConfError::at(msg, &d.span));
            }
            p.send = Some(args[0].as_bytes().to_vec());
        }
        "check_http_expect_alive" => {
            arity(d, !args.is_empty())?;
            let mut bits = 0u8;
            for v in &args {
                let class = match v.to_ascii_lowercase().as_str() {
                    "http_1xx" => 100,
                    "http_2xx" => 200,
                    "http_3xx" => 300,
                    "http_4xx" => 400,
                    "http_5xx" => 500,
                    _ => return Err(ConfError::at(format!("invalid value \"{}\"", v), &d.span)),
                };
                bits |= class_bit(class);
            }
            p.alive = Some(bits);
        }
        "check_keepalive_requests" => {
            arity(d, args.len() == 1)?;
            if positive(args[0]).is_none() {
                return Err(ConfError::at("\"check_keepalive_requests\" directive invalid value", &d.span));
            }
        }
        other => return Err(ConfError::at(format!("unknown directive \"{}\"", other), &d.span)),
    }
    Ok(())
}

fn check(d: &Directive, args: &[&str], kind: Option<Kind>) -> Result<CheckConf, ConfError> {
    let mut c = CheckConf {
        kind: kind.unwrap_or(Kind::Tcp),
        interval: Duration::from_millis(30_000),
        timeout: Duration::from_millis(1000),
        rise: 2,
        fall: 5,
        default_down: true,
        port: 0,
        send: Vec::new(),
        alive: 0,
    };
    for &a in args {
        let bad = || ConfError::at(format!("invalid parameter \"{}\"", a), &d.span);
        let Some((key, v)) = a.split_once('=') else { return Err(bad()) };
        let count = |v: &str| positive(v).map(|n| n.min(u64::from(u32::MAX)) as u32).ok_or_else(bad);
        match key {
            "type" => {
                c.kind = match v {
                    "tcp" => Kind::Tcp,
                    "http" => Kind::Http,
                    _ => return Err(bad()),
                }
            }
            "port" => c.port = positive(v).and_then(|n| u16::try_from(n).ok()).ok_or_else(bad)?,
            "interval" => c.interval = Duration::from_millis(positive(v).ok_or_else(bad)?),
            "timeout" => c.timeout = Duration::from_millis(positive(v).ok_or_else(bad)?),
            "rise" => c.rise = count(v)?,
            "fall" => c.fall = count(v)?,
            "default_down" | "unique" => {
                let flag = match v.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        let msg = format!("invalid value \"{}\", it must be \"true\" or \"false\"", a);
                        return Err(ConfError::at(msg, &d.span));
                    }
                };
                // `unique` shares one check between upstreams listing the same server; here
                // each upstream checks its own servers, so it changes nothing.
                if key == "default_down" {
                    c.default_down = flag;
                }
            }
            _ => return Err(bad()),
        }
    }
    Ok(c)
}

/// The block's check, once all its `server` lines are known; None without `check`.
pub fn finish(p: Pending, upstream: &str, servers: &[PeerConf]) -> Option<Arc<Check>> {
    let mut c = p.check?;
    c.send = match (c.kind, p.send) {
        (_, Some(s)) => s,
        (Kind::Http, None) => b"GET / HTTP/1.0\r\n\r\n".to_vec(),
        (Kind::Tcp, None) => Vec::new(),
    };
    c.alive = p.alive.filter(|&a| a != 0).unwrap_or(class_bit(200) | class_bit(300));
    Some(Arc::new(Check::new(upstream, c, servers)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::lexer::Word;
    use crate::config::parser::Span;
    use std::path::PathBuf;

    fn dir(name: &str, args: &[&str]) -> Directive {
        Directive {
            name: name.into(),
            args: args.iter().map(|a| Word { text: a.to_string(), quoted: false, line: 3 }).collect(),
            block: None,
            span: Span { file: Arc::new(PathBuf::from("/x.conf")), line: 3 },
            end_line: 3,
        }
    }

    fn run(dirs: &[(&str, &[&str])]) -> Result<Option<Arc<Check>>, String> {
        let mut p = Pending::default();
        for (n, a) in dirs {
            directive(&mut p, &dir(n, a)).map_err(|e| e.to_string())?;
        }
        Ok(finish(p, "b", &[]))
    }

    #[test]
    fn tengine_defaults() {
        let c = run(&[("check", &["interval=3000"])]).unwrap().unwrap();
        assert_eq!((c.conf.kind, c.conf.rise, c.conf.fall), (Kind::Tcp, 2, 5));
        assert_eq!((c.conf.timeout, c.conf.default_down, c.conf.port), (Duration::from_secs(1), true, 0));
        assert_eq!(c.conf.alive, class_bit(200) | class_bit(300));
        let c = run(&[("check", &["type=http"])]).unwrap().unwrap();
        assert_eq!(
            (c.conf.interval, c.conf.send.as_slice()),
            (Duration::from_secs(30), &b"GET / HTTP/1.0\r\n\r\n"[..])
        );
        assert!(run(&[]).unwrap().is_none());
    }

    #[test]
    fn parameters() {
        let c = run(&[
            ("check_http_expect_alive", &["http_4xx", "HTTP_5XX"]),
            (
                "check",
                &["interval=100", "rise=3", "fall=4", "timeout=50", "type=http", "port=81", "default_down=false"],
            ),
            ("check_http_send", &["HEAD /h HTTP/1.0\r\n\r\n"]),
            ("check_keepalive_requests", &["10"]),
        ])
        .unwrap()
        .unwrap();
        let want = CheckConf {
            kind: Kind::Http,
            interval: Duration::from_millis(100),
            timeout: Duration::from_millis(50),
            rise: 3,
            fall: 4,
            default_down: false,
            port: 81,
            send: b"HEAD /h HTTP/1.0\r\n\r\n".to_vec(),
            alive: class_bit(400) | class_bit(500),
        };
        assert_eq!(c.conf, want);
        // A second `check` keeps the type.
        let c = run(&[("check", &["type=http"]), ("check", &["interval=5"])]).unwrap().unwrap();
        assert_eq!(c.conf.kind, Kind::Http);
    }

    #[test]
    fn errors_worded_as_tengine() {
        let err = |dirs: &[(&str, &[&str])]| run(dirs).err().unwrap_or_default();
        for bad in ["type=mysql", "type=ssl_hello", "interval=0", "interval=3s", "rise=-1", "fall=", "port=70000", "x"]
        {
            assert_eq!(err(&[("check", &[bad])]), format!("invalid parameter \"{bad}\" in /x.conf:3"));
        }
        assert_eq!(
            err(&[("check", &["default_down=maybe"])]),
            "invalid value \"default_down=maybe\", it must be \"true\" or \"false\" in /x.conf:3"
        );
        assert_eq!(
            err(&[("check_http_send", &["GET / HTTP/1.0\r\n\r\n"])]),
            "invalid check_http_send should set [check] first in /x.conf:3"
        );
        assert_eq!(
            err(&[("check", &["interval=10"]), ("check_http_send", &["GET /"])]),
            "invalid check_http_send for type \"tcp\" in /x.conf:3"
        );
        assert!(run(&[("check", &["interval=10"]), ("check_http_send", &[""])]).is_ok());
        assert_eq!(err(&[("check_http_expect_alive", &["http_6xx"])]), "invalid value \"http_6xx\" in /x.conf:3");
        assert_eq!(err(&[("check", &[])]), "invalid number of arguments in \"check\" directive in /x.conf:3");
        assert_eq!(
            err(&[("check_keepalive_requests", &["0"])]),
            "\"check_keepalive_requests\" directive invalid value in /x.conf:3"
        );
    }
}
