//! The SSI command parser: finds `<!--#command param="value" ... -->` in
//! a body fed a piece at a time, as nginx's `ngx_http_ssi_parse` does,
//! with its limits (a command name of 32 bytes, parameter names of 32,
//! 16 parameters, values of `ssi_value_length`) and its error messages.
//! The bytes are the page's (a file, an origin's answer): anything may
//! come, so every path ends in text, a command, or an error, and memory
//! is bounded by those limits whatever the input.

/// nginx's NGX_HTTP_SSI_COMMAND_LEN, NGX_HTTP_SSI_PARAM_LEN and
/// NGX_HTTP_SSI_MAX_PARAMS.
const COMMAND_LEN: usize = 32;
const PARAM_LEN: usize = 32;
const MAX_PARAMS: usize = 16;

/// What the parser found.
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum Event {
    /// Bytes of the page that are no command.
    Text(Vec<u8>),
    Command(Command),
    /// A command that could not be parsed: nginx's message for the error
    /// log; the page gets the `errmsg` in its place.
    Error(String),
}

#[derive(Debug, PartialEq, Eq, Clone, Default)]
pub struct Command {
    pub name: Vec<u8>,
    /// (name, value) in the order written; values as written, backslashes
    /// kept (they are read when the value is evaluated).
    pub params: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Command {
    pub fn param(&self, name: &str) -> Option<&[u8]> {
        self.params.iter().find(|(n, _)| n == name.as_bytes()).map(|(_, v)| v.as_slice())
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Text,
    /// `matched` bytes of `<!--#` seen.
    Start(usize),
    PreCommand,
    Command,
    PreParam,
    Param,
    PreEqual,
    PreValue,
    Value(u8),
    /// After a backslash in a value quoted with the byte.
    Quoted(u8),
    PostParam,
    /// `-` seen where `-->` may begin.
    End0,
    /// `--` seen.
    End1,
    /// An error: skipping to `-->`; the byte counts the `-` seen.
    Skip(u8),
}

pub struct Parser {
    state: State,
    value_len: usize,
    cmd: Command,
    /// The bytes of a possible `<!--#` not yet known to be one.
    held: Vec<u8>,
    /// The error of the command being skipped.
    error: Option<String>,
}

impl Parser {
    pub fn new(value_len: usize) -> Parser {
        Parser { state: State::Text, value_len, cmd: Command::default(), held: Vec::new(), error: None }
    }

    /// Parses the next piece of the body; what it completes goes to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<Event>) {
        let mut text_from = 0;
        let mut i = 0;
        while i < input.len() {
            let ch = input[i];
            if self.state == State::Text {
                // Fast path: to the next `<`.
                match memchr::memchr(b'<', &input[i..]) {
                    Some(at) => {
                        i += at + 1;
                        self.state = State::Start(1);
                        push_text(out, &input[text_from..i - 1]);
                        text_from = i;
                        self.held.clear();
                        self.held.push(b'<');
                        continue;
                    }
                    None => {
                        push_text(out, &input[text_from..]);
                        return;
                    }
                }
            }
            i += 1;
            text_from = i;
            self.step(ch, out);
            if self.state == State::Text {
                text_from = i;
            }
        }
        if self.state == State::Text {
            push_text(out, &input[text_from.min(input.len())..]);
        }
    }

    /// The end of the body: a command left open goes out as text, as it
    /// was written (an error being skipped goes as its error).
    pub fn finish(&mut self, out: &mut Vec<Event>) {
        if let Some(e) = self.error.take() {
            out.push(Event::Error(e));
        } else if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            push_text(out, &held);
        }
        self.held.clear();
        self.state = State::Text;
    }

    fn fail(&mut self, msg: String) {
        self.error = Some(msg);
        self.held.clear();
        self.state = State::Skip(0);
    }

    fn name(&self) -> String {
        String::from_utf8_lossy(&self.cmd.name).into_owned()
    }

    fn step(&mut self, ch: u8, out: &mut Vec<Event>) {
        if !matches!(self.state, State::Skip(_)) {
            self.held.push(ch);
        }
        let ws = matches!(ch, b' ' | b'\t' | b'\r' | b'\n');
        match self.state {
            State::Text => {}
            State::Start(n) => {
                if ch == b"<!--#"[n] {
                    if n == 4 {
                        self.state = State::PreCommand;
                        self.cmd = Command::default();
                    } else {
                        self.state = State::Start(n + 1);
                    }
                } else {
                    // Not a command: what was held is text; a `<` may
                    // begin one again.
                    let held = std::mem::take(&mut self.held);
                    let (text, last) = held.split_at(held.len() - 1);
                    push_text(out, text);
                    if last == b"<" {
                        self.held.push(b'<');
                        self.state = State::Start(1);
                    } else {
                        push_text(out, last);
                        self.state = State::Text;
                    }
                }
            }
            State::PreCommand => {
                if !ws {
                    self.state = State::Command;
                    self.command_byte(ch);
                }
            }
            State::Command => {
                if ws {
                    self.state = State::PreParam;
                } else if ch == b'-' {
                    self.state = State::End0;
                } else {
                    self.command_byte(ch);
                }
            }
            State::PreParam => {
                if ws {
                } else if ch == b'-' {
                    self.state = State::End0;
                } else if self.cmd.params.len() == MAX_PARAMS {
                    let msg = format!("too many SSI command parameters: \"{}\"", self.name());
                    self.fail(msg);
                } else {
                    self.cmd.params.push((vec![ch], Vec::new()));
                    self.state = State::Param;
                }
            }
            State::Param => {
                if ws {
                    self.state = State::PreEqual;
                } else if ch == b'=' {
                    self.state = State::PreValue;
                } else if ch == b'-' {
                    let msg = format!(
                        "unexpected \"-\" symbol after \"{}\" parameter in \"{}\" SSI command",
                        self.param_name(),
                        self.name()
                    );
                    self.fail(msg);
                } else if let Some(p) = self.cmd.params.last_mut() {
                    if p.0.len() == PARAM_LEN {
                        let msg = format!(
                            "too long \"{}{}...\" parameter in \"{}\" SSI command",
                            self.param_name(),
                            char::from(ch),
                            self.name()
                        );
                        self.fail(msg);
                    } else {
                        p.0.push(ch);
                    }
                }
            }
            State::PreEqual => {
                if ws {
                } else if ch == b'=' {
                    self.state = State::PreValue;
                } else {
                    let msg = format!(
                        "unexpected \"{}\" symbol after \"{}\" parameter in \"{}\" SSI command",
                        char::from(ch),
                        self.param_name(),
                        self.name()
                    );
                    self.fail(msg);
                }
            }
            State::PreValue => {
                if ws {
                } else if ch == b'"' || ch == b'\'' {
                    self.state = State::Value(ch);
                } else {
                    let msg = format!(
                        "unexpected \"{}\" symbol before value of \"{}\" parameter in \"{}\" SSI command",
                        char::from(ch),
                        self.param_name(),
                        self.name()
                    );
                    self.fail(msg);
                }
            }
            State::Value(q) => {
                if ch == q {
                    self.state = State::PostParam;
                } else {
                    if ch == b'\\' {
                        self.state = State::Quoted(q);
                    }
                    self.value_byte(ch);
                }
            }
            State::Quoted(q) => {
                self.state = State::Value(q);
                self.value_byte(ch);
            }
            State::PostParam => {
                if ws {
                    self.state = State::PreParam;
                } else if ch == b'-' {
                    self.state = State::End0;
                } else {
                    let msg = format!(
                        "unexpected \"{}\" symbol after \"{}\" value of \"{}\" parameter in \"{}\" SSI command",
                        char::from(ch),
                        self.cmd.params.last().map(|p| String::from_utf8_lossy(&p.1).into_owned()).unwrap_or_default(),
                        self.param_name(),
                        self.name()
                    );
                    self.fail(msg);
                }
            }
            State::End0 => {
                if ch == b'-' {
                    self.state = State::End1;
                } else {
                    let msg = format!("unexpected \"{}\" symbol in \"{}\" SSI command", char::from(ch), self.name());
                    self.fail(msg);
                }
            }
            State::End1 => {
                if ch == b'>' {
                    if self.cmd.name.is_empty() {
                        out.push(Event::Error("invalid SSI command: \"\"".into()));
                    } else {
                        out.push(Event::Command(std::mem::take(&mut self.cmd)));
                    }
                    self.held.clear();
                    self.state = State::Text;
                } else {
                    let msg = format!("unexpected \"{}\" symbol in \"{}\" SSI command", char::from(ch), self.name());
                    self.fail(msg);
                }
            }
            State::Skip(dashes) => {
                self.state = match (ch, dashes) {
                    (b'-', d) => State::Skip((d + 1).min(2)),
                    (b'>', 2) => {
                        out.push(Event::Error(self.error.take().unwrap_or_default()));
                        State::Text
                    }
                    _ => State::Skip(0),
                };
            }
        }
    }

    fn param_name(&self) -> String {
        self.cmd.params.last().map(|p| String::from_utf8_lossy(&p.0).into_owned()).unwrap_or_default()
    }

    fn command_byte(&mut self, ch: u8) {
        if self.cmd.name.len() == COMMAND_LEN {
            let msg = format!("the \"{}{}...\" SSI command is too long", self.name(), char::from(ch));
            self.fail(msg);
        } else {
            self.cmd.name.push(ch);
        }
    }

    fn value_byte(&mut self, ch: u8) {
        let limit = self.value_len;
        let Some(p) = self.cmd.params.last_mut() else { return };
        if p.1.len() < limit {
            p.1.push(ch);
            return;
        }
        let msg = format!(
            "too long \"{}{}...\" value of \"{}\" parameter in \"{}\" SSI command",
            String::from_utf8_lossy(&p.1),
            char::from(ch),
            String::from_utf8_lossy(&p.0),
            String::from_utf8_lossy(&self.cmd.name)
        );
        self.fail(msg);
    }
}

/// Appends text, joining it to text just before.
fn push_text(out: &mut Vec<Event>, b: &[u8]) {
    if b.is_empty() {
        return;
    }
    if let Some(Event::Text(t)) = out.last_mut() {
        t.extend_from_slice(b);
    } else {
        out.push(Event::Text(b.to_vec()));
    }
}

/// All of `body` through a parser, `piece` bytes at a time, with the
/// adjacent texts joined (for tests and the fuzz target).
pub fn parse_all(body: &[u8], piece: usize, value_len: usize) -> Vec<Event> {
    let mut p = Parser::new(value_len);
    let mut out = Vec::new();
    for chunk in body.chunks(piece.max(1)) {
        p.feed(chunk, &mut out);
    }
    p.finish(&mut out);
    let mut joined: Vec<Event> = Vec::new();
    for e in out {
        match e {
            Event::Text(t) => push_text(&mut joined, &t),
            e => joined.push(e),
        }
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(name: &str, params: &[(&str, &str)]) -> Event {
        Event::Command(Command {
            name: name.as_bytes().to_vec(),
            params: params.iter().map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec())).collect(),
        })
    }

    fn text(s: &str) -> Event {
        Event::Text(s.as_bytes().to_vec())
    }

    #[test]
    fn commands_in_text_however_split() {
        let body = b"X<!--#echo var=\"a\" -->Y<!-- c --><<!--#set var='v' value=\"a\\\"b\"-->Z<!--#endif-->";
        for piece in 1..body.len() + 1 {
            assert_eq!(
                parse_all(body, piece, 256),
                vec![
                    text("X"),
                    cmd("echo", &[("var", "a")]),
                    text("Y<!-- c --><"),
                    cmd("set", &[("var", "v"), ("value", "a\\\"b")]),
                    text("Z"),
                    cmd("endif", &[]),
                ],
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn errors_skip_to_the_end_of_the_command() {
        let e = parse_all(b"a<!--#echo var=x -->b", 3, 256);
        assert_eq!(e[0], text("a"));
        assert_eq!(
            e[1],
            Event::Error("unexpected \"x\" symbol before value of \"var\" parameter in \"echo\" SSI command".into())
        );
        assert_eq!(e[2], text("b"));
        let long = format!("<!--#{} -->", "c".repeat(40));
        assert!(matches!(&parse_all(long.as_bytes(), 5, 256)[0], Event::Error(m) if m.contains("is too long")));
        let e = parse_all(b"<!--#set var=\"12345\" -->", 100, 4);
        assert!(matches!(&e[0], Event::Error(m) if m.starts_with("too long \"1234")));
    }

    #[test]
    fn an_unfinished_command_at_the_end_is_text() {
        assert_eq!(parse_all(b"a<!--#echo var=\"x\"", 2, 256), vec![text("a<!--#echo var=\"x\"")]);
        assert_eq!(parse_all(b"a<!-", 2, 256), vec![text("a<!-")]);
    }
}
