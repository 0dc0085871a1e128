//! Tokenizer for nginx-syntax configuration text.
//!
//! This is a deliberate transcription of nginx's `ngx_conf_read_token`, state
//! flag for state flag, because configs written for nginx rely on its quirks:
//! `}` does not end an unquoted word (`foo}` is one word), `)` may directly
//! follow a closing quote so that `if ($a = "b")` works, `${var}` does not
//! open a block, and `#` only starts a comment where a word could start.
//! Reproducing the rules rather than "cleaning them up" is what keeps sluice
//! accepting and rejecting exactly the configs nginx does, with the same
//! messages and line numbers.

/// One argument of a directive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    /// The value after backslash-escape processing; quotes are not included.
    pub text: String,
    /// Kept because some directives treat a quoted value differently from a
    /// bare one (for instance an empty `""` is only expressible quoted).
    pub quoted: bool,
    /// The line where the word starts, for diagnostics about one argument.
    pub line: u32,
}

/// What terminated a statement read by [`Lexer::read_statement`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `;`: a simple directive.
    Semicolon,
    /// `{`: the directive opens a block.
    BlockStart,
    /// `}` with no words before it.
    BlockEnd,
    /// End of input with no words pending.
    Eof,
}

/// The words of one directive and the token that ended them.
///
/// Reading whole statements rather than single tokens mirrors nginx, whose
/// error rules (such as `unexpected "}"` after words) depend on whether words
/// are pending when a delimiter is seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    pub words: Vec<Word>,
    pub end: End,
    /// The line of the terminating token, which is where nginx reports
    /// anything wrong with the directive.
    pub line: u32,
}

/// A syntax error; the parser attaches the file name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError {
    pub msg: String,
    pub line: u32,
}

/// Streams statements out of one file's text.
#[derive(Debug)]
pub struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    line: u32,
}

fn is_space(ch: u8) -> bool {
    matches!(ch, b' ' | b'\t' | b'\r' | b'\n')
}

impl<'a> Lexer<'a> {
    pub fn new(src: &'a str) -> Self {
        Lexer { src, pos: 0, line: 1 }
    }

    fn error(&self, msg: String) -> LexError {
        LexError { msg, line: self.line }
    }

    /// Reports the whole character at `at`, not just one byte of it, so the
    /// message stays valid UTF-8 even for non-ASCII input.
    fn unexpected_at(&self, at: usize) -> LexError {
        let ch = self.src.get(at..).and_then(|s| s.chars().next()).unwrap_or('?');
        self.error(format!("unexpected \"{ch}\""))
    }

    /// Reads the next directive's words up to and including its terminator.
    pub fn read_statement(&mut self) -> Result<Statement, LexError> {
        let bytes = self.src.as_bytes();
        let mut words = Vec::new();
        let mut need_space = false;
        let mut last_space = true;
        let mut sharp_comment = false;
        let mut variable = false;
        let mut escaped = false;
        let mut quote: Option<u8> = None;
        let mut word_quoted = false;
        let mut start = self.pos;
        let mut start_line = self.line;

        let done = |words, end, line| Ok(Statement { words, end, line });

        loop {
            let Some(&ch) = bytes.get(self.pos) else {
                if !words.is_empty() || !last_space {
                    return Err(self.error("unexpected end of file, expecting \";\" or \"}\"".to_string()));
                }
                return done(words, End::Eof, self.line);
            };
            self.pos += 1;

            if ch == b'\n' {
                self.line += 1;
                sharp_comment = false;
            }
            if sharp_comment {
                continue;
            }
            if escaped {
                escaped = false;
                continue;
            }

            if need_space {
                match ch {
                    _ if is_space(ch) => {
                        last_space = true;
                        need_space = false;
                        continue;
                    }
                    b';' => return done(words, End::Semicolon, self.line),
                    b'{' => return done(words, End::BlockStart, self.line),
                    // nginx lets `)` follow a quote and then starts a new
                    // word with it, below.
                    b')' => {
                        last_space = true;
                        need_space = false;
                    }
                    _ => return Err(self.unexpected_at(self.pos - 1)),
                }
            }

            if last_space {
                start = self.pos - 1;
                start_line = self.line;
                word_quoted = false;
                match ch {
                    _ if is_space(ch) => continue,
                    b';' | b'{' => {
                        if words.is_empty() {
                            return Err(self.unexpected_at(self.pos - 1));
                        }
                        let end = if ch == b'{' { End::BlockStart } else { End::Semicolon };
                        return done(words, end, self.line);
                    }
                    b'}' => {
                        if !words.is_empty() {
                            return Err(self.unexpected_at(self.pos - 1));
                        }
                        return done(words, End::BlockEnd, self.line);
                    }
                    b'#' => sharp_comment = true,
                    b'\\' => {
                        escaped = true;
                        last_space = false;
                    }
                    b'"' | b'\'' => {
                        start += 1;
                        quote = Some(ch);
                        word_quoted = true;
                        last_space = false;
                    }
                    b'$' => {
                        variable = true;
                        last_space = false;
                    }
                    _ => last_space = false,
                }
                continue;
            }

            if ch == b'{' && variable {
                continue;
            }
            variable = false;
            if ch == b'\\' {
                escaped = true;
                continue;
            }
            if ch == b'$' {
                variable = true;
                continue;
            }

            let found = match quote {
                Some(q) => {
                    if ch == q {
                        quote = None;
                        need_space = true;
                    }
                    ch == q
                }
                None => {
                    let ends = is_space(ch) || ch == b';' || ch == b'{';
                    last_space = ends;
                    ends
                }
            };
            if found {
                let raw = bytes.get(start..self.pos - 1).unwrap_or_default();
                words.push(Word { text: unescape(raw), quoted: word_quoted, line: start_line });
                match ch {
                    b';' => return done(words, End::Semicolon, self.line),
                    b'{' => return done(words, End::BlockStart, self.line),
                    _ => {}
                }
            }
        }
    }
}

/// Applies nginx's escape rules; unknown escapes are kept verbatim so that
/// regexes such as `\d` or `\.` pass through untouched.
fn unescape(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        if b == b'\\' {
            match raw.get(i + 1) {
                Some(b'"' | b'\'' | b'\\') => i += 1,
                Some(&c @ (b't' | b'r' | b'n')) => {
                    out.push(match c {
                        b't' => b'\t',
                        b'r' => b'\r',
                        _ => b'\n',
                    });
                    i += 2;
                    continue;
                }
                _ => {}
            }
        }
        if let Some(&c) = raw.get(i) {
            out.push(c);
        }
        i += 1;
    }
    // Only ASCII bytes are removed or replaced, so the input's UTF-8 validity
    // is preserved; the lossy path is a formality.
    match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(src: &str) -> Result<Vec<Statement>, LexError> {
        let mut lx = Lexer::new(src);
        let mut out = Vec::new();
        loop {
            let st = lx.read_statement()?;
            let eof = st.end == End::Eof;
            out.push(st);
            if eof {
                return Ok(out);
            }
        }
    }

    fn texts(src: &str) -> Vec<Vec<String>> {
        all(src).unwrap().into_iter().map(|s| s.words.into_iter().map(|w| w.text).collect()).collect()
    }

    fn one(src: &str) -> Vec<String> {
        let mut lx = Lexer::new(src);
        let st = lx.read_statement().unwrap();
        st.words.into_iter().map(|w| w.text).collect()
    }

    fn err(src: &str) -> (String, u32) {
        let e = all(src).unwrap_err();
        (e.msg, e.line)
    }

    #[test]
    fn words_and_terminators() {
        let sts = all("a b;c{}\n").unwrap();
        let ends: Vec<End> = sts.iter().map(|s| s.end).collect();
        assert_eq!(ends, [End::Semicolon, End::BlockStart, End::BlockEnd, End::Eof]);
        assert_eq!(texts("a b;c{}"), [vec!["a", "b"], vec!["c"], vec![], vec![]]);
        assert_eq!(one("  a\t\tb\r\n c ;"), ["a", "b", "c"]);
    }

    #[test]
    fn close_brace_inside_unquoted_word() {
        // nginx only ends unquoted words at whitespace, `;` and `{`.
        assert_eq!(one("set $a foo}bar;"), ["set", "$a", "foo}bar"]);
    }

    #[test]
    fn quotes() {
        let mut lx = Lexer::new("x \"a b\" 'c;d{}' \"\" e;");
        let st = lx.read_statement().unwrap();
        let got: Vec<(&str, bool)> = st.words.iter().map(|w| (w.text.as_str(), w.quoted)).collect();
        assert_eq!(got, [("x", false), ("a b", true), ("c;d{}", true), ("", true), ("e", false)]);
        assert_eq!(one("a \"b\";"), ["a", "b"]);
        assert_eq!(one("a 'b'{"), ["a", "b"]);
        assert_eq!(one("a \"it's\" 'say \"hi\"';"), ["a", "it's", "say \"hi\""]);
        // A quote inside an unquoted word is an ordinary character.
        assert_eq!(one("a b\"c'd;"), ["a", "b\"c'd"]);
    }

    #[test]
    fn paren_after_quote_starts_new_word() {
        assert_eq!(one("if ($request_method = \"POST\") {"), ["if", "($request_method", "=", "POST", ")"]);
    }

    #[test]
    fn escapes() {
        assert_eq!(one(r#"a "q\"q";"#), ["a", "q\"q"]);
        assert_eq!(one(r"a 's\'s';"), ["a", "s's"]);
        assert_eq!(one(r"a b\\c;"), ["a", "b\\c"]);
        assert_eq!(one(r"a \t\r\n;"), ["a", "\t\r\n"]);
        assert_eq!(one(r#"a "x\ty\rz\n";"#), ["a", "x\ty\rz\n"]);
        assert_eq!(one(r"a ^/\d+\.html$;"), ["a", r"^/\d+\.html$"]);
        assert_eq!(one(r"a \x\\\q;"), ["a", r"\x\\q"]);
        // Backslash protects delimiters during scanning.
        assert_eq!(one(r"a b\ c\;d\{e\#f;"), ["a", r"b\ c\;d\{e\#f"]);
        assert_eq!(one(r"a \#b;"), ["a", r"\#b"]);
        assert_eq!(one(r#"a "b\"c";"#), ["a", "b\"c"]);
    }

    #[test]
    fn comments() {
        assert_eq!(texts("# head\na b; # tail\n"), [vec!["a", "b"], vec![]]);
        assert_eq!(one("a foo#bar;"), ["a", "foo#bar"]);
        assert_eq!(one("a foo #bar;\n b;"), ["a", "foo", "b"]);
        assert_eq!(one("a\n#x;y{\nb;"), ["a", "b"]);
        assert_eq!(one("a \"#x\";"), ["a", "#x"]);
        assert_eq!(texts("# only a comment"), [Vec::<String>::new()]);
    }

    #[test]
    fn variables() {
        assert_eq!(one("a ${host}x;"), ["a", "${host}x"]);
        assert_eq!(one("a x${host}y$uri;"), ["a", "x${host}y$uri"]);
        assert_eq!(one("a \"${a}-${b}\";"), ["a", "${a}-${b}"]);
        let sts = all("a $x {").unwrap();
        assert_eq!(sts[0].end, End::BlockStart);
        assert_eq!(one("a $x{"), ["a", "$x"]);
    }

    #[test]
    fn lines() {
        let sts = all("a\nb\n\n;\nc {\n}\n").unwrap();
        assert_eq!(sts[0].line, 4);
        assert_eq!(sts[0].words[0].line, 1);
        assert_eq!(sts[0].words[1].line, 2);
        assert_eq!(sts[1].line, 5);
        assert_eq!((sts[2].end, sts[2].line), (End::BlockEnd, 6));
        assert_eq!((sts[3].end, sts[3].line), (End::Eof, 7));
        let sts = all("a \"x\ny\";").unwrap();
        assert_eq!((sts[0].words[1].text.as_str(), sts[0].line), ("x\ny", 2));
    }

    #[test]
    fn errors() {
        assert_eq!(err("a;\n;"), ("unexpected \";\"".into(), 2));
        assert_eq!(err("\n\n{"), ("unexpected \"{\"".into(), 3));
        assert_eq!(err("a b\n}"), ("unexpected \"}\"".into(), 2));
        assert_eq!(err("a \"b\"c;"), ("unexpected \"c\"".into(), 1));
        assert_eq!(err("a \"b\"\"c\";"), ("unexpected \"\"\"".into(), 1));
        assert_eq!(err("a 'b'}"), ("unexpected \"}\"".into(), 1));
        assert_eq!(err("a 'b'#"), ("unexpected \"#\"".into(), 1));
        assert_eq!(err("a \"b\"é;"), ("unexpected \"é\"".into(), 1));
        let eof = "unexpected end of file, expecting \";\" or \"}\"".to_string();
        assert_eq!(err("a b\n"), (eof.clone(), 2));
        assert_eq!(err("a"), (eof.clone(), 1));
        assert_eq!(err("a \"b;\n"), (eof.clone(), 2));
        assert_eq!(err("a \"b\""), (eof.clone(), 1));
        assert_eq!(err("a\\"), (eof, 1));
    }

    #[test]
    fn non_ascii_passes_through() {
        assert_eq!(one("a héllo \"wörld\" \\é;"), ["a", "héllo", "wörld", "\\é"]);
    }
}
