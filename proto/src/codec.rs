//! # Frame format of the `/dpor/1` protocol
//!
//! dpor runs over **libp2p request-response**: for every request the client opens a
//! new Yamux stream on its (TCP + Noise + Yamux) connection to the node, negotiates
//! the protocol name [`PROTOCOL`] (`/dpor/1`) with multistream-select, and then:
//!
//! 1. the client writes **one request frame** and closes its write side;
//! 2. the server writes **one response frame** and closes the stream.
//!
//! A frame is
//!
//! ```text
//! +----------------------------+-------------------------------+
//! | length: u32, big-endian    | body: `length` bytes of CBOR  |
//! +----------------------------+-------------------------------+
//! ```
//!
//! - `length` counts the body only (not the 4 prefix bytes), in bytes.
//! - The body is exactly one CBOR data item (RFC 8949), the serde encoding of the
//!   request or response type by `ciborium`; bytes after that item are an error.
//! - Limits (bytes of body): requests at most [`Limits::max_request_bytes`],
//!   responses at most [`Limits::max_response_bytes`]; both default to
//!   [`MAX_FRAME_BYTES`] = 8 MiB. The length prefix itself caps any frame at
//!   `u32::MAX` bytes.
//!
//! ## Errors and what each side does
//!
//! Every failure to read a request is a [`FrameError`], handed to the server's handler
//! as the request `Err(FrameError)` so that the server **always answers** (with an
//! error response), and the connection is kept:
//!
//! - [`FrameError::TooLarge`]: the length prefix is over the limit. The body is never
//!   kept: the server reads and discards the declared number of body bytes (through a
//!   small fixed buffer; less if the client ends its side of the stream sooner), then
//!   answers and closes the stream normally. A client that sends its whole request
//!   before reading (as js-libp2p clients do) is thus never left blocked on an unread
//!   body and always gets the answer (resetting the stream instead would make such a
//!   client lose the answer). Like every request, this is bounded in time by the
//!   request timeout of [`crate::net::NetConfig`], after which the stream is reset.
//! - [`FrameError::Truncated`]: the stream ended before the prefix or the body was
//!   complete.
//! - [`FrameError::Malformed`]: the body is not one CBOR item of the expected type.
//!
//! On the sending side, a request or response whose encoding is over the limit is
//! not sent: [`FrameError::TooLarge`] is returned to the caller (an oversized response
//! can be replaced by a fallback response, see [`Codec::with_oversize_response`]).
//! A response the client cannot read (too large, truncated, malformed) is an error for
//! that request only.
//!
//! Memory: reading a frame allocates at most its declared length, which is bounded by
//! the limit, and grows the buffer only as bytes actually arrive.

use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use libp2p::StreamProtocol;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The protocol name negotiated on every stream: `/dpor/1` (version 1 of the frame
/// format and message set; an incompatible change gets a new version).
pub const PROTOCOL: StreamProtocol = StreamProtocol::new("/dpor/1");

/// Default limit on a frame body, in bytes (8 MiB), for requests and for responses.
pub const MAX_FRAME_BYTES: u64 = 8 * 1024 * 1024;

/// Size of the length prefix, in bytes.
pub const PREFIX_BYTES: usize = 4;

/// Initial read buffer, in bytes; the buffer then doubles as data arrives, never past
/// the declared length.
const INITIAL_READ_CHUNK: usize = 64 * 1024;

/// Buffer through which the server discards the body of an oversized request, in
/// bytes (see the [module documentation](self)).
const DISCARD_CHUNK: usize = 8 * 1024;

/// Size limits on frame bodies, in bytes (the 4-byte prefix is not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Largest request body accepted (reading) or sent (writing), in bytes.
    pub max_request_bytes: u64,
    /// Largest response body accepted (reading) or sent (writing), in bytes.
    pub max_response_bytes: u64,
}

impl Default for Limits {
    /// [`MAX_FRAME_BYTES`] (8 MiB) for both directions.
    fn default() -> Self {
        Self {
            max_request_bytes: MAX_FRAME_BYTES,
            max_response_bytes: MAX_FRAME_BYTES,
        }
    }
}

impl Limits {
    /// Whether a request body of `len` bytes is within [`Limits::max_request_bytes`].
    pub fn request_fits(&self, len: u64) -> bool {
        len <= self.max_request_bytes.min(u64::from(u32::MAX))
    }

    /// Whether a response body of `len` bytes is within [`Limits::max_response_bytes`].
    pub fn response_fits(&self, len: u64) -> bool {
        len <= self.max_response_bytes.min(u64::from(u32::MAX))
    }
}

/// Why a frame could not be read or written. Shown to users; carried to the server's
/// handler for inbound requests so it can answer with an error response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum FrameError {
    /// The body did not decode as one CBOR item of the expected message type.
    #[error("malformed message: the CBOR body did not decode: {0}")]
    Malformed(String),
    /// The frame is larger than the limit (from the length prefix when reading, from
    /// the encoding when writing). Bytes.
    #[error("message too large: {got} bytes, the limit is {max} bytes")]
    TooLarge {
        /// Declared or encoded body length, in bytes.
        got: u64,
        /// The limit that applied, in bytes.
        max: u64,
    },
    /// The stream ended before the whole frame (prefix, then body) arrived.
    #[error("message truncated: the stream ended after {got} of {expected} bytes")]
    Truncated {
        /// Bytes expected: 4 for the prefix, else the declared body length.
        expected: u64,
        /// Bytes received before the end of the stream.
        got: u64,
    },
    /// The value could not be encoded as CBOR (sending side).
    #[error("could not encode the message as CBOR: {0}")]
    Encode(String),
}

impl FrameError {
    /// Wraps this error as an [`io::Error`] (how libp2p's codec trait reports
    /// failures); [`FrameError::from_io`] gets it back.
    pub fn into_io(self) -> io::Error {
        let kind = match self {
            FrameError::Truncated { .. } => io::ErrorKind::UnexpectedEof,
            FrameError::Malformed(_) => io::ErrorKind::InvalidData,
            FrameError::TooLarge { .. } | FrameError::Encode(_) => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, self)
    }

    /// The [`FrameError`] inside an [`io::Error`] made by [`FrameError::into_io`], if any.
    pub fn from_io(err: &io::Error) -> Option<&FrameError> {
        err.get_ref().and_then(|e| e.downcast_ref::<FrameError>())
    }
}

/// Length in bytes of the CBOR body `value` encodes to (no prefix), without
/// allocating the encoding. A server can check [`Limits::response_fits`] with it.
///
/// # Errors
/// [`FrameError::Encode`] if the value cannot be encoded.
pub fn encoded_len<T: Serialize + ?Sized>(value: &T) -> Result<u64, FrameError> {
    struct Counter(u64);
    impl io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    ciborium::ser::into_writer(value, &mut counter)
        .map_err(|e| FrameError::Encode(e.to_string()))?;
    Ok(counter.0)
}

/// Encodes `value` as a whole frame (prefix + CBOR body).
///
/// # Errors
/// [`FrameError::TooLarge`] if the body is over `max` bytes (or `u32::MAX`),
/// [`FrameError::Encode`] if the value cannot be encoded.
pub fn encode_frame<T: Serialize + ?Sized>(value: &T, max: u64) -> Result<Vec<u8>, FrameError> {
    let mut buf = vec![0u8; PREFIX_BYTES];
    ciborium::ser::into_writer(value, &mut buf).map_err(|e| FrameError::Encode(e.to_string()))?;
    let len = (buf.len() - PREFIX_BYTES) as u64;
    let max = max.min(u64::from(u32::MAX));
    if len > max {
        return Err(FrameError::TooLarge { got: len, max });
    }
    let prefix = u32::try_from(len).map_err(|_| FrameError::TooLarge { got: len, max })?;
    buf[..PREFIX_BYTES].copy_from_slice(&prefix.to_be_bytes());
    Ok(buf)
}

/// Encodes `value` as a CBOR body without a prefix (what [`decode_body`] reads back;
/// the node keeps committed epoch responses this way).
///
/// # Errors
/// [`FrameError::Encode`] if the value cannot be encoded.
pub fn encode_body<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, FrameError> {
    let mut buf = Vec::new();
    ciborium::ser::into_writer(value, &mut buf).map_err(|e| FrameError::Encode(e.to_string()))?;
    Ok(buf)
}

/// Decodes one CBOR body (no prefix) as a `T`.
///
/// # Errors
/// [`FrameError::Malformed`] if it is not exactly one CBOR item of type `T`.
pub fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    let mut rest = body;
    let value =
        ciborium::de::from_reader(&mut rest).map_err(|e| FrameError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(FrameError::Malformed(format!(
            "{} bytes after the CBOR item",
            rest.len()
        )));
    }
    Ok(value)
}

/// Reads up to `buf.len()` bytes, stopping early only at the end of the stream.
async fn read_up_to<T: AsyncRead + Unpin>(io: &mut T, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match io.read(&mut buf[n..]).await {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Reads one frame body of at most `max` bytes from `io`.
///
/// The outer `Err` is a transport failure (the stream broke); the inner `Err` is a
/// bad frame ([`FrameError::TooLarge`]: the body was not read; or
/// [`FrameError::Truncated`]). Allocates at most the declared length, growing as bytes
/// arrive.
pub async fn read_frame<T: AsyncRead + Unpin>(
    io: &mut T,
    max: u64,
) -> io::Result<Result<Vec<u8>, FrameError>> {
    let mut prefix = [0u8; PREFIX_BYTES];
    let n = read_up_to(io, &mut prefix).await?;
    if n < PREFIX_BYTES {
        return Ok(Err(FrameError::Truncated {
            expected: PREFIX_BYTES as u64,
            got: n as u64,
        }));
    }
    let declared = u64::from(u32::from_be_bytes(prefix));
    if declared > max {
        return Ok(Err(FrameError::TooLarge { got: declared, max }));
    }
    // `declared` <= u32::MAX, which fits usize on the 32- and 64-bit targets we build.
    let len =
        usize::try_from(declared).map_err(|_| io::Error::other("frame length overflows usize"))?;
    let mut body: Vec<u8> = Vec::with_capacity(len.min(INITIAL_READ_CHUNK));
    while body.len() < len {
        if body.len() == body.capacity() {
            let target = (body.capacity() * 2).clamp(INITIAL_READ_CHUNK, len);
            body.reserve_exact(target - body.len());
        }
        let start = body.len();
        let end = body.capacity().min(len);
        body.resize(end, 0);
        let got = read_up_to(io, &mut body[start..end]).await?;
        body.truncate(start + got);
        if got < end - start {
            return Ok(Err(FrameError::Truncated {
                expected: declared,
                got: body.len() as u64,
            }));
        }
    }
    Ok(Ok(body))
}

/// Reads and drops the next `declared` bytes of `io` through a buffer of
/// [`DISCARD_CHUNK`] bytes (nothing is kept), stopping early at the end of the stream
/// or on a read error. Returns the number of bytes discarded.
async fn discard_body<T: AsyncRead + Unpin>(io: &mut T, declared: u64) -> u64 {
    let mut buf = [0u8; DISCARD_CHUNK];
    let mut discarded: u64 = 0;
    while discarded < declared {
        let want = usize::try_from(declared - discarded)
            .map_or(DISCARD_CHUNK, |left| left.min(DISCARD_CHUNK));
        match io.read(&mut buf[..want]).await {
            Ok(0) => break,
            Ok(n) => discarded += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::debug!(error = %e, discarded, "discarding an oversized request body stopped");
                break;
            }
        }
    }
    discarded
}

/// A fallback the server gives the codec: for a response whose body would be `len`
/// bytes, over the limit `max`, the (small) response to send instead, if any.
pub type OversizeFallback<Resp> = Arc<dyn Fn(u64, u64) -> Option<Resp> + Send + Sync>;

/// The `/dpor/1` codec for libp2p request-response: length-prefixed CBOR frames (see
/// the [module documentation](self)) with [`Limits`], generic over the message types.
///
/// Its request type is `Result<Req, FrameError>`: inbound requests that could not be
/// read arrive as `Err` instead of failing the stream, so the server can answer them.
/// Outbound requests must be `Ok` (writing an `Err` is an error).
///
/// libp2p clones the codec for every stream; the clone also keeps per-stream state
/// (a send error to report).
pub struct Codec<Req, Resp> {
    limits: Limits,
    oversize: Option<OversizeFallback<Resp>>,
    /// Client side, per stream: writing the request failed (the server may still have
    /// answered before resetting the stream).
    send_error: Option<String>,
    _types: PhantomData<fn() -> (Req, Resp)>,
}

impl<Req, Resp> Clone for Codec<Req, Resp> {
    fn clone(&self) -> Self {
        Self {
            limits: self.limits,
            oversize: self.oversize.clone(),
            send_error: self.send_error.clone(),
            _types: PhantomData,
        }
    }
}

impl<Req, Resp> fmt::Debug for Codec<Req, Resp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Codec")
            .field("limits", &self.limits)
            .field("oversize_fallback", &self.oversize.is_some())
            .finish_non_exhaustive()
    }
}

impl<Req, Resp> Default for Codec<Req, Resp> {
    /// A codec with the default [`Limits`] (8 MiB each way).
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl<Req, Resp> Codec<Req, Resp> {
    /// A codec enforcing `limits` (bytes of body) in both directions.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            oversize: None,
            send_error: None,
            _types: PhantomData,
        }
    }

    /// Sets the fallback for responses over [`Limits::max_response_bytes`]: called with
    /// (encoded length, limit) in bytes, it returns the response to send instead
    /// (typically an error response). Without one, or if it returns `None` or a
    /// response that is itself too large, writing fails and the client sees the stream
    /// end without a response.
    pub fn with_oversize_response(mut self, fallback: OversizeFallback<Resp>) -> Self {
        self.oversize = Some(fallback);
        self
    }

    /// The limits this codec enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }
}

impl<Req, Resp> Codec<Req, Resp>
where
    Resp: Serialize,
{
    /// The response frame to write: `res`, or the oversize fallback.
    fn response_frame(&self, res: &Resp) -> Result<Vec<u8>, FrameError> {
        let max = self.limits.max_response_bytes;
        match encode_frame(res, max) {
            Err(FrameError::TooLarge { got, max }) => {
                let fallback = self.oversize.as_ref().and_then(|f| f(got, max));
                match fallback {
                    Some(small) => {
                        tracing::warn!(
                            len = got,
                            max,
                            "response over the limit; sent the fallback response"
                        );
                        encode_frame(&small, max)
                    }
                    None => Err(FrameError::TooLarge { got, max }),
                }
            }
            other => other,
        }
    }
}

impl<Req, Resp> libp2p::request_response::Codec for Codec<Req, Resp>
where
    Req: Serialize + DeserializeOwned + Send + 'static,
    Resp: Serialize + DeserializeOwned + Send + 'static,
{
    type Protocol = StreamProtocol;
    type Request = Result<Req, FrameError>;
    type Response = Resp;

    async fn read_request<T>(&mut self, _: &Self::Protocol, io: &mut T) -> io::Result<Self::Request>
    where
        T: AsyncRead + Unpin + Send,
    {
        let frame = read_frame(io, self.limits.max_request_bytes).await?;
        if let Err(FrameError::TooLarge { got, .. }) = frame {
            // Let the client finish sending (it may read only once its request is
            // out) and drop what it sends; the answer follows.
            let discarded = discard_body(io, got).await;
            tracing::debug!(
                declared = got,
                discarded,
                "oversized request body discarded"
            );
        }
        Ok(frame.and_then(|body| decode_body(&body)))
    }

    async fn read_response<T>(
        &mut self,
        _: &Self::Protocol,
        io: &mut T,
    ) -> io::Result<Self::Response>
    where
        T: AsyncRead + Unpin + Send,
    {
        let frame = match read_frame(io, self.limits.max_response_bytes).await {
            Ok(frame) => frame,
            Err(e) => return Err(self.prefer_send_error(e)),
        };
        match frame.and_then(|body| decode_body(&body)) {
            Ok(response) => Ok(response),
            Err(e @ FrameError::Truncated { .. }) if self.send_error.is_some() => {
                Err(self.prefer_send_error(e.into_io()))
            }
            Err(e) => Err(e.into_io()),
        }
    }

    async fn write_request<T>(
        &mut self,
        _: &Self::Protocol,
        io: &mut T,
        req: Self::Request,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        let req = req.map_err(FrameError::into_io)?;
        let frame =
            encode_frame(&req, self.limits.max_request_bytes).map_err(FrameError::into_io)?;
        // If sending fails (the stream broke, or a server that stopped reading reset
        // it), a response may already be buffered: remember the error and still try
        // to read the response.
        let written = async {
            io.write_all(&frame).await?;
            io.flush().await
        }
        .await;
        if let Err(e) = written {
            tracing::debug!(error = %e, "writing the request failed; reading any response");
            self.send_error = Some(e.to_string());
        }
        Ok(())
    }

    async fn write_response<T>(
        &mut self,
        _: &Self::Protocol,
        io: &mut T,
        res: Self::Response,
    ) -> io::Result<()>
    where
        T: AsyncWrite + Unpin + Send,
    {
        let frame = self.response_frame(&res).map_err(FrameError::into_io)?;
        io.write_all(&frame).await?;
        io.flush().await?;
        Ok(())
    }
}

impl<Req, Resp> Codec<Req, Resp> {
    /// On the client, an error reading the response after writing the request failed
    /// is best explained by the write failure.
    fn prefer_send_error(&self, read_error: io::Error) -> io::Error {
        match &self.send_error {
            Some(send) => io::Error::new(
                read_error.kind(),
                format!("sending the request failed ({send}) and no response was received ({read_error})"),
            ),
            None => read_error,
        }
    }
}
