//! Builds the directive tree from lexer statements, following nginx's
//! `ngx_conf_parse`: blocks must close in the file that opened them, and
//! `include` is expanded here, in place, so that later stages see one tree
//! and never need to know which file a directive came from except through its
//! [`Span`].

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::lexer::{End, LexError, Lexer, Word};

/// Guards against an include cycle recursing until the stack overflows.
const MAX_INCLUDE_DEPTH: usize = 32;

/// Where a directive was written; the file is shared by every directive from
/// the same file to keep the tree cheap to clone.
#[derive(Clone, Debug)]
pub struct Span {
    pub file: Arc<PathBuf>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct Directive {
    pub name: String,
    pub args: Vec<Word>,
    pub block: Option<Vec<Directive>>,
    /// Line of the terminating `;` or `{`, where nginx reports errors about
    /// the directive itself.
    pub span: Span,
    /// Line of the block's closing `}` (equal to `span.line` for a directive
    /// without a block): nginx reports problems found only once a block is
    /// complete, such as an upstream without servers, at that line.
    pub end_line: u32,
}

/// A loaded file kept verbatim so `-T` can print the configuration as read.
#[derive(Clone, Debug)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub text: String,
}

#[derive(Clone, Debug, Default)]
pub struct Parsed {
    pub directives: Vec<Directive>,
    /// Every file read, in load order (main first, then includes as met).
    pub files: Vec<ConfigFile>,
}

/// An error worded like nginx's, so operators' existing knowledge and log
/// matching carry over.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfError {
    pub msg: String,
    pub file: Option<PathBuf>,
    pub line: u32,
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{} in {}:{}", self.msg, file.display(), self.line),
            None => f.write_str(&self.msg),
        }
    }
}

impl std::error::Error for ConfError {}

impl ConfError {
    pub fn at(msg: impl Into<String>, span: &Span) -> ConfError {
        ConfError { msg: msg.into(), file: Some(span.file.as_ref().clone()), line: span.line }
    }

    /// For errors that have no position, like failing to open the main file.
    pub fn plain(msg: impl Into<String>) -> ConfError {
        ConfError { msg: msg.into(), file: None, line: 0 }
    }
}

/// Reads and parses the main file (path made absolute by the caller),
/// expanding includes against `conf_dir`.
pub fn parse_file(path: &Path, conf_dir: &Path) -> Result<Parsed, ConfError> {
    let text = read_conf(path).map_err(ConfError::plain)?;
    parse_source(path.to_path_buf(), text, conf_dir)
}

/// Parses text that did not come from a file (the embedded default config,
/// `-g` directives), named `name` in errors; includes resolve against
/// `conf_dir`. The text is recorded in `files` under `name` like a real
/// file, so `-T` can show an embedded config; callers that do not want it
/// shown can drop that first entry.
pub fn parse_str(text: &str, name: &Path, conf_dir: &Path) -> Result<Parsed, ConfError> {
    parse_source(name.to_path_buf(), text.to_string(), conf_dir)
}

fn parse_source(path: PathBuf, text: String, conf_dir: &Path) -> Result<Parsed, ConfError> {
    let mut loader = Loader { conf_dir, files: Vec::new() };
    let directives = loader.parse_text(path, text, 0)?;
    Ok(Parsed { directives, files: loader.files })
}

/// Formats like nginx's `call() "path" failed (errno: strerror)`; std's own
/// ` (os error N)` suffix is stripped to match.
pub(crate) fn failed(call: &str, path: &Path, err: &io::Error) -> String {
    let text = err.to_string();
    let detail = match err.raw_os_error() {
        Some(code) => {
            let suffix = format!(" (os error {code})");
            let desc = text.strip_suffix(&suffix).unwrap_or(&text);
            format!("{code}: {desc}")
        }
        None => text,
    };
    format!("{call}() \"{}\" failed ({detail})", path.display())
}

/// Distinguishes open from read failures (a directory opens fine but cannot
/// be read) because nginx names the failing call in its message.
fn read_conf(path: &Path) -> Result<String, String> {
    let mut file = File::open(path).map_err(|e| failed("open", path, &e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| failed("read", path, &e))?;
    // nginx accepts arbitrary bytes; replacing invalid UTF-8 keeps such a
    // config loadable rather than rejecting it outright.
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

struct Loader<'a> {
    conf_dir: &'a Path,
    files: Vec<ConfigFile>,
}

impl Loader<'_> {
    fn parse_text(&mut self, path: PathBuf, text: String, depth: usize) -> Result<Vec<Directive>, ConfError> {
        let file = Arc::new(path.clone());
        // Recorded before parsing so nested includes follow their parent.
        self.files.push(ConfigFile { path, text: text.clone() });
        let mut lexer = Lexer::new(&text);
        let (directives, _) = self.parse_block(&mut lexer, &file, depth, false)?;
        Ok(directives)
    }

    /// Parses until the matching `}` (when `in_block`) or end of file, and
    /// returns the directives with the line where parsing stopped.
    fn parse_block(
        &mut self,
        lexer: &mut Lexer<'_>,
        file: &Arc<PathBuf>,
        depth: usize,
        in_block: bool,
    ) -> Result<(Vec<Directive>, u32), ConfError> {
        let mut out = Vec::new();
        loop {
            let st = lexer.read_statement().map_err(|e| lex_error(e, file))?;
            let span = Span { file: Arc::clone(file), line: st.line };
            let opens_block = match st.end {
                End::BlockEnd if in_block => return Ok((out, st.line)),
                End::BlockEnd => return Err(ConfError::at("unexpected \"}\"", &span)),
                End::Eof if in_block => {
                    return Err(ConfError::at("unexpected end of file, expecting \"}\"", &span));
                }
                End::Eof => return Ok((out, st.line)),
                End::Semicolon => false,
                End::BlockStart => true,
            };
            let mut words = st.words.into_iter();
            let Some(name) = words.next() else {
                // The lexer never ends a directive without a name; keep the
                // nginx wording should that ever change.
                let token = if opens_block { "{" } else { ";" };
                return Err(ConfError::at(format!("unexpected \"{token}\""), &span));
            };
            let args: Vec<Word> = words.collect();

            if name.text == "include" {
                if opens_block {
                    return Err(ConfError::at("directive \"include\" is not terminated by \";\"", &span));
                }
                let [pattern] = args.as_slice() else {
                    return Err(ConfError::at("invalid number of arguments in \"include\" directive", &span));
                };
                out.extend(self.include(&pattern.text, &span, depth)?);
                continue;
            }

            let (block, end_line) = if opens_block {
                let (children, end) = self.parse_block(lexer, file, depth, true)?;
                (Some(children), end)
            } else {
                (None, span.line)
            };
            out.push(Directive { name: name.text, args, block, span, end_line });
        }
    }

    fn include(&mut self, pattern: &str, span: &Span, depth: usize) -> Result<Vec<Directive>, ConfError> {
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(ConfError::at("too many nested includes", span));
        }
        // Like nginx, the glob test looks at the whole resolved name.
        let full = self.conf_dir.join(pattern);
        let full_str = full.to_string_lossy().into_owned();
        let paths = if full_str.contains(['*', '?', '[']) {
            // POSIX glob(3) semantics, which nginx uses: `*` never crosses a
            // `/` and does not match a leading dot.
            let options = glob::MatchOptions {
                case_sensitive: true,
                require_literal_separator: true,
                require_literal_leading_dot: true,
            };
            let matches = glob::glob_with(&full_str, options)
                .map_err(|e| ConfError::at(format!("glob() \"{full_str}\" failed ({})", e.msg), span))?;
            // Unreadable directories are skipped, as glob(3) does without
            // GLOB_ERR.
            let mut found: Vec<PathBuf> = matches.filter_map(Result::ok).collect();
            found.sort();
            found
        } else {
            vec![full]
        };

        let mut out = Vec::new();
        for path in paths {
            let text = read_conf(&path).map_err(|msg| ConfError::at(msg, span))?;
            out.extend(self.parse_text(path, text, depth + 1)?);
        }
        Ok(out)
    }
}

fn lex_error(e: LexError, file: &Arc<PathBuf>) -> ConfError {
    ConfError { msg: e.msg, file: Some(file.as_ref().clone()), line: e.line }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A unique scratch directory, removed on drop even if the test fails.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("sluice-parser-{}-{n}", std::process::id()));
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, text).unwrap();
            path
        }

        fn parse(&self, name: &str) -> Result<Parsed, ConfError> {
            parse_file(&self.0.join(name), &self.0)
        }

        /// Error text with the scratch directory shown as `DIR`.
        fn err(&self, name: &str) -> String {
            let e = self.parse(name).unwrap_err().to_string();
            e.replace(&self.0.display().to_string(), "DIR")
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const T: &str = "/etc/sluice/test.conf";

    fn parse(text: &str) -> Result<Parsed, ConfError> {
        parse_str(text, Path::new(T), Path::new("/etc/sluice"))
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    /// One line per directive: `name args @line..end_line file`, indented by
    /// depth, so whole trees can be compared exactly in one assert.
    fn tree(p: &Parsed) -> String {
        fn walk(ds: &[Directive], depth: usize, out: &mut String) {
            for d in ds {
                let args: Vec<&str> = d.args.iter().map(|w| w.text.as_str()).collect();
                let file = d.span.file.file_name().unwrap().to_string_lossy();
                let (line, end) = (d.span.line, d.end_line);
                let indent = "  ".repeat(depth);
                out.push_str(&format!("{indent}{} {args:?} @{line}..{end} {file}\n", d.name));
                if let Some(block) = &d.block {
                    walk(block, depth + 1, out);
                }
            }
        }
        let mut out = String::new();
        walk(&p.directives, 0, &mut out);
        out
    }

    #[test]
    fn simple_and_nested() {
        let text = "user www;\nhttp {\n  server {\n    listen 80;\n  }\n  gzip on;\n}\n";
        let p = parse(text).unwrap();
        let want = r#"user ["www"] @1..1 test.conf
http [] @2..7 test.conf
  server [] @3..5 test.conf
    listen ["80"] @4..4 test.conf
  gzip ["on"] @6..6 test.conf
"#;
        assert_eq!(tree(&p), want);
        assert!(p.directives[0].block.is_none());
        assert_eq!(p.directives[1].block.as_ref().map(Vec::len), Some(2));
        assert_eq!(p.files.len(), 1);
        assert_eq!((p.files[0].path.to_str(), p.files[0].text.as_str()), (Some(T), text));
        let empty = parse("events {}").unwrap();
        assert_eq!(empty.directives[0].block.as_ref().map(Vec::len), Some(0));
        assert!(parse("").unwrap().directives.is_empty());
    }

    #[test]
    fn lines_follow_terminator() {
        let p = parse("a\n  b\n  c\n;\nlocation\n/x\n{\nreturn 200 \"multi\nline\";\n\n}").unwrap();
        let want = r#"a ["b", "c"] @4..4 test.conf
location ["/x"] @7..11 test.conf
  return ["200", "multi\nline"] @9..9 test.conf
"#;
        assert_eq!(tree(&p), want);
        let a = &p.directives[0];
        assert_eq!((a.args[0].line, a.args[1].line), (2, 3));
    }

    #[test]
    fn quoted_and_escaped_args() {
        let p = parse(r#"add_header X "" ; return 200 'a\tb\\c\'d\"e\r\n\x';"#).unwrap();
        assert_eq!(
            tree(&p),
            concat!(
                "add_header [\"X\", \"\"] @1..1 test.conf\n",
                "return [\"200\", \"a\\tb\\\\c'd\\\"e\\r\\n\\\\x\"] @1..1 test.conf\n"
            )
        );
        let quoted: Vec<bool> = p.directives[0].args.iter().map(|w| w.quoted).collect();
        assert_eq!(quoted, [false, true]);
    }

    #[test]
    fn comments_and_variables() {
        let p = parse("# top\nset $a ${host}#x; # trailing ;{}\nproxy_pass http://b$uri;#end").unwrap();
        let want = r#"set ["$a", "${host}#x"] @2..2 test.conf
proxy_pass ["http://b$uri"] @3..3 test.conf
"#;
        assert_eq!(tree(&p), want);
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(err("a;\n}"), format!(r#"unexpected "}}" in {T}:2"#));
        assert_eq!(err("http {\n a b\n}"), format!(r#"unexpected "}}" in {T}:3"#));
        assert_eq!(err("\n;"), format!(r#"unexpected ";" in {T}:2"#));
        assert_eq!(err("a;\n\n{}"), format!(r#"unexpected "{{" in {T}:3"#));
        assert_eq!(err("a \"b\"c;"), format!(r#"unexpected "c" in {T}:1"#));
        let eof_block = format!(r#"unexpected end of file, expecting "}}" in {T}:4"#);
        assert_eq!(err("http {\n server {\n }\n"), eof_block);
        let eof_directive = format!(r#"unexpected end of file, expecting ";" or "}}" in {T}:2"#);
        assert_eq!(err("http {\n listen 80"), eof_directive);
        let want = ConfError { msg: r#"unexpected "}""#.into(), file: Some(T.into()), line: 3 };
        assert_eq!(parse("x;\n\n}").unwrap_err(), want);
    }

    #[test]
    fn conf_error_constructors() {
        let span = Span { file: Arc::new(PathBuf::from("/a/b.conf")), line: 7 };
        assert_eq!(ConfError::at("bad", &span).to_string(), "bad in /a/b.conf:7");
        let plain = ConfError::plain("worse");
        assert_eq!((plain.to_string(), plain.file, plain.line), ("worse".into(), None, 0));
    }

    #[test]
    fn missing_main_file() {
        let dir = TempDir::new();
        let want = r#"open() "DIR/nope.conf" failed (2: No such file or directory)"#;
        assert_eq!(dir.err("nope.conf"), want);
        assert_eq!(dir.parse("nope.conf").unwrap_err().file, None);
    }

    #[test]
    fn include_single_file_into_nested_block() {
        let dir = TempDir::new();
        let inc_text = "location / {\n  root /srv;\n}\n";
        let main_text = "http {\n  server {\n    include conf.d/loc.conf;\n    listen 80;\n  }\n}\n";
        let inc = dir.write("conf.d/loc.conf", inc_text);
        let main = dir.write("main.conf", main_text);
        let p = dir.parse("main.conf").unwrap();
        let want = r#"http [] @1..6 main.conf
  server [] @2..5 main.conf
    location ["/"] @1..3 loc.conf
      root ["/srv"] @2..2 loc.conf
    listen ["80"] @4..4 main.conf
"#;
        assert_eq!(tree(&p), want);
        let server = &p.directives[0].block.as_ref().unwrap()[0];
        assert_eq!(*server.block.as_ref().unwrap()[0].span.file, inc);
        let files: Vec<(&Path, &str)> = p.files.iter().map(|f| (f.path.as_path(), f.text.as_str())).collect();
        assert_eq!(files, [(main.as_path(), main_text), (inc.as_path(), inc_text)]);
    }

    #[test]
    fn include_absolute_path_from_str() {
        let dir = TempDir::new();
        let inc = dir.write("abs.conf", "a 1;");
        let text = format!("include \"{}\";\nb 2;", inc.display());
        let p = parse_str(&text, Path::new("/x/-g"), Path::new("/nonexistent")).unwrap();
        assert_eq!(tree(&p), "a [\"1\"] @1..1 abs.conf\nb [\"2\"] @2..2 -g\n");
    }

    #[test]
    fn include_glob_sorted() {
        let dir = TempDir::new();
        let b = dir.write("sites/b.conf", "b;\n");
        let a = dir.write("sites/a.conf", "a;\n");
        dir.write("sites/.hidden.conf", "hidden;\n");
        dir.write("sites/c.txt", "c;\n");
        let text = "first;\ninclude sites/*.conf;\ninclude none/*.conf;\ninclude sites/[a]?conf;\nlast;";
        let main = dir.write("main.conf", text);
        let p = dir.parse("main.conf").unwrap();
        let names: Vec<&str> = p.directives.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["first", "a", "b", "a", "last"]);
        let paths: Vec<&Path> = p.files.iter().map(|f| f.path.as_path()).collect();
        assert_eq!(paths, [&main, &a, &b, &a]);
        assert_eq!(*p.directives[2].span.file, b);
    }

    #[test]
    fn include_errors() {
        let dir = TempDir::new();
        dir.write("m.conf", "a;\n\ninclude missing.conf;\n");
        let want = r#"open() "DIR/missing.conf" failed (2: No such file or directory) in DIR/m.conf:3"#;
        assert_eq!(dir.err("m.conf"), want);
        dir.write("sub/x.conf", "x;");
        dir.write("d.conf", "include sub/;");
        let want = r#"read() "DIR/sub/" failed (21: Is a directory) in DIR/d.conf:1"#;
        assert_eq!(dir.err("d.conf"), want);
        let args = format!(r#"invalid number of arguments in "include" directive in {T}:2"#);
        assert_eq!(err("a;\ninclude;"), args);
        assert_eq!(err("include a\n b;"), args);
        let block = format!(r#"directive "include" is not terminated by ";" in {T}:1"#);
        assert_eq!(err("include a {}"), block);
    }

    #[test]
    fn included_file_errors_name_that_file() {
        let dir = TempDir::new();
        dir.write("bad.conf", "ok;\n\nbroken \"x\"y;\n");
        dir.write("m.conf", "http {\ninclude bad.conf;\n}\n");
        assert_eq!(dir.err("m.conf"), r#"unexpected "y" in DIR/bad.conf:3"#);
        // Blocks must close in the file that opened them, as in nginx.
        dir.write("open.conf", "server {\n");
        dir.write("m2.conf", "include open.conf;\n}\n");
        let want = r#"unexpected end of file, expecting "}" in DIR/open.conf:2"#;
        assert_eq!(dir.err("m2.conf"), want);
        dir.write("close.conf", "a;\n}\n");
        dir.write("m3.conf", "http {\ninclude close.conf;\n");
        assert_eq!(dir.err("m3.conf"), r#"unexpected "}" in DIR/close.conf:2"#);
    }

    #[test]
    fn include_depth_limit() {
        let dir = TempDir::new();
        dir.write("loop.conf", "a;\ninclude loop.conf;\n");
        assert_eq!(dir.err("loop.conf"), "too many nested includes in DIR/loop.conf:2");
        // Exactly 32 nested includes are allowed.
        for i in 0..32 {
            dir.write(&format!("n{i}.conf"), &format!("include n{}.conf;", i + 1));
        }
        dir.write("n32.conf", "deep on;");
        let p = dir.parse("n0.conf").unwrap();
        assert_eq!(p.files.len(), 33);
        assert_eq!(tree(&p), "deep [\"on\"] @1..1 n32.conf\n");
        dir.write("n32.conf", "include n33.conf;");
        assert_eq!(dir.err("n0.conf"), "too many nested includes in DIR/n32.conf:1");
    }

    #[test]
    fn realistic_nginx_conf() {
        let masks: Vec<String> = (0..32).map(|i| format!("{:032b}", 1u64 << i)).collect();
        let mut affinity = String::from("worker_cpu_affinity");
        for (i, m) in masks.iter().enumerate() {
            affinity.push_str(if i % 4 == 0 { "\n    " } else { " " });
            affinity.push_str(m);
        }
        let text = format!(
            r#"user nginx;
worker_processes 32;
{affinity};

events {{
    worker_connections 1024;
}}

http {{
    log_format main '$remote_addr - $remote_user [$time_local] "$request" '
                    '$status $body_bytes_sent';
    server {{
        listen 80 default_server;
        server_name _;  # catch-all
        location ~ \.php$ {{
            if ($request_method = "POST") {{
                return 405;
            }}
        }}
    }}
}}
"#
        );
        let p = parse(&text).unwrap();
        let want = format!(
            r#"user ["nginx"] @1..1 test.conf
worker_processes ["32"] @2..2 test.conf
worker_cpu_affinity {masks:?} @11..11 test.conf
events [] @13..15 test.conf
  worker_connections ["1024"] @14..14 test.conf
http [] @17..29 test.conf
  log_format ["main", "$remote_addr - $remote_user [$time_local] \"$request\" ", "$status $body_bytes_sent"] @19..19 test.conf
  server [] @20..28 test.conf
    listen ["80", "default_server"] @21..21 test.conf
    server_name ["_"] @22..22 test.conf
    location ["~", "\\.php$"] @23..27 test.conf
      if ["($request_method", "=", "POST", ")"] @24..26 test.conf
        return ["405"] @25..25 test.conf
"#
        );
        assert_eq!(tree(&p), want);
        let affinity = &p.directives[2];
        assert_eq!(affinity.args[0].text, "00000000000000000000000000000001");
        assert_eq!((affinity.args.len(), affinity.args[31].line), (32, 11));
        let log_format = &p.directives[4].block.as_ref().unwrap()[0];
        let meta: Vec<(bool, u32)> = log_format.args.iter().map(|w| (w.quoted, w.line)).collect();
        assert_eq!(meta, [(false, 18), (true, 18), (true, 19)]);
    }
}
