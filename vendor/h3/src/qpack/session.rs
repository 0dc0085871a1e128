//! sluice: a connection's QPACK decoder (RFC 9204) with the dynamic table.
//!
//! Upstream h3 0.0.8 announces no dynamic table and decodes every field
//! section statelessly; a client that inserts entries anyway (nginx's test
//! client does, as browsers may once a server announces a capacity) had its
//! requests refused. This is the state a connection shares with its request
//! streams: the table the peer's encoder stream fills, the decoder-stream
//! instructions owed to the peer (Insert Count Increment, Section
//! Acknowledgment, Stream Cancellation), and the request streams waiting for
//! inserts their field sections need (blocked streams, 2.1.2).

use std::task::{Context, Waker};

use bytes::{Buf, Bytes, BytesMut};

use super::{
    block::HeaderPrefix,
    decoder::{Decoded, Decoder, DecoderError, Instruction},
    dynamic::DynamicTable,
    prefix_int,
    stream::{HeaderAck, StreamCancel},
};

/// The result of decoding a field section that may wait for inserts.
pub enum Decode {
    Done(Result<Decoded, DecoderError>),
    /// The section needs entries not yet received; the waker is woken on
    /// the next insert.
    Blocked,
}

pub struct DecoderSession {
    decoder: Decoder,
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY as announced (0: no table).
    max_capacity: usize,
    /// SETTINGS_QPACK_BLOCKED_STREAMS as announced.
    max_blocked: usize,
    /// Longest field name or value an insert may carry (nginx's
    /// `large_client_header_buffers` size).
    max_field_size: usize,
    /// Streams waiting for inserts, by stream id; emptied (and woken) on
    /// every insert, so a stream given up on does not stay counted.
    waiting: Vec<(u64, Waker)>,
    /// Encoder-stream bytes that do not make a whole instruction yet.
    pending: BytesMut,
    /// Decoder-stream bytes not yet written.
    out: Vec<u8>,
}

impl Default for DecoderSession {
    fn default() -> Self {
        Self::new(0, 0, usize::MAX)
    }
}

impl DecoderSession {
    pub fn new(max_capacity: usize, max_blocked: usize, max_field_size: usize) -> Self {
        Self {
            decoder: Decoder {
                table: DynamicTable::new(),
            },
            max_capacity,
            max_blocked,
            max_field_size,
            waiting: Vec::new(),
            pending: BytesMut::new(),
            out: Vec::new(),
        }
    }

    /// Bytes read from the peer's encoder stream. An error is a connection
    /// error of type QPACK_ENCODER_STREAM_ERROR.
    pub fn on_encoder_data<B: Buf>(&mut self, data: &mut B) -> Result<(), DecoderError> {
        while data.has_remaining() {
            let chunk = data.chunk();
            self.pending.extend_from_slice(chunk);
            let n = chunk.len();
            data.advance(n);
        }
        let before = self.decoder.table.total_inserted();
        loop {
            let instruction = match self.decoder.parse_instruction(&mut self.pending) {
                Ok(Some(i)) => i,
                Ok(None) => break,
                Err(e) => return Err(e),
            };
            match instruction {
                Instruction::TableSizeUpdate(size) => {
                    if size > self.max_capacity {
                        return Err(DecoderError::CapacityExceeded(size));
                    }
                    self.decoder.table.set_max_size(size)?;
                }
                Instruction::Insert(field) => {
                    let longest = field.name.len().max(field.value.len());
                    if longest > self.max_field_size {
                        return Err(DecoderError::FieldTooLarge(longest));
                    }
                    if field.mem_size() > self.decoder.table.max_mem_size() {
                        return Err(DecoderError::CapacityExceeded(field.mem_size()));
                    }
                    self.decoder.table.put(field)?;
                }
            }
        }
        // An unfinished instruction holds at most a name and a value.
        if self.pending.len() > self.max_field_size.saturating_mul(2).saturating_add(32) {
            return Err(DecoderError::FieldTooLarge(self.pending.len()));
        }
        let inserted = self.decoder.table.total_inserted() - before;
        if inserted > 0 {
            prefix_int::encode(6, 0b00, inserted as u64, &mut self.out);
            for (_, w) in self.waiting.drain(..) {
                w.wake();
            }
        }
        Ok(())
    }

    /// Decodes a request stream's field section; `max_size` is the limit
    /// on its decoded size (a larger one is `HeaderTooLong`, as the
    /// stateless decoder reports it; `mem_size` is that size).
    pub fn decode(&mut self, stream_id: u64, block: &Bytes, max_size: u64, cx: &Context<'_>) -> Decode {
        let mut buf = block.clone();
        let total = self.decoder.table.total_inserted();
        let (required, base) = match HeaderPrefix::decode(&mut buf).and_then(|p| p.get(total, self.max_capacity)) {
            Ok(v) => v,
            Err(e) => return Decode::Done(Err(e.into())),
        };
        if required > total {
            if let Some(w) = self.waiting.iter_mut().find(|(id, _)| *id == stream_id) {
                w.1 = cx.waker().clone();
            } else if self.waiting.len() >= self.max_blocked {
                return Decode::Done(Err(DecoderError::TooManyBlocked));
            } else {
                self.waiting.push((stream_id, cx.waker().clone()));
            }
            return Decode::Blocked;
        }
        self.waiting.retain(|(id, _)| *id != stream_id);
        let table = self.decoder.table.decoder(base);
        let mut fields = Vec::new();
        let mut mem_size = 0u64;
        while buf.has_remaining() {
            let field = match Decoder::parse_header_field(&table, &mut buf) {
                Ok(f) => f,
                Err(e) => return Decode::Done(Err(e)),
            };
            // Counted as nginx counts a header section against
            // `large_client_header_buffers`: names and values, without
            // RFC 9204's 32 bytes an entry.
            mem_size += (field.name.len() + field.value.len()) as u64;
            if mem_size > max_size {
                return Decode::Done(Err(DecoderError::HeaderTooLong(mem_size)));
            }
            fields.push(field);
        }
        if required > 0 {
            HeaderAck(stream_id).encode(&mut self.out);
        }
        Decode::Done(Ok(Decoded {
            fields,
            mem_size,
            dyn_ref: required > 0,
        }))
    }

    /// A request stream given up on before its field sections were all
    /// processed (4.4.2).
    pub fn cancel(&mut self, stream_id: u64) {
        self.waiting.retain(|(id, _)| *id != stream_id);
        StreamCancel(stream_id).encode(&mut self.out);
    }

    /// Decoder-stream bytes to write, if any.
    pub fn take_out(&mut self) -> Option<Bytes> {
        if self.out.is_empty() {
            None
        } else {
            Some(Bytes::from(std::mem::take(&mut self.out)))
        }
    }

    /// Puts back what could not be written yet, before anything newer.
    pub fn put_back(&mut self, mut rest: Bytes) {
        let newer = std::mem::take(&mut self.out);
        let mut v = Vec::with_capacity(rest.len() + newer.len());
        while rest.has_remaining() {
            let c = rest.chunk();
            v.extend_from_slice(c);
            let n = c.len();
            rest.advance(n);
        }
        v.extend_from_slice(&newer);
        self.out = v;
    }
}

impl std::fmt::Debug for DecoderSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecoderSession")
            .field("max_capacity", &self.max_capacity)
            .field("inserted", &self.decoder.table.total_inserted())
            .field("waiting", &self.waiting.len())
            .finish()
    }
}

/// sluice: the fuzzing entry point (sluice's `fuzzing::qpack_decoder`).
/// The input's first byte splits the rest into the encoder stream's bytes
/// and field sections (two bytes of length before each). Properties:
/// nothing panics; the encoder stream fed in one piece or in two gives the
/// same table; a section decodes the same either way; a decoded section
/// stays within its limit.
pub fn fuzz(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    let split = (first as usize * rest.len()) / 256;
    let (enc, mut sections) = rest.split_at(split);
    let mut whole = DecoderSession::new(4096, 16, 512);
    let mut parts = DecoderSession::new(4096, 16, 512);
    let r1 = whole.on_encoder_data(&mut &enc[..]);
    let cut = enc.len() / 2;
    let r2 = parts
        .on_encoder_data(&mut &enc[..cut])
        .and_then(|_| parts.on_encoder_data(&mut &enc[cut..]));
    assert_eq!(r1.is_ok(), r2.is_ok(), "{:?} {:?}", r1, r2);
    if r1.is_err() {
        return;
    }
    let inserted = whole.decoder.table.total_inserted();
    assert_eq!(inserted, parts.decoder.table.total_inserted());
    let cx = Context::from_waker(Waker::noop());
    let mut id = 0u64;
    while sections.len() >= 2 {
        let n = ((sections[0] as usize) << 8 | sections[1] as usize).min(sections.len() - 2);
        let block = Bytes::copy_from_slice(&sections[2..2 + n]);
        sections = &sections[2 + n..];
        let a = whole.decode(id, &block, 1024, &cx);
        let b = parts.decode(id, &block, 1024, &cx);
        match (a, b) {
            (Decode::Done(Ok(x)), Decode::Done(Ok(y))) => {
                assert_eq!(x, y);
                assert!(x.mem_size <= 1024);
            }
            (Decode::Done(Err(x)), Decode::Done(Err(y))) => assert_eq!(x, y),
            (Decode::Blocked, Decode::Blocked) => {}
            _ => panic!("the two sessions disagree"),
        }
        id += 4;
    }
    let _ = whole.take_out();
}
