//! ACME Renewal Information (RFC 9773): the CA says when a certificate
//! should be renewed (a window, earlier than planned when it revokes or
//! rotates), and how long until it should be asked again. The certificate
//! is named by its issuer's key identifier and its serial (section 4.1);
//! the time is drawn at random inside the window, so many certificates
//! the CA puts in one window do not all come back at once (section 4.2);
//! the new order says which certificate it replaces (section 5).

use std::time::Duration;

use super::wire::RenewalWindow;

/// The certificate's ARI identifier: base64url of the Authority Key
/// Identifier's keyIdentifier, a dot, base64url of the serial's DER value
/// bytes (a leading zero included). None without a keyIdentifier.
pub fn cert_id(leaf_der: &[u8]) -> Option<String> {
    let f = crate::tls::ocsp::der::cert_fields(leaf_der)?;
    let aki = f.aki.filter(|k| !k.is_empty())?;
    Some(format!("{}.{}", super::jws::b64u(aki), super::jws::b64u(f.serial)))
}

/// When to renew, in Unix time: a uniformly random moment of the part of
/// the window still ahead, now when the window has passed. `random` is a
/// uniformly random u64.
pub fn pick(w: RenewalWindow, now: i64, random: u64) -> i64 {
    let start = w.start.max(now);
    if w.end <= start {
        return start;
    }
    let span = (w.end - start) as u64;
    start + (random % span) as i64
}

/// How long until the renewal information is asked for again: the CA's
/// Retry-After, kept between a minute and a day (RFC 9773 section 4.3
/// asks for limits of the client's own), six hours without one.
pub fn recheck(retry_after: Option<u64>) -> Duration {
    Duration::from_secs(retry_after.unwrap_or(6 * 3600).clamp(60, 86400))
}

/// A uniformly random u64 from the system's generator (0 if it fails:
/// the start of the window, which is still inside it).
pub fn random() -> u64 {
    let mut b = [0u8; 8];
    match aws_lc_rs::rand::fill(&mut b) {
        Ok(()) => u64::from_le_bytes(b),
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_inside_the_window_or_now() {
        let w = RenewalWindow { start: 1000, end: 2000 };
        assert_eq!(pick(w, 500, 0), 1000);
        assert_eq!(pick(w, 500, 999), 1999);
        assert_eq!(pick(w, 500, 1000), 1000);
        assert_eq!(pick(w, 1500, 7), 1507);
        // A window in the past: at once.
        assert_eq!(pick(w, 2500, 42), 2500);
        assert_eq!(pick(RenewalWindow { start: 10, end: 10 }, 5, 3), 10);
        assert_eq!(recheck(Some(1)), Duration::from_secs(60));
        assert_eq!(recheck(Some(21600)), Duration::from_secs(21600));
        assert_eq!(recheck(None), Duration::from_secs(21600));
        assert_eq!(recheck(Some(u64::MAX)), Duration::from_secs(86400));
    }

    #[test]
    fn cert_id_as_the_rfc_example() {
        // RFC 9773 appendix A: keyIdentifier 69:88:5B:6B:87:46:40:41:E1:B3:7B:84:7B:A0:AE:2C:DE:01:C8:D4,
        // serial 00:87:65:43:21.
        let aki = [
            0x69, 0x88, 0x5B, 0x6B, 0x87, 0x46, 0x40, 0x41, 0xE1, 0xB3, 0x7B, 0x84, 0x7B, 0xA0, 0xAE, 0x2C, 0xDE, 0x01,
            0xC8, 0xD4,
        ];
        let serial = [0x00, 0x87, 0x65, 0x43, 0x21];
        let id = format!("{}.{}", super::super::jws::b64u(&aki), super::super::jws::b64u(&serial));
        assert_eq!(id, "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE");
    }
}
