//! [`StoreError`]: every way a store operation can fail. A failed operation changes
//! nothing that a later [`super::Store::view`] or read can observe.

use dpor_core::block::BlockError;
use dpor_core::code::CodeError;
use dpor_core::digest::DigestError;
use dpor_core::merkle::MerkleError;
use dpor_core::state::{RunId, StateError};
use std::path::Path;
use thiserror::Error;

/// Errors of the storage engine.
#[derive(Debug, Error)]
pub enum StoreError {
    /// No deal with this id (or its upload was never begun).
    #[error("unknown deal {0}")]
    UnknownDeal(u64),
    /// The run is neither in the deal's current state nor in a pinned digest.
    #[error("deal {deal} has no run {run}")]
    UnknownRun {
        /// The deal.
        deal: u64,
        /// The run asked for.
        run: RunId,
    },
    /// The operation does not fit the deal's phase (e.g. a write before the upload
    /// finished, an upload restart of a live deal).
    #[error("wrong phase: {0}")]
    Phase(String),
    /// The request's owner is not the deal's owner.
    #[error("deal {deal} is owned by another address")]
    Owner {
        /// The deal.
        deal: u64,
    },
    /// Deal parameters out of range (N not a power of two in 1..=2^31, β not in
    /// 1..=1 MiB).
    #[error("invalid deal parameters: {0}")]
    Params(String),
    /// A nonce not above the deal's last accepted one.
    #[error("nonce {nonce} is not above the last accepted nonce {last}")]
    Replay {
        /// The nonce given.
        nonce: u64,
        /// The deal's last accepted nonce.
        last: u64,
    },
    /// A block index ≥ N.
    #[error("block index {index} is out of range (N = {num_blocks})")]
    Index {
        /// The index.
        index: u64,
        /// N.
        num_blocks: u64,
    },
    /// A data block that is not β bytes.
    #[error("block has {got} bytes, expected {expected}")]
    BlockSize {
        /// Bytes given.
        got: usize,
        /// β.
        expected: usize,
    },
    /// A bad range: `start + count` past `size`, a batch not starting where the upload
    /// stands, mismatched lengths, or more than the per-call cap.
    #[error("bad range: {0}")]
    Range(String),
    /// A digest version not above the last co-signed one.
    #[error("digest version {got} is not above the last co-signed version {last}")]
    StaleVersion {
        /// The version given.
        got: u64,
        /// The last co-signed version.
        last: u64,
    },
    /// A co-signature refused because [`super::meta::MAX_UNPOSTED_COSIGNS`] co-signed
    /// digests of the deal already wait to be posted on chain (each pins its runs).
    #[error(
        "deal {deal}: co-signed digests {versions:?} are not on chain yet, the most this node keeps; post the latest \
         (`dpor checkpoint` does) or let this node's chain agent post it, then ask again"
    )]
    Unposted {
        /// The deal.
        deal: u64,
        /// The versions waiting.
        versions: Vec<u64>,
    },
    /// The node could not sign (its key).
    #[error("signing: {0}")]
    Signing(String),
    /// A digest that does not describe the deal's current state.
    #[error("digest does not match the state: {0}")]
    DigestMismatch(String),
    /// The operation needs more bytes than the quota or the file system has left.
    /// Nothing was committed.
    #[error("disk full: need {needed} bytes, {available} available")]
    DiskFull {
        /// Bytes the operation needs.
        needed: u64,
        /// Bytes left (quota or file system, whichever is less).
        available: u64,
    },
    /// An I/O error, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What failed (operation and path).
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Metadata or a file on disk is unreadable or inconsistent.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// The deal is quarantined: [`super::Store::open`] found its files damaged (see
    /// [`super::DealView::damaged`]). What is intact is still served; this refuses
    /// what needs the damaged part (U reads when U is damaged, owner writes, resizes).
    #[error("deal {deal} is quarantined, its files on this node are damaged ({reason}); what is intact is still served (coded runs: `dpor extract`)")]
    Damaged {
        /// The deal.
        deal: u64,
        /// The damage found.
        reason: String,
    },
    /// The metadata database failed.
    #[error("metadata database: {0}")]
    Sled(#[from] sled::Error),
    /// A block's bytes were rejected by the core.
    #[error(transparent)]
    Block(#[from] BlockError),
    /// The code rejected a shape (an internal inconsistency).
    #[error(transparent)]
    Code(#[from] CodeError),
    /// A Merkle tree operation failed.
    #[error(transparent)]
    Merkle(#[from] MerkleError),
    /// A digest has a bad shape.
    #[error(transparent)]
    Digest(#[from] DigestError),
    /// A state operation failed.
    #[error(transparent)]
    State(#[from] StateError),
}

/// ENOSPC (no space left on device) on Linux.
const ENOSPC: i32 = 28;
/// EDQUOT (disk quota exceeded) on Linux.
const EDQUOT: i32 = 122;

impl StoreError {
    /// Wraps an I/O error with what was being done to `path`; a full disk becomes
    /// [`StoreError::DiskFull`] (with `needed` bytes and nothing known available).
    pub(crate) fn io(what: &str, path: &Path, needed: u64, source: std::io::Error) -> StoreError {
        match source.raw_os_error() {
            Some(ENOSPC) | Some(EDQUOT) => StoreError::DiskFull { needed, available: 0 },
            _ => StoreError::Io { context: format!("{what} {}", path.display()), source },
        }
    }
}

/// `Result` with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
