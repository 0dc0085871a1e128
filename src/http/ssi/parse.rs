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
    /// Bytes of the page that are no command, held from an earlier piece
    /// (a `<!--` that turned out to be none, an unfinished command at the
    /// end).
    Text(Vec<u8>),
    /// Bytes of the page that are no command: `start..end` of the piece
    /// being fed. Most of a page is text, and a span of the piece costs no
    /// copy until the text goes out.
    Span(usize, usize),
    Command(Command),
    /// A command that could not be parsed: nginx's message for the error
    /// log; the page gets the `errmsg` in its place.
    Error(String),
}

impl Event {
    /// The event with a span of `input` made text of its own (for an
    /// event kept past its piece: a block's, a test's).
    pub fn owned(self, input: &[u8]) -> Event {
        match self {
            Event::Span(a, b) => Event::Text(input[a..b].to_vec()),
            e => e,
        }
    }
}

/// A command: its name, and its parameters (name, value) in the order
/// written, values as written (backslashes kept: they are read when the
/// value is evaluated).
#[derive(Debug, PartialEq, Eq, Clone, Default)]
pub struct Command {
    /// The name, then each parameter's name and value, back to back: a
    /// command costs two allocations however many parameters it has.
    bytes: Vec<u8>,
    name_len: usize,
    /// Per parameter, where its name ends and where its value ends in
    /// `bytes` (it begins where the one before ends).
    ends: Vec<(u32, u32)>,
}

impl Command {
    /// A command as the parser would make it (for tests).
    pub fn new(name: &[u8], params: &[(&[u8], &[u8])]) -> Command {
        let mut c = Command { bytes: name.to_vec(), name_len: name.len(), ends: Vec::new() };
        for (n, v) in params {
            c.bytes.extend_from_slice(n);
            let name_end = c.bytes.len() as u32;
            c.bytes.extend_from_slice(v);
            c.ends.push((name_end, c.bytes.len() as u32));
        }
        c
    }

    /// Gives the command's room back for the next one (`ssi::bufs`).
    pub fn recycle(self) {
        super::bufs::give(self.bytes);
        super::bufs::give_pairs(self.ends);
    }

    pub fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }

    /// The parameters (name, value), in the order written.
    pub fn params(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let mut from = self.name_len;
        self.ends.iter().map(move |&(n, v)| {
            let (n, v) = (n as usize, v as usize);
            let p = (&self.bytes[from..n], &self.bytes[n..v]);
            from = v;
            p
        })
    }

    pub fn param_count(&self) -> usize {
        self.ends.len()
    }

    pub fn param(&self, name: &str) -> Option<&[u8]> {
        self.params().find(|(n, _)| *n == name.as_bytes()).map(|(_, v)| v)
    }

    /// The parameter being parsed (looked at per byte: not a walk over
    /// the ones before).
    fn last(&self) -> Option<(&[u8], &[u8])> {
        let &(n, v) = self.ends.last()?;
        let from = match self.ends.len() {
            1 => self.name_len,
            k => self.ends[k - 2].1 as usize,
        };
        Some((&self.bytes[from..n as usize], &self.bytes[n as usize..v as usize]))
    }

    fn last_name_len(&self) -> usize {
        self.last().map_or(0, |(n, _)| n.len())
    }

    fn last_value_len(&self) -> usize {
        self.last().map_or(0, |(_, v)| v.len())
    }

    fn name_bytes(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
        self.name_len += b.len();
    }

    fn begin_param(&mut self, ch: u8) {
        if self.ends.is_empty() {
            self.ends.reserve(4);
        }
        self.bytes.push(ch);
        let end = self.bytes.len() as u32;
        self.ends.push((end, end));
    }

    fn param_bytes(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
        let end = self.bytes.len() as u32;
        if let Some(last) = self.ends.last_mut() {
            *last = (end, end);
        }
    }

    fn value_bytes(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
        let end = self.bytes.len() as u32;
        if let Some(last) = self.ends.last_mut() {
            last.1 = end;
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Text,
    /// `matched` bytes of `<!--#` seen at the end of the last piece.
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

const OPEN: &[u8] = b"<!--#";

pub struct Parser {
    state: State,
    value_len: usize,
    cmd: Command,
    /// The bytes of earlier pieces of a possible or unfinished command:
    /// text if the page ends (or the `<!--#` breaks off) before it does.
    held: Vec<u8>,
    /// The error of the command being skipped.
    error: Option<String>,
}

impl Parser {
    pub fn new(value_len: usize) -> Parser {
        Parser { state: State::Text, value_len, cmd: Command::default(), held: Vec::new(), error: None }
    }

    /// Parses the next piece of the body; what it completes goes to `out`
    /// (text as spans of `input`).
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<Event>) {
        let mut i = 0;
        // Where the command being parsed began in this piece (its bytes
        // of earlier pieces are in `held`).
        let mut cmd_from = 0;
        while i < input.len() {
            match self.state {
                State::Text => {
                    // Text runs to the next `<!--#`; a tail that may begin
                    // one waits for the next piece.
                    let rest = &input[i..];
                    match find_open(rest) {
                        Some(at) => {
                            push_span(out, i, i + at);
                            cmd_from = i + at;
                            i += at + OPEN.len();
                            self.open();
                        }
                        None => {
                            let keep = partial_open(rest);
                            push_span(out, i, input.len() - keep);
                            if keep > 0 {
                                self.held.clear();
                                self.held.extend_from_slice(&rest[rest.len() - keep..]);
                                self.state = State::Start(keep);
                            }
                            return;
                        }
                    }
                }
                State::Start(n) => {
                    if input[i] == OPEN[n] {
                        self.held.push(input[i]);
                        i += 1;
                        if n + 1 == OPEN.len() {
                            let held = std::mem::take(&mut self.held);
                            self.open();
                            self.held = held;
                            cmd_from = i;
                        } else {
                            self.state = State::Start(n + 1);
                        }
                    } else {
                        // No command: what was held is text, and the page
                        // goes on as text from this byte.
                        push_text(out, &self.held);
                        self.held.clear();
                        self.state = State::Text;
                    }
                }
                State::Command | State::Param => {
                    // A name's bytes up to what ends it go in at once, as
                    // far as its limit allows (the byte past the limit
                    // goes through `step`, which reports it).
                    let rest = &input[i..];
                    let param = self.state == State::Param;
                    let room = if param {
                        PARAM_LEN.saturating_sub(self.cmd.last_name_len())
                    } else {
                        COMMAND_LEN.saturating_sub(self.cmd.name_len)
                    };
                    let run = rest
                        .iter()
                        .position(|&b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'-') || (param && b == b'='))
                        .unwrap_or(rest.len())
                        .min(room);
                    if run > 0 {
                        if param {
                            self.cmd.param_bytes(&rest[..run]);
                        } else {
                            self.cmd.name_bytes(&rest[..run]);
                        }
                        i += run;
                    } else {
                        i += 1;
                        self.step(rest[0], out);
                    }
                }
                State::Value(q) => {
                    // A value's bytes up to its quote or a backslash go in
                    // at once, as far as its limit allows.
                    let rest = &input[i..];
                    let run = memchr::memchr2(q, b'\\', rest).unwrap_or(rest.len()).min(self.value_room());
                    if run > 0 {
                        self.cmd.value_bytes(&rest[..run]);
                        i += run;
                    } else {
                        i += 1;
                        self.step(rest[0], out);
                    }
                }
                _ => {
                    let ch = input[i];
                    i += 1;
                    self.step(ch, out);
                }
            }
        }
        if self.in_command() {
            self.held.extend_from_slice(&input[cmd_from.min(input.len())..]);
        }
    }

    /// A `<!--#` begins a command.
    fn open(&mut self) {
        self.held.clear();
        // The room of an earlier page's commands (`Command::recycle`).
        self.cmd = Command { bytes: super::bufs::bytes(64), name_len: 0, ends: super::bufs::pairs(4) };
        self.state = State::PreCommand;
    }

    fn in_command(&self) -> bool {
        !matches!(self.state, State::Text | State::Start(_) | State::Skip(_))
    }

    /// The end of the body: a command left open goes out as text, as it
    /// was written (an error being skipped goes as its error).
    pub fn finish(&mut self, out: &mut Vec<Event>) {
        if let Some(e) = self.error.take() {
            out.push(Event::Error(e));
        } else if !self.held.is_empty() {
            push_text(out, &self.held);
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
        String::from_utf8_lossy(self.cmd.name()).into_owned()
    }

    /// One byte of a command (or of one being skipped).
    fn step(&mut self, ch: u8, out: &mut Vec<Event>) {
        let ws = matches!(ch, b' ' | b'\t' | b'\r' | b'\n');
        match self.state {
            State::Text | State::Start(_) => {}
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
                } else if self.cmd.param_count() == MAX_PARAMS {
                    let msg = format!("too many SSI command parameters: \"{}\"", self.name());
                    self.fail(msg);
                } else {
                    self.cmd.begin_param(ch);
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
                } else {
                    if self.cmd.last_name_len() == PARAM_LEN {
                        let msg = format!(
                            "too long \"{}{}...\" parameter in \"{}\" SSI command",
                            self.param_name(),
                            char::from(ch),
                            self.name()
                        );
                        self.fail(msg);
                    } else {
                        self.cmd.param_bytes(&[ch]);
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
                        self.cmd.last().map(|p| String::from_utf8_lossy(p.1).into_owned()).unwrap_or_default(),
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
                    if self.cmd.name_len == 0 {
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
        self.cmd.last().map(|p| String::from_utf8_lossy(p.0).into_owned()).unwrap_or_default()
    }

    fn command_byte(&mut self, ch: u8) {
        if self.cmd.name_len == COMMAND_LEN {
            let msg = format!("the \"{}{}...\" SSI command is too long", self.name(), char::from(ch));
            self.fail(msg);
        } else {
            self.cmd.name_bytes(&[ch]);
        }
    }

    /// How many more bytes the value being parsed may have.
    fn value_room(&self) -> usize {
        self.value_len.saturating_sub(self.cmd.last_value_len())
    }

    fn value_byte(&mut self, ch: u8) {
        if self.value_room() > 0 {
            self.cmd.value_bytes(&[ch]);
            return;
        }
        let Some((n, v)) = self.cmd.last() else { return };
        let msg = format!(
            "too long \"{}{}...\" value of \"{}\" parameter in \"{}\" SSI command",
            String::from_utf8_lossy(v),
            char::from(ch),
            String::from_utf8_lossy(n),
            self.name()
        );
        self.fail(msg);
    }
}

/// Appends held text, joining it to held text just before.
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

/// Appends a span of the piece, joining it to the span just before.
fn push_span(out: &mut Vec<Event>, start: usize, end: usize) {
    if start == end {
        return;
    }
    if let Some(Event::Span(_, e)) = out.last_mut()
        && *e == start
    {
        *e = end;
    } else {
        out.push(Event::Span(start, end));
    }
}

/// Whether `page` holds no command and does not end in what could begin
/// one: the SSI module passes such a page through unchanged, so an
/// included page of that kind needs no SSI stage (`ssi::apply`).
pub fn plain(page: &[u8]) -> bool {
    find_open(page).is_none() && partial_open(page) == 0
}

/// Where `<!--#` begins in `b`: each `#` checked for the `<!--` before
/// it (HTML has far fewer `#` than `<`; a searcher built per page costs
/// more than it saves). The first `#` so preceded is the first `<!--#`.
fn find_open(b: &[u8]) -> Option<usize> {
    let mut from = OPEN.len() - 1;
    while let Some(at) = memchr::memchr(b'#', b.get(from..)?) {
        let at = from + at;
        if &b[at + 1 - OPEN.len()..at] == b"<!--" {
            return Some(at + 1 - OPEN.len());
        }
        from = at + 1;
    }
    None
}

/// How many bytes at the end of `b` are the beginning of `<!--#` (at
/// most 4).
fn partial_open(b: &[u8]) -> usize {
    // Most pieces end in none of `<!-`.
    if !matches!(b.last(), Some(b'<' | b'!' | b'-')) {
        return 0;
    }
    (1..OPEN.len()).rev().find(|&k| b.ends_with(&OPEN[..k])).unwrap_or(0)
}

/// All of `body` through a parser, `piece` bytes at a time, with the
/// adjacent texts joined (for tests and the fuzz target).
pub fn parse_all(body: &[u8], piece: usize, value_len: usize) -> Vec<Event> {
    let mut p = Parser::new(value_len);
    let mut out = Vec::new();
    for chunk in body.chunks(piece.max(1)) {
        let mut events = Vec::new();
        p.feed(chunk, &mut events);
        out.extend(events.into_iter().map(|e| e.owned(chunk)));
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
        let params: Vec<(&[u8], &[u8])> = params.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())).collect();
        Event::Command(Command::new(name.as_bytes(), &params))
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
