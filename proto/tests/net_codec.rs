//! Byte-level tests of the `/dpor/1` frame codec, on in-memory streams.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use dpor_proto::codec::{
    decode_body, encode_frame, encoded_len, Codec, FrameError, Limits, MAX_FRAME_BYTES, PROTOCOL,
};
use futures::executor::block_on;
use futures::io::Cursor;
use futures::AsyncRead;
use libp2p::request_response::Codec as RrCodec;
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

/// A reader over `data` that records how many bytes were read and the largest buffer
/// the codec offered it (the codec reads straight into its body buffer, so this bounds
/// what it had allocated for the body).
struct Probe {
    data: Vec<u8>,
    pos: usize,
    largest_buf: usize,
}

impl Probe {
    fn new(data: Vec<u8>) -> Self {
        Self {
            data,
            pos: 0,
            largest_buf: 0,
        }
    }
}

impl AsyncRead for Probe {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        self.largest_buf = self.largest_buf.max(buf.len());
        let n = buf.len().min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Poll::Ready(Ok(n))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Req {
    Echo(u64),
    Blob(#[serde(with = "serde_bytes")] Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Resp {
    Echo(u64),
    Blob(#[serde(with = "serde_bytes")] Vec<u8>),
    Error(String),
}

type C = Codec<Req, Resp>;

fn frame(body: &[u8]) -> Vec<u8> {
    let mut v = (body.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

fn read_request(codec: &mut C, bytes: Vec<u8>) -> (Result<Req, FrameError>, u64) {
    let mut io = Cursor::new(bytes);
    let out = block_on(codec.read_request(&PROTOCOL, &mut io)).expect("no transport error");
    (out, io.position())
}

#[test]
fn protocol_name_and_defaults() {
    assert_eq!(PROTOCOL.as_ref(), "/dpor/1");
    assert_eq!(MAX_FRAME_BYTES, 8 * 1024 * 1024);
    let l = Limits::default();
    assert_eq!(
        (l.max_request_bytes, l.max_response_bytes),
        (MAX_FRAME_BYTES, MAX_FRAME_BYTES)
    );
}

#[test]
fn request_and_response_round_trip() {
    let mut codec = C::default();
    let mut out = Cursor::new(Vec::new());
    block_on(codec.write_request(&PROTOCOL, &mut out, Ok(Req::Echo(42)))).unwrap();
    let bytes = out.into_inner();
    let body_len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
    assert_eq!(body_len, bytes.len() - 4);
    assert_eq!(encoded_len(&Req::Echo(42)).unwrap(), body_len as u64);
    assert_eq!(
        read_request(&mut C::default(), bytes),
        (Ok(Req::Echo(42)), 4 + body_len as u64)
    );

    let mut out = Cursor::new(Vec::new());
    let blob = Resp::Blob(vec![7; 100_000]);
    block_on(codec.write_response(&PROTOCOL, &mut out, blob.clone())).unwrap();
    let mut io = Cursor::new(out.into_inner());
    assert_eq!(
        block_on(C::default().read_response(&PROTOCOL, &mut io)).unwrap(),
        blob
    );
}

#[test]
fn malformed_cbor_is_malformed() {
    let (out, _) = read_request(&mut C::default(), frame(&[0xff, 0xff, 0xff]));
    assert!(matches!(out, Err(FrameError::Malformed(_))), "{out:?}");
    // Valid CBOR of the wrong shape.
    let body = encode_frame(&"hello", MAX_FRAME_BYTES).unwrap();
    let (out, _) = read_request(&mut C::default(), body);
    assert!(matches!(out, Err(FrameError::Malformed(_))), "{out:?}");
    // A valid request followed by trailing bytes.
    let mut body = encode_frame(&Req::Echo(1), MAX_FRAME_BYTES).unwrap()[4..].to_vec();
    body.push(0);
    let (out, _) = read_request(&mut C::default(), frame(&body));
    assert!(
        matches!(out, Err(FrameError::Malformed(ref m)) if m.contains("after")),
        "{out:?}"
    );
    // An empty body.
    let (out, _) = read_request(&mut C::default(), frame(&[]));
    assert!(matches!(out, Err(FrameError::Malformed(_))), "{out:?}");
}

#[test]
fn huge_length_prefix_is_too_large_and_its_body_is_discarded_not_kept() {
    // Declares 2 GiB, sends 1000 bytes and ends the stream.
    let mut bytes = (1u32 << 31).to_be_bytes().to_vec();
    bytes.extend_from_slice(&[0u8; 1000]);
    let mut codec = C::default();
    let mut probe = Probe::new(bytes);
    let out = block_on(codec.read_request(&PROTOCOL, &mut probe)).unwrap();
    assert_eq!(
        out,
        Err(FrameError::TooLarge {
            got: 1 << 31,
            max: MAX_FRAME_BYTES
        })
    );
    assert_eq!(
        probe.pos, 1004,
        "the body sent is read to the end of the stream"
    );
    assert!(
        probe.largest_buf <= 8 * 1024,
        "no body buffer: {}",
        probe.largest_buf
    );
    // The response is written whole, and the stream ends normally.
    let mut out = Cursor::new(Vec::new());
    block_on(codec.write_response(&PROTOCOL, &mut out, Resp::Error("too large".into()))).unwrap();
    let mut io = Cursor::new(out.into_inner());
    assert_eq!(
        block_on(C::default().read_response(&PROTOCOL, &mut io)).unwrap(),
        Resp::Error("too large".into())
    );

    // Declares 100 000 bytes over a limit of 100, sends them and more: exactly the
    // declared body is discarded, in small reads, nothing past it.
    let small = Limits {
        max_request_bytes: 100,
        max_response_bytes: 100,
    };
    let mut bytes = 100_000u32.to_be_bytes().to_vec();
    bytes.resize(4 + 100_000 + 500, 7);
    let mut probe = Probe::new(bytes);
    let out = block_on(C::new(small).read_request(&PROTOCOL, &mut probe)).unwrap();
    assert_eq!(
        out,
        Err(FrameError::TooLarge {
            got: 100_000,
            max: 100
        })
    );
    assert_eq!(probe.pos, 4 + 100_000);
    assert!(
        probe.largest_buf <= 8 * 1024,
        "no body buffer: {}",
        probe.largest_buf
    );
}

#[test]
fn declared_length_is_allocated_only_as_bytes_arrive() {
    // Declares the full 8 MiB but sends 10 bytes.
    let mut bytes = (MAX_FRAME_BYTES as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&[0u8; 10]);
    let mut probe = Probe::new(bytes);
    let out = block_on(C::default().read_request(&PROTOCOL, &mut probe)).unwrap();
    assert_eq!(
        out,
        Err(FrameError::Truncated {
            expected: MAX_FRAME_BYTES,
            got: 10
        })
    );
    assert!(
        probe.largest_buf <= 64 * 1024,
        "body buffer of {} bytes",
        probe.largest_buf
    );

    // A full 8 MiB body is read into buffers growing to exactly the declared length.
    let body = encode_frame(&Req::Blob(vec![5; 8 * 1024 * 1024 - 16]), MAX_FRAME_BYTES).unwrap();
    let declared = body.len() - 4;
    let mut probe = Probe::new(body);
    let out = block_on(C::default().read_request(&PROTOCOL, &mut probe)).unwrap();
    assert!(matches!(out, Ok(Req::Blob(ref b)) if b.len() == 8 * 1024 * 1024 - 16));
    assert!(
        probe.largest_buf <= declared / 2 + 1,
        "grows by doubling, never past {declared}"
    );
}

#[test]
fn limit_is_configurable_and_inclusive() {
    let body = encode_frame(&Req::Blob(vec![1; 1000]), MAX_FRAME_BYTES).unwrap();
    let len = (body.len() - 4) as u64;
    let limits = |max| Limits {
        max_request_bytes: max,
        max_response_bytes: max,
    };
    let (out, _) = read_request(&mut C::new(limits(len)), body.clone());
    assert_eq!(out, Ok(Req::Blob(vec![1; 1000])));
    let (out, _) = read_request(&mut C::new(limits(len - 1)), body);
    assert_eq!(
        out,
        Err(FrameError::TooLarge {
            got: len,
            max: len - 1
        })
    );
}

#[test]
fn truncated_prefix_and_body() {
    let (out, _) = read_request(&mut C::default(), vec![0, 0]);
    assert_eq!(
        out,
        Err(FrameError::Truncated {
            expected: 4,
            got: 2
        })
    );
    let (out, _) = read_request(&mut C::default(), vec![]);
    assert_eq!(
        out,
        Err(FrameError::Truncated {
            expected: 4,
            got: 0
        })
    );
    let mut bytes = encode_frame(&Req::Blob(vec![9; 500]), MAX_FRAME_BYTES).unwrap();
    let full = bytes.len() as u64 - 4;
    bytes.truncate(200);
    let (out, _) = read_request(&mut C::default(), bytes);
    assert_eq!(
        out,
        Err(FrameError::Truncated {
            expected: full,
            got: 196
        })
    );
}

#[test]
fn oversized_outbound_messages_are_sender_errors() {
    let small = Limits {
        max_request_bytes: 100,
        max_response_bytes: 100,
    };
    let mut codec = C::new(small);
    let mut out = Cursor::new(Vec::new());
    let err = block_on(codec.write_request(&PROTOCOL, &mut out, Ok(Req::Blob(vec![0; 200]))))
        .unwrap_err();
    assert!(
        matches!(
            FrameError::from_io(&err),
            Some(FrameError::TooLarge { max: 100, .. })
        ),
        "{err}"
    );
    let err =
        block_on(codec.write_response(&PROTOCOL, &mut out, Resp::Blob(vec![0; 200]))).unwrap_err();
    assert!(
        matches!(
            FrameError::from_io(&err),
            Some(FrameError::TooLarge { max: 100, .. })
        ),
        "{err}"
    );
    assert!(out.into_inner().is_empty(), "nothing is written");

    // With a fallback the server sends the fallback instead.
    let mut codec = C::new(small).with_oversize_response(Arc::new(|len, max| {
        Some(Resp::Error(format!("{len}>{max}")))
    }));
    let mut out = Cursor::new(Vec::new());
    block_on(codec.write_response(&PROTOCOL, &mut out, Resp::Blob(vec![0; 200]))).unwrap();
    let mut io = Cursor::new(out.into_inner());
    let got = block_on(C::new(small).read_response(&PROTOCOL, &mut io)).unwrap();
    assert!(
        matches!(got, Resp::Error(ref m) if m.ends_with(">100")),
        "{got:?}"
    );
}

#[test]
fn bad_responses_are_client_errors() {
    let small = Limits {
        max_request_bytes: 100,
        max_response_bytes: 100,
    };
    let big = encode_frame(&Resp::Blob(vec![0; 200]), MAX_FRAME_BYTES).unwrap();
    let err = block_on(C::new(small).read_response(&PROTOCOL, &mut Cursor::new(big))).unwrap_err();
    assert!(
        matches!(FrameError::from_io(&err), Some(FrameError::TooLarge { .. })),
        "{err}"
    );
    let err = block_on(C::default().read_response(&PROTOCOL, &mut Cursor::new(frame(&[0xff]))))
        .unwrap_err();
    assert!(
        matches!(FrameError::from_io(&err), Some(FrameError::Malformed(_))),
        "{err}"
    );
    let err =
        block_on(C::default().read_response(&PROTOCOL, &mut Cursor::new(vec![0, 0, 0, 9, 1])))
            .unwrap_err();
    assert!(
        matches!(
            FrameError::from_io(&err),
            Some(FrameError::Truncated {
                expected: 9,
                got: 1
            })
        ),
        "{err}"
    );
}

#[test]
fn writing_an_err_request_fails() {
    let mut out = Cursor::new(Vec::new());
    let err = block_on(C::default().write_request(
        &PROTOCOL,
        &mut out,
        Err(FrameError::Malformed("x".into())),
    ));
    assert!(err.is_err());
}

#[test]
fn frame_errors_read_clearly() {
    let e = FrameError::TooLarge {
        got: 9 << 20,
        max: 8 << 20,
    };
    assert_eq!(
        e.to_string(),
        "message too large: 9437184 bytes, the limit is 8388608 bytes"
    );
    assert_eq!(
        decode_body::<Req>(&[0xff])
            .unwrap_err()
            .to_string()
            .split(':')
            .next(),
        Some("malformed message")
    );
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = read_request(&mut C::default(), bytes.clone());
        let _ = read_request(&mut C::default(), frame(&bytes));
        let _ = block_on(C::default().read_response(&PROTOCOL, &mut Cursor::new(frame(&bytes))));
    }

    #[test]
    fn encoded_frames_decode(n in any::<u64>(), blob in proptest::collection::vec(any::<u8>(), 0..2000)) {
        for req in [Req::Echo(n), Req::Blob(blob.clone())] {
            let bytes = encode_frame(&req, MAX_FRAME_BYTES).unwrap();
            prop_assert_eq!(encoded_len(&req).unwrap(), bytes.len() as u64 - 4);
            prop_assert_eq!(read_request(&mut C::default(), bytes).0, Ok(req));
        }
    }
}
