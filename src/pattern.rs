//! Regexes with nginx's semantics. nginx compiles `location ~`, `rewrite`,
//! `if` and `map` regexes with PCRE2 on bytes (no UTF mode): `.` is any
//! byte but `\n`, `\d`, `\w`, `\s` and caseless matching are ASCII, `$`
//! also matches before a final `\n`, and look-around, backreferences,
//! atomic groups and `(?'name')` work.
//!
//! Most patterns need none of PCRE's backtracking features, and the `regex`
//! crate (with Unicode off, which gives the ASCII classes above) runs those
//! faster: it is the fast path. A pattern it refuses is compiled by PCRE2
//! (the `pcre2` crate, the library nginx uses). The one difference between
//! the two on patterns both accept is `$` (and `\Z`) before a final
//! newline, so a subject containing `\n` always goes to PCRE2 (compiled on
//! first need). `docs/benchmarks.md` has the cost of each.

use std::sync::{Arc, OnceLock};

/// Where each group matched: `(start, end)`, None for a group that did not
/// take part; index 0 is the whole match.
pub type Spans = Vec<Option<(usize, usize)>>;

pub struct Regex {
    text: String,
    caseless: bool,
    engine: Engine,
    /// Named groups: (group index, name).
    names: Vec<(usize, Arc<str>)>,
    /// The `set` slots of the named groups that `set` also writes: a match
    /// makes the capture the variable's value again (nginx has one value
    /// per variable, whoever wrote it last).
    set_slots: Vec<usize>,
}

enum Engine {
    Fast {
        re: regex::bytes::Regex,
        /// For subjects with a newline (see the module doc).
        pcre: OnceLock<Option<pcre2::bytes::Regex>>,
    },
    Pcre(pcre2::bytes::Regex),
}

impl std::fmt::Debug for Regex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} ({})", self.text, if self.is_pcre() { "pcre2" } else { "regex" })
    }
}

fn pcre(pattern: &str, caseless: bool) -> Result<pcre2::bytes::Regex, pcre2::Error> {
    pcre2::bytes::RegexBuilder::new().caseless(caseless).jit_if_available(true).build(pattern)
}

/// Syntax the `regex` crate accepts with another meaning than PCRE's:
/// possessive quantifiers (`a++` is `(a+)+` there), `{,n}` (a literal in
/// PCRE2 10.42), class set operations (`&&`, `--`, `~~`) and nested classes
/// (literal in PCRE), `\<` `\>` `\b{...}` (word boundaries there,
/// literals in PCRE), `\v` (vertical tab there, a class in PCRE) and the
/// `u` flag. Such patterns go to PCRE2; the check is textual, so it errs
/// towards PCRE2, which is always right.
fn means_else_in_pcre(p: &str) -> bool {
    const SEQS: &[&str] =
        &["++", "*+", "?+", "}+", "{,", "&&", "--", "~~", "\\<", "\\>", "\\v", "\\b{", "\\B{", "(?u", "(?-u"];
    if SEQS.iter().any(|s| p.contains(s)) {
        return true;
    }
    let b = p.as_bytes();
    let mut i = 0;
    let mut in_class = false;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'[' if !in_class => {
                in_class = true;
                // A leading `^` and then `]` are part of the class.
                if b.get(i + 1) == Some(&b'^') {
                    i += 1;
                }
                if b.get(i + 1) == Some(&b']') {
                    i += 1;
                }
            }
            b'[' if b.get(i + 1) == Some(&b':') => match p[i..].find(":]") {
                Some(end) => i += end + 1,
                None => return true,
            },
            b'[' => return true,
            b']' => in_class = false,
            _ => {}
        }
        i += 1;
    }
    false
}

fn names<'a>(it: impl Iterator<Item = Option<&'a str>>) -> Vec<(usize, Arc<str>)> {
    it.enumerate().filter_map(|(i, n)| n.map(|n| (i, Arc::from(n)))).collect()
}

impl Regex {
    /// Compiles `pattern` (`caseless` for `~*`); the error is nginx's
    /// `pcre2_compile() failed: ... in "..."` message.
    pub fn new(pattern: &str, caseless: bool) -> Result<Regex, String> {
        let fast = if means_else_in_pcre(pattern) {
            Err(())
        } else {
            regex::bytes::RegexBuilder::new(pattern).unicode(false).case_insensitive(caseless).build().map_err(|_| ())
        };
        let (engine, names) = match fast {
            Ok(re) => {
                let n = names(re.capture_names());
                (Engine::Fast { re, pcre: OnceLock::new() }, n)
            }
            Err(_) => {
                let re = pcre(pattern, caseless).map_err(|e| {
                    // Display is "PCRE2: error compiling pattern [at offset N]: MESSAGE".
                    let shown = e.to_string();
                    let what = shown.find("pattern").and_then(|i| shown[i..].find(": ").map(|j| i + j + 2));
                    let what = what.map_or(shown.as_str(), |i| &shown[i..]);
                    // nginx leaves out `at ""` when the error is at the end.
                    match e.offset().filter(|&at| at < pattern.len()) {
                        Some(at) => format!(
                            "pcre2_compile() failed: {} in \"{}\" at \"{}\"",
                            what,
                            pattern,
                            pattern.get(at..).unwrap_or("")
                        ),
                        None => format!("pcre2_compile() failed: {} in \"{}\"", what, pattern),
                    }
                })?;
                let n = names(re.capture_names().iter().map(|n| n.as_deref()));
                (Engine::Pcre(re), n)
            }
        };
        let set_slots = names.iter().filter_map(|(_, n)| crate::http::rewrite::vars::slot(n)).collect();
        Ok(Regex { text: pattern.to_string(), caseless, engine, names, set_slots })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Compiled by PCRE2 (the pattern needs it), not the fast path.
    pub fn is_pcre(&self) -> bool {
        matches!(self.engine, Engine::Pcre(_))
    }

    /// The named groups: (group index, name).
    pub fn names(&self) -> &[(usize, Arc<str>)] {
        &self.names
    }

    /// Slots of `set` variables named like one of the groups.
    pub fn set_slots(&self) -> &[usize] {
        &self.set_slots
    }

    /// The PCRE2 program for `subject`, when it must be used.
    fn pcre_for(&self, subject: &[u8]) -> Option<&pcre2::bytes::Regex> {
        match &self.engine {
            Engine::Pcre(p) => Some(p),
            Engine::Fast { pcre: slow, .. } if memchr::memchr(b'\n', subject).is_some() => {
                slow.get_or_init(|| pcre(&self.text, self.caseless).ok()).as_ref()
            }
            Engine::Fast { .. } => None,
        }
    }

    pub fn is_match(&self, subject: &[u8]) -> bool {
        match (self.pcre_for(subject), &self.engine) {
            (Some(p), _) => p.is_match(subject).unwrap_or(false),
            (None, Engine::Fast { re, .. }) => re.is_match(subject),
            (None, Engine::Pcre(_)) => false,
        }
    }

    /// The groups' spans when the regex matches.
    pub fn captures(&self, subject: &[u8]) -> Option<Spans> {
        match (self.pcre_for(subject), &self.engine) {
            (Some(p), _) => {
                let mut locs = p.capture_locations();
                p.captures_read(&mut locs, subject).ok()??;
                Some((0..locs.len()).map(|i| locs.get(i)).collect())
            }
            (None, Engine::Fast { re, .. }) => {
                let mut locs = re.capture_locations();
                re.captures_read(&mut locs, subject)?;
                Some((0..locs.len()).map(|i| locs.get(i)).collect())
            }
            (None, Engine::Pcre(_)) => None,
        }
    }

    /// The groups' values (empty for one that did not take part).
    pub fn capture_values(&self, subject: &[u8]) -> Option<Vec<Vec<u8>>> {
        let spans = self.captures(subject)?;
        Some(spans.into_iter().map(|s| s.map(|(a, b)| subject[a..b].to_vec()).unwrap_or_default()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        Regex::new(p, false).unwrap().is_match(s.as_bytes())
    }

    #[test]
    fn fast_path_for_plain_patterns_pcre_for_the_rest() {
        assert!(!Regex::new(r"\.php$", false).unwrap().is_pcre());
        assert!(!Regex::new(r"^/(?<a>x)(?P<b>y)", false).unwrap().is_pcre());
        assert!(!Regex::new(r"^/[[:alpha:]_-]+\.(?:jpe?g|png)$", true).unwrap().is_pcre());
        assert!(!Regex::new(r"[]a-]", false).unwrap().is_pcre());
        // Possessive: never matches in PCRE, would as `(a+)+a`.
        assert!(!m(r"^a++a$", "aaa"));
        for p in [
            r"/\.(?!well-known)",
            r"(?<=/a)b",
            r"^/(\w)\1$",
            r"^/(?'n'x)$",
            r"(?>a+)b",
            r"a++b",
            r"\Qa.b\E",
            r"x{,2}",
            r"[a-z&&b]",
            r"[[a]]",
            r"\<a",
            r"\v",
        ] {
            assert!(Regex::new(p, false).unwrap().is_pcre(), "{p}");
        }
    }

    #[test]
    fn pcre_semantics() {
        assert!(m(r"/\.(?!well-known)", "/.git/config"));
        assert!(!m(r"/\.(?!well-known)", "/.well-known/acme"));
        assert!(m(r"^/(\w+)/\1$", "/ab/ab"));
        assert!(!m(r"^/(\w+)/\1$", "/ab/cd"));
        let re = Regex::new(r"^/(?'user'[a-z]+)/", false).unwrap();
        assert_eq!(re.names(), &[(1, Arc::from("user"))]);
        assert_eq!(re.capture_values(b"/bob/x").unwrap()[1], b"bob".to_vec());
        // ASCII classes and any byte for `.`, as PCRE without UTF.
        assert!(!m(r"^\d$", "\u{663}"));
        assert!(m(r"^/..$", "/\u{e9}"));
        let bytes = Regex::new(r"^/a.b$", false).unwrap();
        assert!(bytes.is_match(b"/a\xffb"));
        assert!(Regex::new(r"^/ABC$", true).unwrap().is_match(b"/abc"));
        // `$` before a final newline, on both paths.
        assert!(m(r"^/a$", "/a\n"));
        assert!(Regex::new(r"^/a(?=$)", false).unwrap().is_match(b"/a\n"));
    }

    /// `cargo test --release --lib pattern::tests::match_cost -- --ignored
    /// --nocapture`: nanoseconds per location-style match on each engine
    /// (the figures in docs/benchmarks.md).
    #[test]
    #[ignore]
    fn match_cost() {
        let uris: [&[u8]; 4] =
            [b"/index.html", b"/static/css/site.min.css", b"/api/v1/users/1234/profile", b"/wp-admin/admin-ajax.php"];
        for p in [r"\.php$", r"^/api/v1/users/(\d+)/(\w+)$", r"\.(?:jpe?g|png|gif|css|js)$", r"/\.(?!well-known)"] {
            let fast = regex::bytes::RegexBuilder::new(p).unicode(false).build().ok();
            let slow = pcre(p, false).unwrap();
            let n = 200_000;
            // The best of 5 rounds: the machine is shared.
            let time = |f: &dyn Fn(&[u8]) -> bool| {
                let mut best = f64::MAX;
                let mut hits = 0;
                for _ in 0..5 {
                    let t = std::time::Instant::now();
                    for i in 0..n {
                        hits += usize::from(f(uris[i % uris.len()]));
                    }
                    best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
                }
                (best, hits)
            };
            let (p_ns, _) = time(&|u| slow.is_match(u).unwrap_or(false));
            let f_ns = fast.as_ref().map(|re| time(&|u| re.is_match(u)).0);
            println!(
                "{p:40} regex {:>6} ns  pcre2(jit) {p_ns:>6.1} ns",
                f_ns.map_or("-".into(), |v| format!("{v:.1}"))
            );
        }
    }

    #[test]
    fn nginx_error_message() {
        let e = Regex::new(r"^/(a", false).unwrap_err();
        assert!(e.starts_with("pcre2_compile() failed: missing closing parenthesis in \"^/(a\""), "{e}");
    }
}
