//! The mail family's parsers of untrusted bytes: the client command
//! parsers (`mail::parse`) and the authentication server's answer
//! (`mail::auth_http`).

use crate::mail::auth_http;
use crate::mail::parse::{self, Parsed};

/// The command parsers: the first byte picks IMAP, POP3/SMTP or a SASL
/// continuation line. Never panics; a command takes no more than the
/// input and its name is upper-case letters; every prefix of the input
/// waits for more (or owes an IMAP literal continuation) or decides the
/// same as the whole, so pipelined and split commands parse alike.
pub fn mail_command(data: &[u8]) {
    let Some((&sel, input)) = data.split_first() else { return };
    let run = |b: &[u8]| match sel % 3 {
        0 => parse::imap(b),
        1 => parse::simple(b),
        _ => parse::continuation(b),
    };
    let whole = run(input);
    let decided_at = match &whole {
        Parsed::Command(c) => {
            assert!(c.consumed <= input.len() && c.consumed > 0);
            assert!(c.args.len() <= parse::MAX_ARGS || sel % 3 == 2);
            assert!(c.name.iter().all(u8::is_ascii_uppercase));
            assert!(c.line.len() <= c.consumed);
            Some(c.consumed)
        }
        Parsed::Invalid { consumed, .. } => {
            assert!(*consumed <= input.len() && *consumed > 0);
            Some(*consumed)
        }
        Parsed::Literal(n) => {
            assert!(*n < input.iter().filter(|b| **b == b'{').count());
            None
        }
        Parsed::Need => None,
    };
    for cut in 0..input.len() {
        let p = run(&input[..cut]);
        match (decided_at, &p) {
            (_, Parsed::Need | Parsed::Literal(_)) => {}
            (Some(at), _) if cut >= at => assert_eq!(p, whole, "prefix {cut} decided otherwise"),
            _ => panic!("prefix {cut} decided {p:?}, the whole {whole:?}"),
        }
    }
    // SASL payloads: decoding never panics and round-trips.
    if let Some(d) = parse::decode_base64(input) {
        assert_eq!(parse::decode_base64(parse::encode_base64(&d).as_bytes()), Some(d));
    }
    let _ = parse::sasl_plain(input);
    let _ = parse::sasl_cram_md5(input);
}

/// The authentication server's answer: never panics; a head that parses
/// is waited for (not refused) at every shorter prefix; escaping for the
/// request leaves no byte that could end or split a header.
pub fn auth_http_response(data: &[u8]) {
    let whole = auth_http::parse_head(data);
    if let Ok(Some(h)) = &whole {
        let _ = auth_http::answer(h);
        for cut in 0..data.len() {
            match auth_http::parse_head(&data[..cut]) {
                Ok(None) => {}
                Ok(Some(p)) => assert!(p.len() <= h.len(), "prefix {cut} ended the head early"),
                Err(e) => panic!("prefix {cut} refused ({e}), the whole parsed"),
            }
        }
    }
    let e = auth_http::escape(data);
    assert!(e.iter().all(|b| *b > b' ' && *b != 0x7f));
}
