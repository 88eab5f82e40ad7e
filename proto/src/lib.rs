//! # dpor-proto
//!
//! The dpor wire protocol between owners, auditors and storage nodes, defined once:
//!
//! - [`messages`]: every request and response, their limits and errors (the
//!   specification is `docs/PROTOCOL.md`);
//! - [`codec`]: length-prefixed CBOR frames with size limits, as a libp2p
//!   request-response codec;
//! - [`net`]: the libp2p transport (TCP + Noise + Yamux): a server loop that hands
//!   each request to a handler, and a cheap client handle.

pub mod codec;
pub mod messages;
pub mod net;
