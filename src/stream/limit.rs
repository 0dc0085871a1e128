//! nginx's stream `limit_conn`: sessions in progress counted per key (a
//! `limit_conn_zone` key such as `$binary_remote_addr`) across every
//! worker; a session over a line's limit is refused with 503. The count
//! is given back when the session's [`Hold`] drops (the session ended, or
//! its task did).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::config::parser::{ConfError, Directive};
use crate::variables::Template;

pub struct Zone {
    pub name: String,
    pub key: Template,
    counts: Mutex<HashMap<Vec<u8>, u32>>,
}

/// `limit_conn_zone KEY zone=NAME:SIZE`.
pub fn zone(d: &Directive) -> Result<Zone, ConfError> {
    let key = super::build::compile(d, &d.args[0].text)?;
    let spec = d.args[1].text.as_str();
    let Some(rest) = spec.strip_prefix("zone=") else {
        return Err(ConfError::at(format!("invalid parameter \"{}\"", spec), &d.span));
    };
    let (name, size) = rest.split_once(':').unwrap_or((rest, ""));
    if name.is_empty() || crate::config::value::parse_size(size).is_none_or(|n| n == 0) {
        return Err(ConfError::at(format!("invalid zone size \"{}\"", spec), &d.span));
    }
    Ok(Zone { name: name.to_string(), key, counts: Mutex::new(HashMap::new()) })
}

/// A session counted in a zone.
pub struct Hold {
    zone: Arc<Zone>,
    key: Vec<u8>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut m = self.zone.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.key);
            }
        }
    }
}

/// Counts a session under `key`; None when `limit` are in progress already.
pub fn take(zone: &Arc<Zone>, key: Vec<u8>, limit: u32) -> Option<Hold> {
    let mut m = zone.counts.lock().unwrap_or_else(|e| e.into_inner());
    let n = m.entry(key.clone()).or_insert(0);
    if *n >= limit {
        if *n == 0 {
            m.remove(&key);
        }
        return None;
    }
    *n += 1;
    Some(Hold { zone: zone.clone(), key })
}
