//! The JSON status API (`sluice_status`) as the status tests read it.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::request;

pub fn status(port: u16) -> Value {
    let r = request(port, "GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

/// The status once `ok` holds for it (sessions end asynchronously).
pub fn status_when(port: u16, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let j = status(port);
        if ok(&j) {
            return j;
        }
        assert!(Instant::now() < deadline, "{what}: {j:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}
