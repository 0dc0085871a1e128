//! The `map` block: a variable whose value is looked up from another one
//! (`map $http_upgrade $connection_upgrade { default upgrade; '' close; }`).
//!
//! Maps are defined before anything else in `http` is compiled, so a
//! template anywhere may use one regardless of where the block is written
//! (nginx resolves variables after parsing too). While a configuration is
//! being built, the maps defined so far are visible to `Template::compile`
//! through a per-thread registry; the compiled `Var::Map` holds the map
//! itself, so nothing is looked up by name on the request path.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use super::parser::{ConfError, Directive};
use crate::variables::Template;

pub struct MapDef {
    pub name: String,
    pub source: Template,
    /// Exact strings, lowercased: nginx compares them ignoring case.
    pub exact: HashMap<Vec<u8>, Template>,
    pub regex: Vec<(crate::pattern::Regex, Template)>,
    pub default: Template,
    /// `hostnames`: a trailing dot of the value is ignored and the keys
    /// may be wildcards.
    pub hostnames: bool,
    /// `*.example.com` (`.example.com` also matches `example.com`): the
    /// key without `*`, lowercased, and the value.
    pub head: Vec<(Vec<u8>, bool, Template)>,
    /// `www.example.*`: the key without `*`, lowercased.
    pub tail: Vec<(Vec<u8>, Template)>,
    /// `volatile`: evaluated at each use. Otherwise the first value of a
    /// request is kept for the rest of it (across internal redirects too),
    /// as nginx caches its variables.
    pub volatile: bool,
}

impl std::fmt::Debug for MapDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "map ${}", self.name)
    }
}

/// Two maps are the same variable only if they are the same definition.
impl PartialEq for MapDef {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl MapDef {
    /// The value template for a source value, with the captures of the
    /// regex that matched (if one did): the value may use them, as
    /// `~^(?<site>.+)\.example\.com$ $site;` or `$1` do in nginx.
    pub fn lookup(&self, value: &[u8]) -> (&Template, Option<(&crate::pattern::Regex, crate::pattern::Spans)>) {
        let mut key = value.to_ascii_lowercase();
        if self.hostnames && key.last() == Some(&b'.') {
            key.pop();
        }
        if let Some(t) = self.exact.get(&key) {
            return (t, None);
        }
        if self.hostnames
            && let Some(t) = self.wildcard(&key)
        {
            return (t, None);
        }
        for (re, t) in &self.regex {
            if let Some(c) = re.captures(value) {
                return (t, Some((re, c)));
            }
        }
        (&self.default, None)
    }

    /// nginx's combined hash: the longest matching head wildcard, then the
    /// longest matching tail wildcard.
    fn wildcard(&self, key: &[u8]) -> Option<&Template> {
        let head = self
            .head
            .iter()
            .filter(|(suffix, dot, _)| {
                // `suffix` starts with the dot: ".example.com".
                (key.len() > suffix.len() && key.ends_with(suffix)) || (*dot && key == &suffix[1..])
            })
            .max_by_key(|(suffix, _, _)| suffix.len());
        if let Some((_, _, t)) = head {
            return Some(t);
        }
        self.tail
            .iter()
            .filter(|(prefix, _)| key.len() > prefix.len() && key.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, t)| t)
    }
}

/// Named captures kept as variables for the rest of a request or session.
pub type NamedCaptures = RefCell<Vec<(Arc<str>, Vec<u8>)>>;

impl MapDef {
    /// Evaluates the map for every family: renders the source, writes the
    /// value to `out`. A regex's named captures become variables from then
    /// on (nginx's behaviour) when `named` is given; `on_match` runs before
    /// the value is rendered, so a family can clear what the captures
    /// shadow.
    pub fn eval(
        &self,
        src: &dyn crate::variables::VarSource,
        named: Option<&NamedCaptures>,
        on_match: &dyn Fn(&crate::pattern::Regex),
        out: &mut Vec<u8>,
    ) {
        let key = self.source.render_to_vec(src);
        match self.lookup(&key) {
            (t, None) => t.render(src, out),
            (t, Some((re, spans))) => {
                if let Some(named) = named {
                    let mut set = named.borrow_mut();
                    for (i, name) in re.names() {
                        let v = spans.get(*i).copied().flatten().map(|(a, b)| key[a..b].to_vec()).unwrap_or_default();
                        set.retain(|(n, _)| n != name);
                        set.push((name.clone(), v));
                    }
                }
                on_match(re);
                t.render(&WithCaptures { inner: src, re, subject: &key, spans: &spans }, out)
            }
        }
    }
}

/// Renders a map value with the matching regex's captures in front of the
/// request's own variables.
pub struct WithCaptures<'s> {
    pub inner: &'s dyn crate::variables::VarSource,
    pub re: &'s crate::pattern::Regex,
    pub subject: &'s [u8],
    pub spans: &'s crate::pattern::Spans,
}

impl crate::variables::VarSource for WithCaptures<'_> {
    fn write_var(&self, var: &crate::variables::Var, out: &mut Vec<u8>) {
        use crate::variables::Var;
        let group = match var {
            Var::Capture(n) => Some(*n),
            Var::Named(name) => self.re.names().iter().find(|(_, n)| **n == **name).map(|(i, _)| *i),
            _ => None,
        };
        match group {
            Some(i) => {
                if let Some(Some((a, b))) = self.spans.get(i) {
                    out.extend_from_slice(&self.subject[*a..*b]);
                }
            }
            None => self.inner.write_var(var, out),
        }
    }
}

thread_local! {
    static DEFINED: RefCell<HashMap<String, Arc<MapDef>>> = RefCell::new(HashMap::new());
}

/// Forgets the maps of a previous build (each load starts empty).
pub fn reset() {
    DEFINED.with(|d| d.borrow_mut().clear());
}

/// The map defining `$name`, for `Var::from_name`.
pub fn lookup_var(name: &str) -> Option<Arc<MapDef>> {
    DEFINED.with(|d| d.borrow().get(name).cloned())
}

fn value(d: &Directive, text: &str) -> Result<Template, ConfError> {
    Template::compile(text).map_err(|e| ConfError::at(e, &d.span))
}

/// Builds `map SOURCE $NAME { ... }` and makes `$NAME` known.
pub fn map_block(d: &Directive) -> Result<(), ConfError> {
    let src = d.args.first().map(|w| w.text.as_str()).unwrap_or("");
    let var = d.args.get(1).map(|w| w.text.as_str()).unwrap_or("");
    let Some(name) = var.strip_prefix('$').filter(|n| !n.is_empty()) else {
        return Err(ConfError::at(format!("invalid variable name \"{}\"", var), &d.span));
    };
    let source = value(d, src)?;
    let mut m = MapDef {
        name: name.to_string(),
        source,
        exact: HashMap::new(),
        regex: Vec::new(),
        default: Template::literal(""),
        hostnames: false,
        head: Vec::new(),
        tail: Vec::new(),
        volatile: false,
    };
    for e in d.block.as_deref().unwrap_or(&[]) {
        let mut words = vec![e.name.as_str()];
        words.extend(e.args.iter().map(|w| w.text.as_str()));
        match words.as_slice() {
            ["hostnames"] => m.hostnames = true,
            ["volatile"] => m.volatile = true,
            [k, v] if m.hostnames && (k.starts_with('.') || k.starts_with("*.")) => {
                let dot = k.starts_with('.');
                let suffix = k.strip_prefix('*').unwrap_or(k).as_bytes().to_ascii_lowercase();
                m.head.push((suffix, dot, value(e, v)?));
            }
            [k, v] if m.hostnames && k.ends_with(".*") => {
                let prefix = k.as_bytes()[..k.len() - 1].to_ascii_lowercase();
                m.tail.push((prefix, value(e, v)?));
            }
            ["default", v] => m.default = value(e, v)?,
            [k, v] => {
                if let Some(pat) = k.strip_prefix('~') {
                    let (pat, caseless) = match pat.strip_prefix('*') {
                        Some(p) => (p, true),
                        None => (pat, false),
                    };
                    let re = crate::pattern::Regex::new(pat, caseless).map_err(|err| ConfError::at(err, &e.span))?;
                    super::captures::register(&re);
                    m.regex.push((re, value(e, v)?));
                } else {
                    let key = k.strip_prefix('\\').unwrap_or(k).as_bytes().to_ascii_lowercase();
                    if m.exact.insert(key, value(e, v)?).is_some() {
                        return Err(ConfError::at(format!("duplicate value \"{}\"", k), &e.span));
                    }
                }
            }
            _ => return Err(ConfError::at("invalid number of the map parameters", &e.span)),
        }
    }
    let name = m.name.clone();
    DEFINED.with(|r| r.borrow_mut().insert(name, Arc::new(m)));
    Ok(())
}
