//! The commands of the auth state, per protocol (nginx's
//! `ngx_mail_imap_handler.c`, `ngx_mail_pop3_handler.c`,
//! `ngx_mail_smtp_handler.c` and `ngx_mail_auth_parse`): each command
//! gives the session's next step, its answer or the credentials to check.

use super::conf::{StartTls, auth};
use super::parse::{self, Command};
use super::session::{Method, Session, St, Step};
use crate::log::error::Level;

/// `AUTH`/`AUTHENTICATE MECHANISM [initial]`: the next state and the
/// challenge, or the credentials at once (Step::Auth), by nginx's
/// `ngx_mail_auth_parse`.
fn sasl(s: &mut Session, args: &[Vec<u8>], enabled: u8, cont: &str) -> Step {
    let mech = args[0].to_ascii_uppercase();
    let username = format!("{cont}VXNlcm5hbWU6\r\n").into_bytes();
    let password = format!("{cont}UGFzc3dvcmQ6\r\n").into_bytes();
    match (mech.as_slice(), args.len()) {
        (b"LOGIN", 1) => {
            s.st = St::LoginUsername;
            Step::Reply(username)
        }
        (b"LOGIN", 2) => match parse::decode_base64(&args[1]) {
            Some(l) => {
                s.login = l;
                s.st = St::LoginPassword;
                Step::Reply(password)
            }
            None => {
                s.log(Level::Info, format_args!("client sent invalid base64 encoding in AUTH LOGIN command"));
                Step::Invalid
            }
        },
        (b"PLAIN", 1) => {
            s.st = St::Plain;
            Step::Reply(format!("{cont}\r\n").into_bytes())
        }
        (b"PLAIN", 2) => plain(s, &args[1]),
        (b"CRAM-MD5", 1) if enabled & auth::CRAM_MD5 != 0 => {
            s.st = St::CramMd5;
            Step::Reply(s.cram_challenge(cont))
        }
        (b"EXTERNAL", 1) if enabled & auth::EXTERNAL != 0 => {
            s.st = St::External;
            Step::Reply(username)
        }
        (b"EXTERNAL", 2) if enabled & auth::EXTERNAL != 0 => external(s, &args[1]),
        _ => Step::Invalid,
    }
}

fn plain(s: &mut Session, arg: &[u8]) -> Step {
    match parse::sasl_plain(arg) {
        Ok((l, p)) => {
            s.login = l;
            s.passwd = p;
            s.method = Method::Plain;
            Step::Auth
        }
        Err(m) => {
            s.log(Level::Info, format_args!("{m}"));
            Step::Invalid
        }
    }
}

fn external(s: &mut Session, arg: &[u8]) -> Step {
    match parse::decode_base64(arg) {
        Some(l) => {
            s.login = l;
            s.passwd.clear();
            s.method = Method::External;
            Step::Auth
        }
        None => {
            s.log(Level::Info, format_args!("client sent invalid base64 encoding in AUTH EXTERNAL command"));
            Step::Invalid
        }
    }
}

/// The answer to a SASL continuation line.
pub(super) fn continuation(s: &mut Session, arg: &[u8], cont: &str) -> Step {
    match s.st {
        St::LoginUsername => match parse::decode_base64(arg) {
            Some(l) => {
                s.login = l;
                s.st = St::LoginPassword;
                Step::Reply(format!("{cont}UGFzc3dvcmQ6\r\n").into_bytes())
            }
            None => {
                s.log(Level::Info, format_args!("client sent invalid base64 encoding in AUTH LOGIN command"));
                Step::Invalid
            }
        },
        St::LoginPassword => match parse::decode_base64(arg) {
            Some(p) => {
                s.passwd = p;
                s.method = Method::Plain;
                s.st = St::Start;
                Step::Auth
            }
            None => {
                s.log(Level::Info, format_args!("client sent invalid base64 encoding in AUTH LOGIN command"));
                Step::Invalid
            }
        },
        St::Plain => plain(s, arg),
        St::CramMd5 => match parse::sasl_cram_md5(arg) {
            Ok((l, p)) => {
                s.login = l;
                s.passwd = p;
                s.method = Method::CramMd5;
                Step::Auth
            }
            Err(m) => {
                s.log(Level::Info, format_args!("{m}"));
                Step::Invalid
            }
        },
        St::External => external(s, arg),
        St::Start | St::User => Step::Invalid,
    }
}

pub(super) fn imap(s: &mut Session, c: &Command) -> Step {
    if s.st != St::Start {
        let arg = c.args.first().cloned().unwrap_or_default();
        return continuation(s, &arg, "+ ");
    }
    let a = &s.addr.server.answers;
    let ok = s.tagged(b"OK completed\r\n");
    match c.name.as_slice() {
        b"LOGIN" => {
            if s.starttls_only() || c.args.len() != 2 || c.args[0].is_empty() {
                return Step::Invalid;
            }
            s.login = c.args[0].clone();
            s.passwd = c.args[1].clone();
            s.method = Method::Plain;
            Step::Auth
        }
        b"AUTHENTICATE" => {
            if s.starttls_only() || c.args.is_empty() {
                return Step::Invalid;
            }
            let enabled = s.conf().imap_auth;
            sasl(s, &c.args, enabled, "+ ")
        }
        b"CAPABILITY" => {
            let caps = match (s.tls(), s.conf().starttls) {
                (false, StartTls::On) => &a.starttls_capability,
                (false, StartTls::Only) => &a.starttls_only_capability,
                _ => &a.capability,
            };
            Step::Reply([caps.as_slice(), &ok].concat())
        }
        b"LOGOUT" => Step::Quit([b"* BYE\r\n".as_slice(), &ok].concat()),
        b"NOOP" => Step::Reply(ok),
        b"ID" => Step::Reply([b"* ID NIL\r\n".as_slice(), &ok].concat()),
        b"STARTTLS" if !s.tls() && s.conf().starttls != StartTls::Off => Step::StartTls(ok),
        _ => Step::Invalid,
    }
}

pub(super) fn pop3(s: &mut Session, c: &Command) -> Step {
    if !matches!(s.st, St::Start | St::User) {
        let arg = c.args.first().cloned().unwrap_or_default();
        return continuation(s, &arg, "+ ");
    }
    let a = &s.addr.server.answers;
    let enabled = s.conf().pop3_auth;
    let in_user = s.st == St::User;
    s.st = St::Start;
    match c.name.as_slice() {
        b"USER" if !in_user => {
            if s.starttls_only() || c.args.len() != 1 || enabled & auth::PLAIN == 0 {
                return Step::Invalid;
            }
            s.login = c.args[0].clone();
            s.st = St::User;
            Step::Reply(b"+OK\r\n".to_vec())
        }
        b"PASS" if in_user => {
            if c.args.len() != 1 {
                return Step::Invalid;
            }
            s.passwd = c.args[0].clone();
            s.method = Method::Plain;
            Step::Auth
        }
        b"APOP" if !in_user => {
            if s.starttls_only() || enabled & auth::APOP == 0 || c.args.len() != 2 {
                return Step::Invalid;
            }
            s.login = c.args[0].clone();
            s.passwd = c.args[1].clone();
            s.method = Method::Apop;
            Step::Auth
        }
        b"AUTH" if !in_user => {
            if s.starttls_only() {
                return Step::Invalid;
            }
            if c.args.is_empty() {
                return Step::Reply(a.auth_capability.clone());
            }
            sasl(s, &c.args, enabled, "+ ")
        }
        b"CAPA" => {
            let caps = match (s.tls(), s.conf().starttls) {
                (false, StartTls::On) => &a.starttls_capability,
                (false, StartTls::Only) => &a.starttls_only_capability,
                _ => &a.capability,
            };
            if in_user {
                s.st = St::User;
            }
            Step::Reply(caps.clone())
        }
        b"QUIT" => Step::Quit(b"+OK\r\n".to_vec()),
        b"NOOP" => {
            if in_user {
                s.st = St::User;
            }
            Step::Reply(b"+OK\r\n".to_vec())
        }
        b"STLS" if !in_user && !s.tls() && s.conf().starttls != StartTls::Off => Step::StartTls(b"+OK\r\n".to_vec()),
        _ => Step::Invalid,
    }
}

pub(super) fn smtp(s: &mut Session, c: &Command) -> Step {
    if s.st != St::Start {
        let arg = c.args.first().cloned().unwrap_or_default();
        return continuation(s, &arg, "334 ");
    }
    const OK: &[u8] = b"250 2.0.0 OK\r\n";
    const INVALID_ARGUMENT: &[u8] = b"501 5.5.4 Invalid argument\r\n";
    let a = &s.addr.server.answers;
    let enabled = s.conf().smtp_auth;
    match c.name.as_slice() {
        b"HELO" | b"EHLO" => {
            if c.args.len() != 1 {
                return Step::Reply(INVALID_ARGUMENT.to_vec());
            }
            s.smtp_helo = c.args[0].clone();
            s.smtp_from.clear();
            s.smtp_to.clear();
            if c.name == b"HELO" {
                s.esmtp = false;
                return Step::Reply(a.helo.clone());
            }
            s.esmtp = true;
            let caps = match (s.tls(), s.conf().starttls) {
                (false, StartTls::On) => &a.starttls_capability,
                (false, StartTls::Only) => &a.starttls_only_capability,
                _ => &a.capability,
            };
            Step::Reply(caps.clone())
        }
        b"AUTH" => {
            if s.starttls_only() {
                return Step::Invalid;
            }
            if c.args.is_empty() {
                return Step::Reply(INVALID_ARGUMENT.to_vec());
            }
            sasl(s, &c.args, enabled, "334 ")
        }
        b"QUIT" => Step::Quit(b"221 2.0.0 Bye\r\n".to_vec()),
        b"MAIL" => {
            if enabled & auth::NONE == 0 || s.starttls_only() {
                let line = String::from_utf8_lossy(&c.line).into_owned();
                s.log(Level::Info, format_args!("client was rejected: \"{line}\" while in auth state"));
                return Step::Reply(b"530 5.7.1 Authentication required\r\n".to_vec());
            }
            if c.args.is_empty() {
                return Step::Reply(INVALID_ARGUMENT.to_vec());
            }
            s.smtp_from = c.line.clone();
            s.smtp_to.clear();
            Step::Reply(OK.to_vec())
        }
        b"RCPT" => {
            if s.smtp_from.is_empty() {
                return Step::Reply(b"503 5.5.1 Bad sequence of commands\r\n".to_vec());
            }
            if c.args.is_empty() {
                return Step::Reply(INVALID_ARGUMENT.to_vec());
            }
            s.smtp_to = c.line.clone();
            s.login.clear();
            s.passwd.clear();
            s.method = Method::None;
            Step::Auth
        }
        b"RSET" => {
            s.smtp_from.clear();
            s.smtp_to.clear();
            Step::Reply(OK.to_vec())
        }
        b"NOOP" => Step::Reply(OK.to_vec()),
        b"STARTTLS" if !s.tls() && s.conf().starttls != StartTls::Off => {
            s.smtp_helo.clear();
            s.esmtp = false;
            Step::StartTls(b"220 2.0.0 Start TLS\r\n".to_vec())
        }
        _ => Step::Invalid,
    }
}
