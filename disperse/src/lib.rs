//! # dpor-disperse
//!
//! Dispersal of one file over n dpor deals with n distinct providers (issue 12): the
//! owner side, *above* the single-deal flows (docs/ARCHITECTURE.md). Each deal holds
//! one **shard**; each shard is an ordinary dpor file, uploaded, written, checkpointed
//! and audited exactly as a single-provider deal is. This crate is the pure part: no
//! I/O, no async, no chain.
//!
//! - [`geometry`]: k-of-n, the block size β, where file block b lies (shard, stripe).
//! - [`coder`]: Reed–Solomon across shards, one stripe at a time (a stripe is the
//!   block at the same index in every shard): encode k data blocks into n − k parity
//!   blocks, decode the k data blocks from any k of the n, and update the parity blocks
//!   of a stripe when one data block is written, linearly in the change.
//! - [`manifest`]: which deal holds which shard (and its digest version), with a
//!   canonical byte encoding.
//! - [`policy`]: the owner's decisions: which providers get the shards, when a shard
//!   needs repair (shared by `dpor repair` / `dpor watch --repair` and the simulator).
//!
//! **Layout.** File block b (β bytes, the last one zero-padded) is data block
//! `b / k` of data shard `b mod k` (round-robin, as RAID-5): stripe s holds file blocks
//! s·k .. s·k + k − 1, so a sequential read walks all providers at once and decodes
//! stripe by stripe. Shards k .. n − 1 are parity. Every shard has ⌈⌈L/β⌉ / k⌉ blocks
//! (the single-deal upload pads each shard to a power of two as for any file).
//!
//! **The code.** `reed-solomon-simd` (Leopard-RS: a systematic MDS code over
//! GF(2^16), O(n log n) with runtime-detected AVX2/SSSE3/Neon). Any k of the n blocks
//! of a stripe give back the k data blocks.

pub mod coder;
pub mod geometry;
pub mod manifest;
pub mod policy;

pub use coder::{CodeError, StripeCoder};
pub use geometry::{Geometry, GeometryError, ShardIndex};
pub use manifest::{Manifest, ManifestError, ShardEntry};
