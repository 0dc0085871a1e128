//! The `split_clients` block (ngx_http_split_clients_module): a variable
//! for A/B tests, chosen by the MurmurHash2 of a string
//! (`split_clients "${remote_addr}AAA" $variant { 0.5% .one; 2% .two; * ""; }`),
//! computed exactly as nginx computes it so that a client lands in the same
//! bucket under either server.

use std::sync::Arc;

use super::parser::{ConfError, Directive};
use crate::variables::Template;

pub struct SplitDef {
    pub name: String,
    pub source: Template,
    /// (upper bound of the hash, exclusive; 0 for `*`) and the value.
    parts: Vec<(u32, Arc<[u8]>)>,
}

impl std::fmt::Debug for SplitDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "split_clients ${}", self.name)
    }
}

impl PartialEq for SplitDef {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl SplitDef {
    /// The value for a family's variables: the source rendered, then looked up.
    pub fn eval(&self, src: &dyn crate::variables::VarSource) -> &[u8] {
        self.lookup(&self.source.render_to_vec(src))
    }

    /// The value for a rendered source string; empty when the percentages
    /// leave it out.
    pub fn lookup(&self, value: &[u8]) -> &[u8] {
        let h = murmur2(value);
        self.parts.iter().find(|(bound, _)| h < *bound || *bound == 0).map_or(&[], |(_, v)| v)
    }
}

/// nginx's `ngx_murmur_hash2` (seed 0, little-endian words).
pub fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let mut h = data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// nginx's `ngx_atofp(value, 2)`: hundredths of a percent, digits with at
/// most two decimals.
fn hundredths(t: &str) -> Option<u32> {
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() && frac.is_empty() || frac.len() > 2 {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let int: u32 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac: u32 = format!("{frac:0<2}").parse().ok()?;
    int.checked_mul(100)?.checked_add(frac)
}

/// Builds `split_clients STRING $variable { ... }`.
pub fn split_block(d: &Directive) -> Result<SplitDef, ConfError> {
    let src = d.args.first().map(|w| w.text.as_str()).unwrap_or("");
    let var = d.args.get(1).map(|w| w.text.as_str()).unwrap_or("");
    let Some(name) = var.strip_prefix('$').filter(|n| !n.is_empty()) else {
        return Err(ConfError::at(format!("invalid variable name \"{var}\""), &d.span));
    };
    let source = Template::compile(src).map_err(|e| ConfError::at(e, &d.span))?;
    let mut raw: Vec<(u32, Arc<[u8]>)> = Vec::new();
    for e in d.block.as_deref().unwrap_or(&[]) {
        let [v] = e.args.as_slice() else {
            return Err(ConfError::at("invalid number of the split_clients parameters", &e.span));
        };
        let k = e.name.as_str();
        let percent = if k == "*" {
            0
        } else {
            match k.strip_suffix('%').and_then(hundredths) {
                Some(n) if n > 0 => n,
                _ => return Err(ConfError::at(format!("invalid percent value \"{k}\""), &e.span)),
            }
        };
        raw.push((percent, Arc::from(v.text.as_bytes())));
    }
    // Cumulative bounds, as nginx: a running sum of percent * 0xffffffff / 10000.
    let (mut sum, mut last) = (0u32, 0u32);
    let mut parts = Vec::with_capacity(raw.len());
    for (percent, v) in raw {
        sum = if percent > 0 { sum + percent } else { 10000 };
        if sum > 10000 {
            return Err(ConfError::at("percent total is greater than 100%", &d.span));
        }
        if percent > 0 {
            last = last.wrapping_add((u64::from(percent) * 0xffff_ffff / 10000) as u32);
            parts.push((last, v));
        } else {
            parts.push((0, v));
        }
    }
    Ok(SplitDef { name: name.to_string(), source, parts })
}

thread_local! {
    static DEFINED: std::cell::RefCell<std::collections::HashMap<String, Arc<SplitDef>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// Forgets the blocks of a previous build.
pub fn reset() {
    DEFINED.with(|d| d.borrow_mut().clear());
}

/// The `split_clients` defining `$name`, for `Template::compile`.
pub fn lookup_var(name: &str) -> Option<Arc<SplitDef>> {
    DEFINED.with(|d| d.borrow().get(name).cloned())
}

/// Builds a block and makes its variable known.
pub fn define(d: &Directive) -> Result<(), ConfError> {
    let s = split_block(d)?;
    DEFINED.with(|r| r.borrow_mut().insert(s.name.clone(), Arc::new(s)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_matches_nginx() {
        // ngx_murmur_hash2 reference values.
        assert_eq!(murmur2(b""), 0);
        assert_eq!(murmur2(b"a"), 0x92685f5e);
        assert_eq!(murmur2(b"user3"), 0xd7cc3abe);
        assert_ne!(murmur2(b"abc"), murmur2(b"abd"));
    }

    #[test]
    fn percentages() {
        assert_eq!(hundredths("0.5"), Some(50));
        assert_eq!(hundredths("2"), Some(200));
        assert_eq!(hundredths("33.33"), Some(3333));
        assert_eq!(hundredths("1.234"), None);
        assert_eq!(hundredths("x"), None);
        assert_eq!(hundredths(""), None);
    }
}
