use std::{convert::TryFrom, sync::Arc};

use bytes::Buf;
use http::{Request, StatusCode};

use tokio::sync::mpsc::UnboundedSender;
#[cfg(feature = "tracing")]
use tracing::instrument;

use crate::{
    connection::{self},
    error::{
        connection_error_creators::{CloseStream, HandleFrameStreamErrorOnRequestStream},
        internal_error::InternalConnectionError,
        Code, StreamError,
    },
    frame::{FrameStream, FrameStreamError},
    proto::{
        frame::{Frame, PayloadLen},
        headers::Header,
    },
    qpack::{self, session::Decode},
    quic::{self, RecvStream, SendStream, StreamId},
    shared_state::{ConnectionState, SharedState},
};

use super::{connection::RequestEnd, stream::RequestStream};

/// Helper struct to await the request headers and return a `Request` object
pub struct RequestResolver<C, B>
where
    C: quic::Connection<B>,
    C::BidiStream: quic::SendStream<B>,
    B: Buf,
{
    #[doc(hidden)]
    // TODO: make this private
    pub frame_stream: FrameStream<C::BidiStream, B>,
    pub(super) request_end_send: UnboundedSender<StreamId>,
    pub(super) send_grease_frame: bool,
    pub(super) max_field_section_size: u64,
    pub(super) shared: Arc<SharedState>,
}

impl<C, B> ConnectionState for RequestResolver<C, B>
where
    C: quic::Connection<B>,
    B: Buf,
{
    fn shared_state(&self) -> &SharedState {
        &self.shared
    }
}

impl<C, B> CloseStream for RequestResolver<C, B>
where
    C: quic::Connection<B>,
    B: Buf,
{
}

impl<C, B> RequestResolver<C, B>
where
    C: quic::Connection<B>,
    B: Buf,
{
    /// Returns a future to await the request headers and return a `Request` object
    #[cfg_attr(feature = "tracing", instrument(skip_all, level = "trace"))]
    pub async fn resolve_request(
        self,
    ) -> Result<(Request<()>, RequestStream<C::BidiStream, B>), StreamError> {
        self.resolve_request_until(std::future::pending()).await
    }

    /// SLUICE-PATCH: [`Self::resolve_request`] with a deadline for the
    /// request's header section: reading it and waiting for the QPACK
    /// inserts it needs. When `deadline` comes first, the stream is reset
    /// (H3_REQUEST_REJECTED) and its QPACK state cancelled, as nginx does
    /// at `client_header_timeout`. A client that resets its side while the
    /// section waits for inserts gets the placeholder request marked
    /// [`MalformedRequest`] (nginx answers it 400).
    pub async fn resolve_request_until<D: std::future::Future<Output = ()>>(
        mut self,
        deadline: D,
    ) -> Result<(Request<()>, RequestStream<C::BidiStream, B>), StreamError> {
        let mut deadline = std::pin::pin!(deadline);
        let frame = std::future::poll_fn(|cx| {
            if deadline.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(None);
            }
            self.frame_stream.poll_next(cx).map(Some)
        })
        .await;
        let Some(frame) = frame else {
            return Err(self.timed_out());
        };
        let encoded = self.headers_block(frame)?;
        let id = self.frame_stream.send_id().into_inner();
        let max = self.max_field_section_size;
        let shared = self.shared.clone();
        let decoded = std::future::poll_fn(|cx| {
            if let Decode::Done(r) = shared.qpack().decode(id, &encoded, max, cx) {
                return std::task::Poll::Ready(Some(Ok(r)));
            }
            if deadline.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(None);
            }
            // Blocked: the stream is watched for a reset meanwhile,
            // without reading (what else arrives waits in the QUIC
            // stream's window): reading its FIN would end the stream's
            // receive state, and a reset after it would go unseen
            // (nginx-tests h3_headers.t, "blocked insert reset").
            if let std::task::Poll::Ready(Some(_)) = self.frame_stream.stream.poll_reset(cx) {
                return std::task::Poll::Ready(Some(Err(())));
            }
            std::task::Poll::Pending
        })
        .await;
        let decoded = match decoded {
            Some(Ok(d)) => d,
            Some(Err(())) => {
                shared.qpack().cancel(id);
                shared.waker().wake();
                let req = self.accept_decoded(Ok(qpack::Decoded {
                    fields: Vec::new(),
                    mem_size: 0,
                    dyn_ref: false,
                }))?;
                return Ok(req.malformed("the client reset the stream while its header section waited"));
            }
            None => return Err(self.timed_out()),
        };
        let req = self.accept_decoded(decoded)?;
        Ok(req.resolve().await?)
    }

    /// The deadline passed before the header section was complete.
    fn timed_out(mut self) -> StreamError {
        self.shared.qpack().cancel(self.frame_stream.send_id().into_inner());
        self.shared.waker().wake();
        self.frame_stream.stop_sending(Code::H3_REQUEST_REJECTED);
        self.frame_stream.reset(Code::H3_REQUEST_REJECTED.value());
        StreamError::StreamError {
            code: Code::H3_REQUEST_REJECTED,
            reason: "timed out reading the request's header section".to_string(),
        }
    }

    /// Accepts a http request where the first frame has already been read and decoded.
    ///
    /// This is needed as a bidirectional stream may be read as part of incoming webtransport
    /// bi-streams. If it turns out that the stream is *not* a `WEBTRANSPORT_STREAM` the request
    /// may still want to be handled and passed to the user. (sluice: a field section
    /// that must wait for dynamic table inserts is refused here; `resolve_request` waits.)
    #[cfg_attr(feature = "tracing", instrument(skip_all, level = "trace"))]
    pub fn accept_with_frame(
        mut self,
        frame: Result<Option<Frame<PayloadLen>>, FrameStreamError>,
    ) -> Result<ResolvedRequest<C, B>, StreamError> {
        let encoded = self.headers_block(frame)?;
        let id = self.frame_stream.send_id().into_inner();
        let max = self.max_field_section_size;
        let cx = std::task::Context::from_waker(std::task::Waker::noop());
        let decoded = match self.shared.qpack().decode(id, &encoded, max, &cx) {
            Decode::Done(r) => r,
            Decode::Blocked => Err(qpack::DecoderError::MissingRefs(0)),
        };
        self.accept_decoded(decoded)
    }

    /// The first frame's field section, which must be HEADERS.
    fn headers_block(
        &mut self,
        frame: Result<Option<Frame<PayloadLen>>, FrameStreamError>,
    ) -> Result<bytes::Bytes, StreamError> {
        match frame {
            Ok(Some(Frame::Headers(h))) => Ok(h),

            //= https://www.rfc-editor.org/rfc/rfc9114#section-4.1.2
            //# Receipt of an invalid sequence of frames MUST be treated as a
            //# connection error of type H3_FRAME_UNEXPECTED.
            Ok(None) => {
                self.frame_stream.reset(Code::H3_REQUEST_INCOMPLETE.value());
                Err(StreamError::StreamError {
                    code: Code::H3_REQUEST_INCOMPLETE,
                    reason: "stream terminated without headers".to_string(),
                })
            }

            Ok(Some(_)) => Err(self.handle_connection_error_on_stream(InternalConnectionError::new(
                Code::H3_FRAME_UNEXPECTED,
                "first request frame is not headers".to_string(),
            ))),
            Err(e) => Err(self.handle_frame_stream_error_on_request_stream(e)),
        }
    }

    fn accept_decoded(
        mut self,
        decoded: Result<qpack::Decoded, qpack::DecoderError>,
    ) -> Result<ResolvedRequest<C, B>, StreamError> {
        let decoded = match decoded {
            Err(qpack::DecoderError::HeaderTooLong(cancel_size)) => Err(cancel_size),
            Ok(decoded) => Ok(decoded),
            // sluice: as nginx, a field section that cannot be decoded
            // (a reference to an evicted entry, say) resets the request
            // stream with QPACK_DECOMPRESSION_FAILED, and its QPACK state
            // is cancelled (RFC 9204 4.4.2); the connection stays.
            Err(qpack::DecoderError::TooManyBlocked) => {
                return Err(
                    self.handle_connection_error_on_stream(InternalConnectionError {
                        code: Code::QPACK_DECOMPRESSION_FAILED,
                        message: "too many blocked streams".to_string(),
                    }),
                );
            }
            Err(e) => {
                let id = self.frame_stream.send_id().into_inner();
                self.shared.qpack().cancel(id);
                self.shared.waker().wake();
                self.frame_stream.stop_sending(Code::QPACK_DECOMPRESSION_FAILED);
                self.frame_stream.reset(Code::QPACK_DECOMPRESSION_FAILED.value());
                return Err(StreamError::StreamError {
                    code: Code::QPACK_DECOMPRESSION_FAILED,
                    reason: format!("client sent invalid header ({})", e),
                });
            }
        };
        if decoded.as_ref().is_ok_and(|d| d.dyn_ref) {
            // The Section Acknowledgment waits in the decoder's output.
            self.shared.waker().wake();
        }

        let request_stream = RequestStream {
            request_end: Arc::new(RequestEnd {
                request_end: self.request_end_send.clone(),
                stream_id: self.frame_stream.send_id(),
            }),
            inner: connection::RequestStream::new(
                self.frame_stream,
                self.max_field_section_size,
                self.shared.clone(),
                self.send_grease_frame,
            ),
        };

        Ok(ResolvedRequest::new(
            request_stream,
            decoded,
            self.max_field_section_size,
        ))
    }
}

/// SLUICE-PATCH: the extension on the placeholder request that stands for
/// a malformed one; the text says what was wrong.
#[derive(Clone, Debug)]
pub struct MalformedRequest(pub String);

/// SLUICE-PATCH: a request's fields whose values `http::HeaderValue`
/// cannot hold (control characters other than NUL, CR and LF), in order.
#[derive(Clone, Debug)]
pub struct RawFields(pub Vec<(http::HeaderName, Vec<u8>)>);

/// SLUICE-PATCH: splits off the fields `RawFields` carries: a lowercase
/// token name that is not a pseudo-header, a value with a control
/// character but no NUL, CR or LF.
fn take_raw(fields: Vec<crate::qpack::HeaderField>) -> (Vec<crate::qpack::HeaderField>, Vec<(http::HeaderName, Vec<u8>)>) {
    let odd = |v: &[u8]| v.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f);
    if !fields.iter().any(|f| odd(&f.value)) {
        return (fields, Vec::new());
    }
    let mut keep = Vec::with_capacity(fields.len());
    let mut raw = Vec::new();
    for f in fields {
        let allowed = !f.value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n'));
        let name = (f.name.first() != Some(&b':') && odd(&f.value) && allowed)
            .then(|| http::HeaderName::from_lowercase(&f.name).ok())
            .flatten();
        match name {
            Some(n) => raw.push((n, f.value.into_owned())),
            None => keep.push(f),
        }
    }
    (keep, raw)
}

pub struct ResolvedRequest<C, B>
where
    C: quic::Connection<B>,
    B: Buf,
{
    request_stream: RequestStream<C::BidiStream, B>,
    // Ok or `REQUEST_HEADER_FIELDS_TO_LARGE` which needs to be sent
    decoded: Result<qpack::Decoded, u64>,
    max_field_section_size: u64,
}

impl<B, C> ResolvedRequest<C, B>
where
    C: quic::Connection<B>,
    B: Buf,
{
    pub fn new(
        request_stream: RequestStream<C::BidiStream, B>,
        decoded: Result<qpack::Decoded, u64>,
        max_field_section_size: u64,
    ) -> Self {
        Self {
            request_stream,
            decoded,
            max_field_section_size,
        }
    }

    /// Finishes the resolution of the request
    /// SLUICE-PATCH: the placeholder request (`GET /`, HTTP/3) marked
    /// [`MalformedRequest`], with its stream, for the server to answer.
    fn malformed(self, why: &str) -> (Request<()>, RequestStream<C::BidiStream, B>) {
        let mut req = http::Request::new(());
        *req.uri_mut() = http::Uri::from_static("/");
        *req.version_mut() = http::Version::HTTP_3;
        req.extensions_mut().insert(MalformedRequest(why.to_string()));
        (req, self.request_stream)
    }

    #[cfg_attr(feature = "tracing", instrument(skip_all, level = "trace"))]
    pub async fn resolve(
        mut self,
    ) -> Result<(Request<()>, RequestStream<C::BidiStream, B>), StreamError> {
        let fields = match std::mem::replace(&mut self.decoded, Err(0)) {
            Ok(v) => v.fields,
            Err(cancel_size) => {
                // SLUICE-PATCH: as nginx, a header section over the limit
                // (name and value lengths, without RFC 9204's 32 bytes an
                // entry) is answered 400 by the server, not 431 here.
                let why = format!(
                    "client sent too large header ({} bytes, at most {})",
                    cancel_size, self.max_field_section_size
                );
                return Ok(self.malformed(&why));
            }
        };

        // SLUICE-PATCH: fields whose values `http::HeaderValue` refuses
        // but HTTP/3 allows (control characters other than NUL, CR and
        // LF: RFC 9114 4.2, 10.3) are kept aside as `RawFields`, as nginx
        // takes them, instead of making the request malformed.
        let (fields, raw) = take_raw(fields);

        // Parse the request headers
        let result = match Header::try_from(fields) {
            Ok(header) => match header.into_request_parts() {
                Ok(parts) => Ok(parts),
                Err(err) => Err(err),
            },
            Err(err) => Err(err),
        };
        let (method, uri, protocol, headers) = match result {
            Ok(parts) => parts,
            Err(err) => {
                // SLUICE-PATCH: a malformed request is handed over as a
                // placeholder marked `MalformedRequest`, with its stream,
                // so that the server answers it (nginx: 400, through
                // `error_page`) instead of the stream being stopped here.
                return Ok(self.malformed(&err.to_string()));
            }
        };

        //  request_stream.stop_stream(Code::H3_MESSAGE_ERROR).await;

        let mut req = http::Request::new(());
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        *req.headers_mut() = headers;
        // NOTE: insert `Protocol` and not `Option<Protocol>`
        if let Some(protocol) = protocol {
            req.extensions_mut().insert(protocol);
        }
        *req.version_mut() = http::Version::HTTP_3;
        if !raw.is_empty() {
            req.extensions_mut().insert(RawFields(raw));
        }
        #[cfg(feature = "tracing")]
        tracing::trace!("replying with: {:?}", req);

        Ok((req, self.request_stream))
    }
}
