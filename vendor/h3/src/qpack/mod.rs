pub use self::{
    decoder::{decode_stateless, Decoded, DecoderError},
    encoder::{encode_stateless, EncoderError},
    field::HeaderField,
};

mod block;
mod dynamic;
mod field;
mod parse_error;
mod static_;
mod stream;
mod vas;

mod decoder;
mod encoder;
// sluice: the connection's decoder with the dynamic table.
pub(crate) mod session;

mod prefix_int;
mod prefix_string;

#[cfg(test)]
mod tests;

#[derive(Debug)]
pub enum Error {
    Encoder(EncoderError),
    Decoder(DecoderError),
}

impl std::error::Error for Error {}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Encoder(e) => write!(f, "Encoder {}", e),
            Error::Decoder(e) => write!(f, "Decoder {}", e),
        }
    }
}

/// SLUICE-PATCH: a field section decoded without a dynamic table, as
/// (name, value) pairs and its size: for sluice's tests of its own
/// response encoder against this decoder.
pub fn decode_section_stateless(mut block: &[u8], max_size: u64) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, u64), String> {
    let d = decode_stateless(&mut block, max_size).map_err(|e| format!("{e:?}"))?;
    let fields = d.fields.into_iter().map(|f| (f.name.into_owned(), f.value.into_owned())).collect();
    Ok((fields, d.mem_size))
}
