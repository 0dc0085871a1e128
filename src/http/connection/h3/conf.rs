//! The HTTP/3 and QUIC directives (nginx 1.25+'s `ngx_http_v3_module`):
//! `http3`, `http3_hq`, `http3_max_concurrent_streams`,
//! `http3_stream_buffer_size`, `quic_retry`, `quic_gso`, `quic_host_key`,
//! `quic_active_connection_id_limit` at http and server level, and
//! `quic_bpf` at main level. `listen ... quic` itself is parsed with the
//! other `listen` parameters (`config::set_server`).

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::{LocConf, MainConf};
use crate::config::parser::{ConfError, Directive};
use crate::config::set_main::{arg, flag, invalid};
use crate::config::table::{Cmd, HTTP, MAIN, R, SRV, Set, cmd};
use crate::config::value;

pub static DIRECTIVES: &[Cmd] = &[
    cmd("http3", HTTP | SRV, 1, 1, Set::Loc(http3)),
    cmd("http3_hq", HTTP | SRV, 1, 1, Set::Loc(http3_hq)),
    cmd("http3_max_concurrent_streams", HTTP | SRV, 1, 1, Set::Loc(max_concurrent_streams)),
    cmd("http3_stream_buffer_size", HTTP | SRV, 1, 1, Set::Loc(stream_buffer_size)),
    cmd("quic_retry", HTTP | SRV, 1, 1, Set::Loc(retry)),
    cmd("quic_gso", HTTP | SRV, 1, 1, Set::Loc(gso)),
    cmd("quic_host_key", HTTP | SRV, 1, 1, Set::Loc(host_key)),
    cmd("quic_active_connection_id_limit", HTTP | SRV, 1, 1, Set::Loc(active_connection_id_limit)),
    cmd("quic_bpf", MAIN, 1, 1, Set::Main(bpf)),
];

/// A server's HTTP/3 settings (`LocConf::h3`), with nginx's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct H3Conf {
    /// `http3 off`: a QUIC handshake still completes, but requests are
    /// refused (nginx closes such a connection with H3_GENERAL_PROTOCOL_ERROR).
    pub on: bool,
    pub max_concurrent_streams: u32,
    /// Each request stream's receive window.
    pub stream_buffer_size: usize,
    /// Validate every client's address with a stateless Retry first.
    pub retry: bool,
    /// Segmentation offload (UDP GSO) on send, when the kernel has it.
    pub gso: bool,
    /// `quic_host_key`: the secret that stateless resets and address
    /// validation tokens are derived from, read at load time.
    pub host_key: Option<Arc<Vec<u8>>>,
    pub active_connection_id_limit: u32,
}

impl Default for H3Conf {
    fn default() -> Self {
        H3Conf {
            on: true,
            max_concurrent_streams: 128,
            stream_buffer_size: 64 * 1024,
            retry: false,
            gso: false,
            host_key: None,
            active_connection_id_limit: 2,
        }
    }
}

fn http3(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.h3.on = flag(d)?;
    Ok(())
}

/// HTTP/0.9 over QUIC (`hq-interop`, for interoperability testing) is not
/// implemented: `on` is refused rather than ignored.
fn http3_hq(_: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    if flag(d)? {
        return Err(ConfError::at(
            "\"http3_hq on\" is not supported: sluice serves HTTP/3 (ALPN \"h3\") only, not hq-interop",
            &d.span,
        ));
    }
    Ok(())
}

fn max_concurrent_streams(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    c.h3.max_concurrent_streams =
        value::parse_number(v).map(|n| n.min(u64::from(u32::MAX)) as u32).ok_or_else(|| invalid(d, v))?;
    Ok(())
}

fn stream_buffer_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    c.h3.stream_buffer_size = value::parse_size(v).map(|n| n as usize).ok_or_else(|| invalid(d, v))?;
    Ok(())
}

fn retry(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.h3.retry = flag(d)?;
    Ok(())
}

fn gso(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.h3.gso = flag(d)?;
    Ok(())
}

fn active_connection_id_limit(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    // RFC 9000 18.2: at least 2.
    match value::parse_number(v) {
        Some(n) if n >= 2 => c.h3.active_connection_id_limit = n.min(u64::from(u32::MAX)) as u32,
        _ => return Err(invalid(d, v)),
    }
    Ok(())
}

/// The key file is read at load time, relative to the configuration's
/// directory as nginx's `ngx_conf_full_name` resolves it; nginx's wording
/// when it cannot be read or is empty.
fn host_key(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let name = arg(d, 0);
    let path = ctx.conf_path(name);
    let bytes = read_key(&path).map_err(|m| ConfError::at(m, &d.span))?;
    c.h3.host_key = Some(Arc::new(bytes));
    Ok(())
}

fn read_key(path: &PathBuf) -> Result<Vec<u8>, String> {
    match std::fs::read(path) {
        Ok(b) if b.is_empty() => Err(format!("\"{}\" zero key size", path.display())),
        Ok(b) => Ok(b),
        Err(e) => {
            Err(format!("ngx_read_file(\"{}\") failed ({})", path.display(), crate::process::signal::os_error(&e)))
        }
    }
}

/// sluice routes every QUIC packet to the worker owning its connection by
/// the connection ID it chose (in-process, `quic::route`), which is what
/// nginx's eBPF program does with `quic_bpf on`; so both values are
/// accepted and the routing is always on.
fn bpf(_: &mut MainConf, d: &Directive, _: &mut Ctx) -> R {
    flag(d)?;
    Ok(())
}
