//! The SSI stage of a streaming body: the page's pieces go through the
//! parser, text goes out (or into a block being defined, or nowhere in a
//! false `if` branch) and commands run, as nginx's
//! `ngx_http_ssi_body_filter` runs them. A command that fails is logged
//! and replaced by `errmsg` (nothing with `ssi_silent_errors on`).
//!
//! The subrequests of the `include`s in a piece of the page run at the
//! same time, as nginx starts each as the parser meets it; their answers
//! take their places in the output in page order. An include with
//! `wait="yes"` or `set=` first lets those before it finish, and is itself
//! run to its end before the page goes on (an include's `set` is seen by
//! everything after it).

use std::rc::Rc;
use std::sync::Arc;

use super::bufs;
use super::expr::{Scope, condition, escape_entity, escape_url};
use super::parse::{Command, Event, Parser};
use crate::http::handler::ctx::ReqCtx;
use crate::http::handler::subrequest;
use crate::log::error::Level;
use crate::log_req;
use crate::worker::WorkerCtx;

/// The `if` state (nginx allows no `if` inside another).
#[derive(Default, Clone, Copy)]
struct Cond {
    open: bool,
    /// A branch was taken: later `elif`/`else` branches are not.
    chosen: bool,
}

pub struct Ssi {
    parser: Parser,
    events: Vec<Event>,
    /// nginx's defaults until a `config` command sets them.
    errmsg: std::borrow::Cow<'static, [u8]>,
    timefmt: std::borrow::Cow<'static, [u8]>,
    silent: bool,
    /// Whether text and commands take effect here (false in an `if`
    /// branch not taken).
    output: bool,
    cond: Cond,
    /// Blocks defined so far, and the one being defined.
    blocks: Vec<(Vec<u8>, Vec<Event>)>,
    recording: Option<(Vec<u8>, Vec<Event>)>,
    captures: Vec<Vec<u8>>,
    named: Vec<(Arc<str>, Vec<u8>)>,
    shared: Rc<super::Shared>,
    /// A subrequest failed the whole request (an in-memory answer past
    /// `subrequest_output_buffer_size`): nothing more is processed, and
    /// the response ends without what is left.
    pub aborted: bool,
    /// Includes met in this piece, run together at its end.
    queued: Vec<Queued>,
    /// The piece's output past its first include while the answers are
    /// put in (kept for the next piece).
    scratch: Vec<u8>,
}

/// An include whose subrequest is still to run, and where its answer goes.
struct Queued {
    /// The offset in the piece's output.
    at: usize,
    path: Vec<u8>,
    args: Option<Vec<u8>>,
    /// `stub`'s block, for an empty or failed answer.
    block: Option<Vec<Event>>,
    /// The subrequest's answer once it has one.
    answer: Option<Fetched>,
}

impl Drop for Ssi {
    fn drop(&mut self) {
        bufs::give(std::mem::take(&mut self.scratch));
    }
}

/// An include that is waited for (`wait="yes"`, `set=`): what the
/// command left to do once the includes before it are done.
struct Waited {
    path: Vec<u8>,
    args: Option<Vec<u8>>,
    /// The variable `set=` names.
    set: Option<Vec<u8>>,
    block: Option<Vec<Event>>,
}

/// A subrequest's answer, or why there is none.
type Fetched = Result<subrequest::Answer, subrequest::Failed>;

/// A subrequest that waits, run with the others of its piece.
type Fetching<'f> = std::pin::Pin<Box<dyn std::future::Future<Output = Fetched> + 'f>>;

/// What a command did wrong: logged, then `errmsg` goes out.
type Fail = String;

impl Ssi {
    pub fn new(ctx: &ReqCtx<'_, '_>) -> Ssi {
        let conf = &ctx.conf.ssi;
        Ssi {
            parser: Parser::new(conf.value_len),
            // A page's events before its first include run (text and
            // commands, as a short page has them all).
            events: Vec::with_capacity(8),
            errmsg: super::ERRMSG.into(),
            timefmt: super::TIMEFMT.into(),
            silent: conf.silent_errors,
            output: true,
            cond: Cond::default(),
            blocks: Vec::new(),
            recording: None,
            captures: Vec::new(),
            named: Vec::new(),
            shared: ctx.ssi.clone().unwrap_or_default(),
            aborted: false,
            queued: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// The page's `$request_id` as a subrequest made it (in the shared
    /// store): the page's request takes it before it goes on, so the page
    /// and its includes show one id.
    fn take_request_id(&self, ctx: &ReqCtx<'_, '_>) {
        if ctx.request_id.get().is_none() {
            ctx.request_id.set(self.shared.request_id.get());
        }
    }

    /// The store of SSI variables that this page's subrequests share.
    pub fn shared(&self) -> &Rc<super::Shared> {
        &self.shared
    }

    /// Processes the next piece of the page; what goes out is appended to
    /// `out`.
    pub async fn feed(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, input: &[u8], out: &mut Vec<u8>) {
        self.parser.feed(input, &mut self.events);
        self.drain(w, ctx, input, out).await;
    }

    /// The end of the page.
    pub async fn finish(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, out: &mut Vec<u8>) {
        self.parser.finish(&mut self.events);
        self.drain(w, ctx, &[], out).await;
    }

    /// Runs the parser's events of the piece `input`.
    async fn drain(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, input: &[u8], out: &mut Vec<u8>) {
        // Text alone (most pieces) goes out without the machinery below.
        match self.events[..] {
            [] => return,
            [Event::Span(a, b)] if self.output && self.recording.is_none() => {
                self.events.clear();
                out.extend_from_slice(&input[a..b]);
                return;
            }
            _ => {}
        }
        // The page's text, at least, goes out: room for it at once.
        out.reserve(input.len());
        let mut events = std::mem::take(&mut self.events);
        for e in events.drain(..) {
            if self.aborted {
                return;
            }
            self.event(w, ctx, input, e, out).await;
        }
        // The list's room serves the next piece.
        self.events = events;
        if !self.queued.is_empty() {
            // Not boxed: `place` boxes what recurses, and a piece's
            // includes are answered without futures of their own.
            self.run_queued(w, ctx, out).await;
        }
    }

    /// Runs the queued includes' subrequests at the same time and puts
    /// each answer at its place in `out`.
    async fn run_queued(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, out: &mut Vec<u8>) {
        let mut queued = std::mem::take(&mut self.queued);
        if queued.is_empty() || self.aborted {
            return;
        }
        // Each is started now; those that must wait (an origin, a delay)
        // go on together, boxed. A file is answered without a future.
        let mut waiting = Vec::new();
        for (i, q) in queued.iter_mut().enumerate() {
            let path = std::mem::take(&mut q.path);
            match subrequest::start(w, ctx, path, q.args.take(), false, Some(self.shared.clone())) {
                subrequest::Started::Done(r) => q.answer = Some(r),
                subrequest::Started::Waiting(rest) => {
                    waiting.push((i, Box::pin(subrequest::finish(w, rest)) as Fetching<'_>))
                }
            }
        }
        if !waiting.is_empty() {
            let (at, fetches): (Vec<usize>, Vec<Fetching<'_>>) = waiting.into_iter().unzip();
            for (i, r) in at.into_iter().zip(join_all(fetches).await) {
                queued[i].answer = Some(r);
            }
        }
        self.take_request_id(ctx);
        // The answers go into their places as the output past the first
        // include is put together again (a stub block's own includes run
        // in its place).
        let start = queued[0].at;
        let mut whole = std::mem::take(&mut self.scratch);
        if whole.capacity() == 0 {
            whole = bufs::bytes(out.len() - start);
        }
        whole.clear();
        whole.extend_from_slice(&out[start..]);
        out.truncate(start);
        let answered = queued
            .iter()
            .map(|q| q.answer.as_ref().map_or(0, |a| a.as_ref().map_or(0, |a| a.body.len())))
            .sum::<usize>();
        out.reserve(whole.len() + answered);
        let mut from = start;
        for q in queued.drain(..) {
            out.extend_from_slice(&whole[from - start..q.at - start]);
            from = q.at;
            let answer = q.answer.unwrap_or(Err(subrequest::Failed::Body));
            let r = self.place(w, ctx, answer, q.block, out).await;
            if let Err(msg) = r {
                self.fail(ctx, &msg, out);
            }
        }
        out.extend_from_slice(&whole[from - start..]);
        self.scratch = whole;
        // The list's room serves the next piece.
        if self.queued.is_empty() {
            self.queued = queued;
        }
    }

    /// An include's answer in the page: its body, or its `stub` block for
    /// an empty or failed one.
    async fn place(
        &mut self,
        w: &WorkerCtx,
        ctx: &ReqCtx<'_, '_>,
        answer: Fetched,
        block: Option<Vec<Event>>,
        out: &mut Vec<u8>,
    ) -> Result<(), Fail> {
        use crate::http::handler::subrequest::Failed;
        match answer {
            Ok(a) if !(block.is_some() && (a.body.is_empty() || a.status >= 400)) => {
                out.extend_from_slice(&a.body);
                bufs::give(a.body);
                Ok(())
            }
            Ok(_) | Err(Failed::Body) if block.is_some() => {
                for e in block.unwrap_or_default() {
                    Box::pin(self.event(w, ctx, &[], e, out)).await;
                }
                // Includes in the block run now, in its place.
                Box::pin(self.run_queued(w, ctx, out)).await;
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(Failed::Cycle) => Err(String::new()),
            Err(Failed::TooBig) => {
                self.aborted = true;
                Err(String::new())
            }
            Err(Failed::Body) => Ok(()),
        }
    }

    /// One event of the piece `input` (a block's events are all owned).
    async fn event(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, input: &[u8], e: Event, out: &mut Vec<u8>) {
        match e {
            Event::Span(a, b) => {
                if let Some((_, block)) = &mut self.recording {
                    block.push(Event::Text(input[a..b].to_vec()));
                } else if self.output {
                    out.extend_from_slice(&input[a..b]);
                }
            }
            Event::Text(t) => {
                if let Some((_, b)) = &mut self.recording {
                    b.push(Event::Text(t));
                } else if self.output {
                    out.extend_from_slice(&t);
                }
            }
            Event::Error(msg) => {
                if let Some((_, b)) = &mut self.recording {
                    b.push(Event::Error(msg));
                } else if self.output {
                    self.fail(ctx, &msg, out);
                }
            }
            Event::Command(c) => {
                if let Some((_, b)) = &mut self.recording
                    && c.name() != b"endblock"
                {
                    b.push(Event::Command(c));
                    return;
                }
                let r = self.command(ctx, &c, out);
                c.recycle();
                let r = match r {
                    Ok(Some(waited)) => Box::pin(self.include_waited(w, ctx, waited, out)).await,
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                };
                if let Err(msg) = r
                    && !self.aborted
                {
                    self.fail(ctx, &msg, out);
                }
            }
        }
    }

    /// An empty message: logged already.
    fn fail(&self, ctx: &ReqCtx<'_, '_>, msg: &str, out: &mut Vec<u8>) {
        if !msg.is_empty() {
            log_req!(ctx, Level::Error, "{}", msg);
        }
        if !self.silent {
            out.extend_from_slice(&self.errmsg);
        }
    }

    fn scope<'s, 'c, 'a>(&'s self, ctx: &'s ReqCtx<'c, 'a>) -> Scope<'s, 'c, 'a> {
        Scope { ctx, shared: &self.shared, captures: &self.captures, named: &self.named, timefmt: &self.timefmt }
    }

    /// Runs a command (not one being recorded into a block); Some for an
    /// include that must be waited for, which the caller runs
    /// ([`Ssi::include_waited`]): the others need no future of their own.
    fn command(&mut self, ctx: &ReqCtx<'_, '_>, c: &Command, out: &mut Vec<u8>) -> Result<Option<Waited>, Fail> {
        let name = c.name();
        let conditional = matches!(name, b"if" | b"elif" | b"else" | b"endif");
        if !self.output && !conditional {
            return Ok(None);
        }
        let spec: &[(&str, bool)] = match name {
            b"include" => &[("file", false), ("virtual", false), ("stub", false), ("set", false), ("wait", false)],
            b"echo" => &[("var", true), ("default", false), ("encoding", false)],
            b"set" => &[("var", true), ("value", true)],
            b"config" => &[("errmsg", false), ("timefmt", false)],
            b"if" | b"elif" => &[("expr", true)],
            b"block" => &[("name", true)],
            b"else" | b"endif" | b"endblock" => &[],
            _ => return Err(format!("invalid SSI command: \"{}\"", String::from_utf8_lossy(name))),
        };
        check_params(name, c, spec)?;
        if name == b"include" {
            return self.include(ctx, c, out.len());
        }
        self.simple_command(ctx, name, c, out).map(|()| None)
    }

    /// The commands other than `include`.
    fn simple_command(
        &mut self,
        ctx: &ReqCtx<'_, '_>,
        name: &[u8],
        c: &Command,
        out: &mut Vec<u8>,
    ) -> Result<(), Fail> {
        let p = |n: &str| c.param(n);
        match name {
            b"echo" => self.echo(ctx, c, out),
            b"set" => {
                let scope = self.scope(ctx);
                let value = scope.evaluate(p("value").unwrap_or_default())?;
                let var = p("var").unwrap_or_default().to_vec();
                self.shared.set(&var, value);
                Ok(())
            }
            b"config" => {
                if let Some(v) = p("timefmt") {
                    self.timefmt = v.to_vec().into();
                }
                if let Some(v) = p("errmsg") {
                    self.errmsg = v.to_vec().into();
                }
                Ok(())
            }
            b"block" => {
                self.recording = Some((p("name").unwrap_or_default().to_vec(), Vec::new()));
                Ok(())
            }
            b"endblock" => match self.recording.take() {
                Some((n, b)) => {
                    self.blocks.retain(|(m, _)| *m != n);
                    self.blocks.push((n, b));
                    Ok(())
                }
                None => Err("invalid context of SSI command: \"endblock\"".into()),
            },
            b"if" => {
                if self.cond.open {
                    return Err("the \"if\" command inside the \"if\" command".into());
                }
                self.branch(ctx, p("expr"))?;
                self.cond.open = true;
                Ok(())
            }
            b"elif" => {
                if !self.cond.open {
                    return Err("invalid context of SSI command: \"elif\"".into());
                }
                if self.cond.chosen {
                    self.output = false;
                    return Ok(());
                }
                self.branch(ctx, p("expr"))
            }
            b"else" => {
                if !self.cond.open {
                    return Err("invalid context of SSI command: \"else\"".into());
                }
                self.output = !self.cond.chosen;
                self.cond.chosen = true;
                Ok(())
            }
            _ => {
                // endif
                if !self.cond.open {
                    return Err("invalid context of SSI command: \"endif\"".into());
                }
                self.cond = Cond::default();
                self.output = true;
                Ok(())
            }
        }
    }

    /// An `if`/`elif` branch: taken when the expression holds. An
    /// expression that fails changes nothing (nginx's: the `if` is not
    /// open then, its `else` and `endif` are errors too).
    fn branch(&mut self, ctx: &ReqCtx<'_, '_>, expr: Option<&[u8]>) -> Result<(), Fail> {
        let d = condition(&self.scope(ctx), expr.unwrap_or_default())?;
        self.output = false;
        if let Some((caps, named)) = d.captures {
            self.captures = caps;
            self.named.extend(named);
        }
        if d.truth {
            self.output = true;
            self.cond.chosen = true;
        }
        Ok(())
    }

    fn echo(&self, ctx: &ReqCtx<'_, '_>, c: &Command, out: &mut Vec<u8>) -> Result<(), Fail> {
        let scope = self.scope(ctx);
        let var = c.param("var").unwrap_or_default();
        let name = scope.evaluate(var)?;
        let value = match scope.lookup(&name)? {
            Some(v) => v,
            None => match c.param("default") {
                Some(d) => scope.evaluate(d)?,
                None => b"(none)".to_vec(),
            },
        };
        match c.param("encoding") {
            None | Some(b"entity") => escape_entity(&value, out),
            Some(b"url") => escape_url(&value, out),
            Some(b"none") => out.extend_from_slice(&value),
            Some(other) => {
                return Err(format!("unknown encoding \"{}\" in the \"echo\" command", String::from_utf8_lossy(other)));
            }
        }
        Ok(())
    }

    /// An `include`: queued to run with the others of the piece, or
    /// handed back to be waited for.
    /// `at`: where its answer goes in the output.
    fn include(&mut self, ctx: &ReqCtx<'_, '_>, c: &Command, at: usize) -> Result<Option<Waited>, Fail> {
        // One walk over the parameters (each is there once at most:
        // `check_params`).
        let (mut file, mut virt, mut wait, mut set, mut stub) = (None, None, None, None, None);
        for (n, v) in c.params() {
            match n {
                b"file" => file = Some(v),
                b"virtual" => virt = Some(v),
                b"wait" => wait = Some(v),
                b"set" => set = Some(v),
                b"stub" => stub = Some(v),
                _ => {}
            }
        }
        let uri = match (file, virt) {
            (Some(f), Some(v)) => {
                return Err(format!(
                    "inclusion may be either virtual=\"{}\" or file=\"{}\"",
                    String::from_utf8_lossy(v),
                    String::from_utf8_lossy(f)
                ));
            }
            (Some(u), None) | (None, Some(u)) => u,
            (None, None) => return Err("no parameter in \"include\" SSI command".into()),
        };
        if let (Some(f), Some(_)) = (file, wait) {
            return Err(format!("\"wait\" cannot be used with file=\"{}\"", String::from_utf8_lossy(f)));
        }
        if let Some(wait) = wait
            && wait != b"yes"
            && wait != b"no"
        {
            return Err(format!("invalid value \"{}\" in the \"wait\" parameter", String::from_utf8_lossy(wait)));
        }
        if set.is_some() && stub.is_some() {
            return Err("\"set\" and \"stub\" cannot be used together in \"include\" SSI command".into());
        }
        let block = match stub {
            Some(name) => match self.blocks.iter().find(|(n, _)| n == name) {
                Some((_, b)) => Some(b.clone()),
                None => {
                    return Err(format!("\"stub\"=\"{}\" for \"include\" not found", String::from_utf8_lossy(name)));
                }
            },
            None => None,
        };
        let mut target = self.scope(ctx).evaluate(uri)?;
        // nginx's NGX_HTTP_SSI_ADD_PREFIX: a relative URI is relative to
        // the directory of the page's.
        if target.first() != Some(&b'/') {
            let path = &ctx.req.path;
            let dir = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
            let mut abs = path[..dir].to_vec();
            abs.extend_from_slice(&target);
            target = abs;
        }
        let (path, args) = crate::http::handler::subrequest::parse_uri_owned(target)
            .map_err(|target| format!("unsafe URI \"{}\" was detected", String::from_utf8_lossy(&target)))?;
        if set.is_none() && wait != Some(b"yes") {
            self.queued.push(Queued { at, path, args, block, answer: None });
            return Ok(None);
        }
        Ok(Some(Waited { path, args, set: set.map(<[u8]>::to_vec), block }))
    }

    /// An include that is waited for: those before it finish first, then
    /// it runs to its end before the page goes on.
    async fn include_waited(
        &mut self,
        w: &WorkerCtx,
        ctx: &ReqCtx<'_, '_>,
        waited: Waited,
        out: &mut Vec<u8>,
    ) -> Result<(), Fail> {
        let Waited { path, args, set, block } = waited;
        Box::pin(self.run_queued(w, ctx, out)).await;
        if self.aborted {
            return Err(String::new());
        }
        let answer =
            crate::http::handler::subrequest::fetch(w, ctx, path, args, set.is_some(), Some(self.shared.clone())).await;
        self.take_request_id(ctx);
        if matches!(answer, Err(crate::http::handler::subrequest::Failed::TooBig)) {
            self.aborted = true;
            return Err(String::new());
        }
        if let Some(var) = set {
            let a = answer.map_err(|_| "include subrequest failed".to_string())?;
            self.shared.set(&var, a.body);
            return Ok(());
        }
        self.place(w, ctx, answer, block, out).await
    }
}

/// Polls every future until all are done; their outputs in order.
async fn join_all<'f, T>(mut futs: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'f>>>) -> Vec<T> {
    let mut done: Vec<Option<T>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, d) in futs.iter_mut().zip(done.iter_mut()) {
            if d.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *d = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    done.into_iter().flatten().collect()
}

/// nginx's checks of a command's parameters: each known, none twice,
/// the mandatory ones there.
fn check_params(name: &[u8], c: &Command, spec: &[(&str, bool)]) -> Result<(), Fail> {
    let name = || String::from_utf8_lossy(name);
    for (i, (p, _)) in c.params().enumerate() {
        if !spec.iter().any(|(s, _)| s.as_bytes() == p) {
            let p = String::from_utf8_lossy(p);
            return Err(format!("invalid parameter name: \"{p}\" in \"{}\" SSI command", name()));
        }
        if c.params().take(i).any(|(q, _)| q == p) {
            let p = String::from_utf8_lossy(p);
            return Err(format!("duplicate \"{p}\" parameter in \"{}\" SSI command", name()));
        }
    }
    for (s, mandatory) in spec {
        if *mandatory && c.param(s).is_none() {
            return Err(format!("mandatory \"{s}\" parameter is absent in \"{}\" SSI command", name()));
        }
    }
    Ok(())
}
