//! `log_format`: a compiled template plus nginx's value escaping rules, so
//! a log line is one pass over precompiled parts.

use crate::variables::{Part, Template, Var, VarSource};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Escape {
    /// nginx's default: `"`, `\` and bytes outside 0x20..=0x7e as `\xXX`.
    Default,
    Json,
    None,
}

#[derive(Debug)]
pub struct LogFormat {
    pub name: String,
    pub template: Template,
    pub escape: Escape,
}

pub const COMBINED: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\"";

impl LogFormat {
    pub fn combined() -> LogFormat {
        LogFormat {
            name: "combined".into(),
            template: Template::compile(COMBINED).unwrap_or_else(|_| Template::literal(COMBINED)),
            escape: Escape::Default,
        }
    }

    /// Whether evaluating this format needs the request's start instant.
    pub fn needs_timing(&self) -> bool {
        self.template.has_var(|v| matches!(v, Var::RequestTime))
    }

    /// Appends one log line (with the trailing newline). Missing values
    /// log as `-` with the default escaping, as in nginx.
    pub fn render(&self, src: &dyn VarSource, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
        for p in &self.template.parts {
            match p {
                Part::Lit(l) => out.extend_from_slice(l),
                Part::Var(v) => {
                    // Written in place; moved out and escaped only when it
                    // has a byte to escape (rare), so a value is copied once.
                    let start = out.len();
                    src.write_var(v, out);
                    if out.len() == start {
                        // nginx: a value not found is `-` with the default
                        // escaping, nothing with json and none; one found
                        // empty is nothing.
                        if self.escape == Escape::Default && !v.empty_is_value() && !src.empty_found(v) {
                            out.push(b'-');
                        }
                    } else if !is_plain(&out[start..], self.escape) {
                        scratch.clear();
                        scratch.extend_from_slice(&out[start..]);
                        out.truncate(start);
                        escape_into(scratch, self.escape, out);
                    }
                }
            }
        }
        out.push(b'\n');
    }
}

/// Bytes the default escaping keeps as they are: 0x20..=0x7e but `"` and `\`.
const PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x20;
    while c <= 0x7e {
        t[c] = c != b'"' as usize && c != b'\\' as usize;
        c += 1;
    }
    t
};

/// Whether escaping would leave `v` unchanged.
fn is_plain(v: &[u8], esc: Escape) -> bool {
    match esc {
        Escape::None => true,
        Escape::Default => v.iter().all(|&c| PLAIN[usize::from(c)]),
        Escape::Json => v.iter().all(|&c| c >= 0x20 && c != b'"' && c != b'\\'),
    }
}

fn escape_into(v: &[u8], esc: Escape, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    match esc {
        Escape::None => out.extend_from_slice(v),
        Escape::Default => {
            if is_plain(v, esc) {
                out.extend_from_slice(v);
                return;
            }
            for &c in v {
                if PLAIN[usize::from(c)] {
                    out.push(c);
                } else {
                    out.extend_from_slice(&[b'\\', b'x', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
                }
            }
        }
        Escape::Json => {
            for &c in v {
                match c {
                    b'"' => out.extend_from_slice(b"\\\""),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    0x08 => out.extend_from_slice(b"\\b"),
                    0x0c => out.extend_from_slice(b"\\f"),
                    0..=0x1f => out.extend_from_slice(&[
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[(c >> 4) as usize],
                        HEX[(c & 15) as usize],
                    ]),
                    _ => out.push(c),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Src;
    impl VarSource for Src {
        fn write_var(&self, var: &Var, out: &mut Vec<u8>) {
            match var {
                Var::RemoteAddr => out.extend_from_slice(b"127.0.0.1"),
                Var::Request => out.extend_from_slice(b"GET /\"x\" HTTP/1.1"),
                Var::Status => out.extend_from_slice(b"200"),
                Var::TimeLocal => out.extend_from_slice(b"22/Nov/2026:14:02:34 +0000"),
                Var::BodyBytesSent => out.extend_from_slice(b"43"),
                Var::Http(h) if h == "user-agent" => out.extend_from_slice(b"curl/8\x01"),
                _ => {}
            }
        }
    }

    #[test]
    fn combined_line() {
        let f = LogFormat::combined();
        let (mut s, mut o) = (Vec::new(), Vec::new());
        f.render(&Src, &mut s, &mut o);
        assert_eq!(
            String::from_utf8(o).unwrap(),
            "127.0.0.1 - - [22/Nov/2026:14:02:34 +0000] \"GET /\\x22x\\x22 HTTP/1.1\" 200 43 \"-\" \"curl/8\\x01\"\n"
        );
    }

    #[test]
    fn json_escape() {
        let f = LogFormat {
            name: "j".into(),
            template: Template::compile("{\"r\":\"$request\"}").unwrap(),
            escape: Escape::Json,
        };
        let (mut s, mut o) = (Vec::new(), Vec::new());
        f.render(&Src, &mut s, &mut o);
        assert_eq!(String::from_utf8(o).unwrap(), "{\"r\":\"GET /\\\"x\\\" HTTP/1.1\"}\n");
    }
}
