//! What a request's tries of its origins leave for the `$upstream_*`
//! variables, and nginx's way of joining them: `, ` between tries, ` : `
//! where the request went on to another upstream.

use super::ctx::push_secs_ms;

/// One entry per try in each list (`ReqCtx::upstream`).
#[derive(Default)]
pub struct UpstreamLog {
    pub addr: Tries<std::sync::Arc<str>>,
    pub status: Tries<u16>,
    /// Milliseconds; None where the stage was not reached (logged as `-`).
    pub connect_ms: Tries<Option<u64>>,
    pub header_ms: Tries<Option<u64>>,
    pub response_ms: Tries<Option<u64>>,
    /// Bytes each try's origin sent after its head
    /// (`$upstream_response_length`).
    pub response_len: Tries<u64>,
    /// Bytes each try read from the origin, head included
    /// (`$upstream_bytes_received`).
    pub bytes_received: Tries<u64>,
    /// Bytes each try wrote to the origin: the PROXY protocol line, the
    /// request head and body as framed (`$upstream_bytes_sent`).
    pub bytes_sent: Tries<u64>,
    /// Where a request that reached a second upstream (X-Accel-Redirect,
    /// `error_page` to a proxied location) began it: the number of tries
    /// before it. The lists print ` : ` there, as nginx does.
    pub groups: Vec<u16>,
    /// The head of an origin that answered with `X-Accel-Redirect`: what
    /// `$upstream_http_*` reads while the redirected request runs (nginx
    /// keeps the upstream's headers until another upstream starts).
    pub redirected_by: Option<Vec<(std::borrow::Cow<'static, str>, crate::http::field_value::FieldValue)>>,
}

impl UpstreamLog {
    /// A request reaches an upstream: after one already tried, the lists
    /// get nginx's ` : ` (its empty state pushed at upstream init).
    pub fn begin(&mut self) {
        self.redirected_by = None;
        if !self.addr.is_empty() {
            self.groups.push(self.addr.len() as u16);
        }
    }
}

/// A list with one entry per peer tried. Nearly always one: that one is
/// held inline, so a proxied request allocates nothing for its log fields.
#[derive(Debug)]
pub struct Tries<T> {
    /// None only while `more` is empty too.
    first: Option<T>,
    more: Vec<T>,
}

impl<T> Default for Tries<T> {
    fn default() -> Self {
        Tries { first: None, more: Vec::new() }
    }
}

impl<T> Tries<T> {
    pub fn push(&mut self, v: T) {
        if self.first.is_none() {
            self.first = Some(v);
        } else {
            self.more.push(v);
        }
    }

    pub fn pop(&mut self) -> Option<T> {
        self.more.pop().or_else(|| self.first.take())
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.first.iter().chain(self.more.iter())
    }

    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    pub fn last(&self) -> Option<&T> {
        self.more.last().or(self.first.as_ref())
    }

    pub fn last_mut(&mut self) -> Option<&mut T> {
        self.more.last_mut().or(self.first.as_mut())
    }
}

pub(super) fn push_ms_list(out: &mut Vec<u8>, list: &Tries<Option<u64>>, groups: &[u16]) {
    push_list(out, list, groups, |out, v| match v {
        Some(ms) => push_secs_ms(out, *ms),
        None => out.push(b'-'),
    })
}

/// One value per try, joined with `, `, and ` : ` where another upstream
/// began, as nginx joins them.
pub(super) fn push_list<T>(out: &mut Vec<u8>, list: &Tries<T>, groups: &[u16], each: impl Fn(&mut Vec<u8>, &T)) {
    let mut n = 0;
    for (i, v) in list.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(if groups.contains(&(i as u16)) { b" : " } else { b", " });
        }
        each(out, v);
        n = i + 1;
    }
    // a last upstream that answered from its cache, with no try
    if n > 0 && groups.last() == Some(&(n as u16)) {
        out.extend_from_slice(b" : ");
    }
}
