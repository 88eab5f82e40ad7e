//! Every message between an owner or auditor (the client) and a storage node (the
//! server), protocol `/dpor/1` ([`crate::codec::PROTOCOL`]). This module is the
//! specification; `docs/PROTOCOL.md` walks through the flows that use it.
//!
//! A connection carries independent request/response pairs (libp2p request-response,
//! one Yamux stream each), each a CBOR frame of at most [`crate::codec::MAX_FRAME_BYTES`]
//! (see [`crate::codec`]). Bulk data moves in batches of at most [`MAX_BATCH_BYTES`]
//! of payload; the node refuses a request whose answer would be larger
//! ([`ErrorCode::TooLarge`]).
//!
//! Two kinds of requests:
//!
//! - **Public** reads ([`Request::Status`], [`Request::Read`], [`Request::UPath`], [`Request::UPaths`], [`Request::Download`],
//!   [`Request::ULeaves`], [`Request::Samples`], [`Request::Coded`],
//!   [`Request::RunLeaves`], [`Request::Sealed`], [`Request::SecretAudit`]): anyone may ask; everything returned is
//!   checked by the asker against roots it trusts (its own, or a digest posted on chain).
//!   Coded blocks reveal the data anyway (any half of a run decodes), so data privacy
//!   is the owner's to add by encrypting the file; the scheme protects integrity and
//!   retrievability.
//! - **Owner** operations ([`Request::Owner`] carrying a [`Signed`] [`OwnerOp`]): signed by
//!   the deal's owner key (the Ethereum account that opened the deal on chain) over
//!   [`owner_request_hash`], with a per-deal nonce that must strictly increase (a
//!   replayed or reordered request is refused, [`ErrorCode::Replay`]).
//!
//! Every failure is a [`Response::Error`] with a [`ErrorCode`] and a human message; the
//! connection stays open and nothing is stored.

use alloy_primitives::{keccak256, Address, B256};
use dpor_core::digest::Digest;
use dpor_core::state::WriteStep;
use dpor_core::{RunId, RunTag};
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

/// Most payload bytes (blocks, hashes, checksums) one request or response carries:
/// 4 MiB. Clients split bulk transfers into batches of this size; the frame limit
/// ([`crate::codec::MAX_FRAME_BYTES`], 8 MiB) leaves room for the encoding.
pub const MAX_BATCH_BYTES: u64 = 4 << 20;

/// Domain of the owner request hash ([`owner_request_hash`]).
pub const OWNER_REQUEST_DOMAIN: &[u8] = b"dpor.owner-request.v2";

/// Segment length of [`op_hash`]: 8 KiB.
pub const OP_SEGMENT_BYTES: usize = 8 << 10;

/// How many items of `item_bytes` bytes each fit in one batch (at least 1).
pub fn batch_len(item_bytes: u64) -> u64 {
    (MAX_BATCH_BYTES / item_bytes.max(1)).max(1)
}

/// A run's name on the wire: the tag (C = 0, level ℓ = ℓ + 1) and the build time in
/// total writes ([`RunId`]; computed from any digest by `Digest::run_ids`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WireRun {
    /// Run tag: 0 for C, ℓ + 1 for level ℓ of H.
    pub tag: u32,
    /// Total writes (rebuilds·N + t) when the run was built.
    pub built_at: u64,
}

impl From<RunId> for WireRun {
    fn from(r: RunId) -> Self {
        Self { tag: r.tag.0, built_at: r.built_at }
    }
}

impl From<WireRun> for RunId {
    fn from(r: WireRun) -> Self {
        RunId { tag: RunTag(r.tag), built_at: r.built_at }
    }
}

/// A digest (ENCODING.md §5) on the wire: the same fields as the EIP-712 struct.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireDigest {
    /// The deal id.
    pub deal: u64,
    /// Strictly increasing version.
    pub version: u64,
    /// N, blocks (a power of two).
    pub num_blocks: u64,
    /// t, writes since the last C-rebuild.
    pub write_count: u64,
    /// C-rebuilds so far.
    pub rebuild_count: u64,
    /// Root of U's tree.
    pub root_u: B256,
    /// Root of C's tree.
    pub root_c: B256,
    /// Roots of the filled levels, ascending ℓ.
    pub level_roots: Vec<B256>,
}

impl From<&Digest> for WireDigest {
    fn from(d: &Digest) -> Self {
        Self {
            deal: d.dealId.saturating_to(),
            version: d.version,
            num_blocks: d.numBlocks,
            write_count: d.writeCount,
            rebuild_count: d.rebuildCount,
            root_u: d.rootU,
            root_c: d.rootC,
            level_roots: d.levelRoots.clone(),
        }
    }
}

impl From<&WireDigest> for Digest {
    fn from(d: &WireDigest) -> Self {
        Digest {
            dealId: alloy_primitives::U256::from(d.deal),
            version: d.version,
            numBlocks: d.num_blocks,
            writeCount: d.write_count,
            rebuildCount: d.rebuild_count,
            rootU: d.root_u,
            rootC: d.root_c,
            levelRoots: d.level_roots.clone(),
        }
    }
}

/// A request from a client to a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Public: the node's view of a deal. Answer: [`Response::Status`].
    Status {
        /// The deal.
        deal: u64,
    },
    /// Public: [`Request::Status`] once every run of the deal's current state is built:
    /// the node first finishes the builds it deferred (deamortized rebuilds, §6.1;
    /// docs/SCHEME.md §10.3), whose roots read zero in a plain `Status`. What the owner
    /// asks before it checks those runs or signs a digest. Answer: [`Response::Status`].
    Built {
        /// The deal.
        deal: u64,
    },
    /// Public: Read(i) (§6): U's block `index` with σ̃_U and its U path. Answer:
    /// [`Response::Block`].
    Read {
        /// The deal.
        deal: u64,
        /// Block index, < N.
        index: u64,
    },
    /// Public: U's leaf parts (block root, σ̃_U) and path for `index`, without the
    /// block: what the owner needs before a write (§5.4 step 1) to compute the new
    /// rootU itself. Answer: [`Response::UPath`].
    UPath {
        /// The deal.
        deal: u64,
        /// Block index, < N.
        index: u64,
    },
    /// Public: [`Request::UPath`] for several indices at once, from one snapshot of the
    /// node's state (before a batch of writes). At most [`batch_len`]`(32·(k + 3))`
    /// indices. Answer: [`Response::UPaths`].
    UPaths {
        /// The deal.
        deal: u64,
        /// Block indices, each < N (in any order; repeats allowed).
        indices: Vec<u64>,
    },
    /// Public: `count` raw blocks of U from `start` (download). Answer:
    /// [`Response::Blocks`]. `count · β ≤` [`MAX_BATCH_BYTES`].
    Download {
        /// The deal.
        deal: u64,
        /// First index.
        start: u64,
        /// Blocks.
        count: u64,
    },
    /// Public: U's leaves' parts (block root, σ̃_U) for `count` indices from `start`,
    /// so the owner can check σ̃_U against rootU before a C-rebuild check. Answer:
    /// [`Response::ULeaves`].
    ULeaves {
        /// The deal.
        deal: u64,
        /// First index.
        start: u64,
        /// Leaves (`64·count ≤` [`MAX_BATCH_BYTES`]).
        count: u64,
    },
    /// Public: coded blocks of a run at `positions`, each with its run path (audits
    /// and owner spot-checks). Answer: [`Response::Samples`], in the order asked.
    Samples {
        /// The deal.
        deal: u64,
        /// The run (must be live: current, co-signed, posted or disputed).
        run: WireRun,
        /// Positions, each < the run's size.
        positions: Vec<u64>,
    },
    /// Public: `count` raw coded blocks of a run from `start`, without paths (for
    /// extraction; check them against [`Request::RunLeaves`]). Answer: [`Response::Coded`].
    Coded {
        /// The deal.
        deal: u64,
        /// The run.
        run: WireRun,
        /// First position.
        start: u64,
        /// Blocks.
        count: u64,
    },
    /// Public: `count` leaves of a run's tree from `start`. Answer: [`Response::RunLeaves`].
    RunLeaves {
        /// The deal.
        deal: u64,
        /// The run.
        run: WireRun,
        /// First position.
        start: u64,
        /// Leaves.
        count: u64,
    },
    /// Public: the owner's stored σ̃ for `count` positions of a run from `start`.
    /// Answer: [`Response::Sealed`].
    Sealed {
        /// The deal.
        deal: u64,
        /// The run.
        run: WireRun,
        /// First position.
        start: u64,
        /// Entries.
        count: u64,
    },
    /// Public: what became of the owner request with nonce `nonce` (crash recovery,
    /// `docs/PROTOCOL.md` "Recovery"). Answer: [`Response::Outcome`]. An owner whose
    /// request got no answer asks this before anything else, and verifies an
    /// [`WireOutcome::Applied`] answer exactly as if it were the reply.
    Outcome {
        /// The deal.
        deal: u64,
        /// The nonce of the owner request in question.
        nonce: u64,
    },
    /// Public: the owner's compact secret audit (§5.5, `dpor_core::secret_audit`). For
    /// each run the node derives the challenge from `seed` (λ positions and non-zero
    /// coefficients, `dpor_core::secret_audit::challenge`) and answers one aggregated
    /// coded block Σ r_j·B_{p_j} plus, if `sealed`, the stored σ̃ of the sampled
    /// positions. Answer: [`Response::SecretAudit`], runs in the order asked. Anyone may
    /// ask (nothing secret is returned: coded blocks and σ̃ are public reads), but only
    /// the owner can check the answer. `λ ≤ dpor_core::secret_audit::MAX_SECRET_LAMBDA`;
    /// the answer must fit [`MAX_BATCH_BYTES`] (`runs · (8·s + 34·λ)`), else
    /// [`ErrorCode::TooLarge`]: ask for fewer runs per request.
    SecretAudit {
        /// The deal.
        deal: u64,
        /// The owner's fresh 32-byte challenge seed.
        seed: B256,
        /// λ, samples per run (runs of ≤ λ blocks are sampled whole).
        lambda: u32,
        /// The runs (each must be live, as for [`Request::Samples`]).
        runs: Vec<SecretRunAsk>,
    },
    /// Public: the response the node committed for `deal`'s deal epoch `epoch` in its
    /// epoch commitment (docs/COMMITMENTS.md §6): the whole sampled coded blocks with
    /// their run paths, the digest version they are bound to, and the entry's leaf index
    /// and path in the commitment. Kept until the epoch's challenge window closes.
    /// Answer: [`Response::EpochResponse`]; [`ErrorCode::NotFound`] if the node did not
    /// commit that epoch (or no longer keeps it). Watchers check it with
    /// `dpor_core::commitment::verify_entry` and the run paths, and challenge on chain
    /// what is missing or wrong.
    EpochResponse {
        /// The deal.
        deal: u64,
        /// The deal epoch (0-based).
        epoch: u64,
    },
    /// An owner operation, signed.
    Owner(Signed),
}

/// One sample of a committed epoch response: a whole coded block and its run path,
/// as in the on-chain `BlockProof` (ENCODING §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireBlockProof {
    /// Run tag (0 = C, ℓ + 1 = level ℓ).
    pub run_tag: u8,
    /// Position in the run.
    pub position: u64,
    /// The whole coded block (8·(1 + ⌈β/7⌉) bytes).
    pub block: ByteBuf,
    /// Its run path, leaf to root (log2 of the run's size hashes).
    pub run_path: Vec<B256>,
}

/// A committed epoch response (docs/COMMITMENTS.md §1, §6): what the node answers a
/// challenge with on chain, and serves to anyone off chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireEpochResponse {
    /// The deal.
    pub deal: u64,
    /// The deal epoch (0-based).
    pub epoch: u64,
    /// The global epoch g of the commitment (the deal's startEpoch + epoch).
    pub global_epoch: u64,
    /// Version of the digest in force at the epoch's start.
    pub version: u64,
    /// The commitment's root, as posted by `commitEpoch`.
    pub root: B256,
    /// The commitment's leaf count, as posted.
    pub leaf_count: u32,
    /// This entry's leaf index (entries sorted by deal id).
    pub leaf_index: u64,
    /// The leaf's path, leaf to root.
    pub leaf_path: Vec<B256>,
    /// The K samples in order j = 0..K-1.
    pub proofs: Vec<WireBlockProof>,
}

/// One run of a [`Request::SecretAudit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretRunAsk {
    /// The run.
    pub run: WireRun,
    /// Return the σ̃ of the sampled positions (false when the owner caches the run's σ).
    pub sealed: bool,
}

/// The node's answer for one run of a [`Request::SecretAudit`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretRunProof {
    /// The run.
    pub run: WireRun,
    /// Σ r_j·B_{p_j}, a coded block (8·s bytes); **empty** if the node could not read
    /// a sampled block (a damaged run: the owner counts the run as failed).
    pub aggregate: ByteBuf,
    /// The stored σ̃ of each sampled position, in challenge order (`None` where none is
    /// stored); empty if not asked.
    pub sealed: Vec<Option<B256>>,
}

impl Request {
    /// A short name for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Status { .. } => "status",
            Request::Built { .. } => "built",
            Request::Read { .. } => "read",
            Request::UPath { .. } => "u-path",
            Request::UPaths { .. } => "u-paths",
            Request::Download { .. } => "download",
            Request::ULeaves { .. } => "u-leaves",
            Request::Samples { .. } => "samples",
            Request::Coded { .. } => "coded",
            Request::RunLeaves { .. } => "run-leaves",
            Request::Sealed { .. } => "sealed",
            Request::Outcome { .. } => "outcome",
            Request::SecretAudit { .. } => "secret-audit",
            Request::EpochResponse { .. } => "epoch-response",
            Request::Owner(_) => "owner",
        }
    }
}

/// An owner operation with its authentication.
///
/// `op` is the CBOR encoding of an [`OwnerOp`], carried as bytes so that the node
/// checks the signature over exactly the bytes the owner signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signed {
    /// The deal.
    pub deal: u64,
    /// Strictly greater than the last nonce the node accepted for this deal.
    pub nonce: u64,
    /// CBOR of the [`OwnerOp`].
    pub op: ByteBuf,
    /// 65-byte ECDSA signature (r ‖ s ‖ v) by the deal's owner over
    /// [`owner_request_hash`].
    pub signature: ByteBuf,
    /// The blocks of an op that names them by their block roots
    /// ([`OwnerOp::UploadByRoots`], [`OwnerOp::WriteBatchByRoots`]), in the op's order,
    /// β bytes each: outside the signature, bound to it by their roots (the node
    /// hashes each block's chunk tree, which it needs for U anyway, and refuses the
    /// request unless every root matches; issue 23 #3). Empty for every other op (the
    /// node refuses blocks there), and absent from the encoding when empty, so a
    /// request of an older client encodes as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<ByteBuf>,
}

/// The hash an owner signs for a request: keccak256 of
/// `"dpor.owner-request.v2" ‖ u64be(chain id) ‖ market address (20 bytes) ‖ u64be(deal)
/// ‖ u64be(nonce) ‖ op_hash(op bytes)` ([`op_hash`]). Binding the chain and the market
/// stops a request from being replayed against another deployment; the nonce, within one.
pub fn owner_request_hash(chain_id: u64, market: Address, deal: u64, nonce: u64, op: &[u8]) -> B256 {
    let mut buf = Vec::with_capacity(OWNER_REQUEST_DOMAIN.len() + 8 + 20 + 8 + 8 + 32);
    buf.extend_from_slice(OWNER_REQUEST_DOMAIN);
    buf.extend_from_slice(&chain_id.to_be_bytes());
    buf.extend_from_slice(market.as_slice());
    buf.extend_from_slice(&deal.to_be_bytes());
    buf.extend_from_slice(&nonce.to_be_bytes());
    buf.extend_from_slice(op_hash(op).as_slice());
    keccak256(&buf)
}

/// The hash of a request's op bytes inside [`owner_request_hash`]: keccak256 of the
/// concatenated keccak256 of each [`OP_SEGMENT_BYTES`]-byte segment of `op` (the last
/// one shorter; no segment at all for an empty `op`), i.e. keccak256(keccak256(s₀) ‖
/// keccak256(s₁) ‖ …). One sponge over a batch's 2 MiB took ≈ 4 % of a batched write's
/// CPU on each side (issue 23); the segments are hashed in SIMD lanes
/// ([`dpor_keccak::keccak256_many`]) on every core, which a sponge cannot be
/// (docs/PROTOCOL.md, "The signed hash").
pub fn op_hash(op: &[u8]) -> B256 {
    use rayon::prelude::*;
    /// Segments per task: 512 KiB, enough to fill the lanes many times over.
    const PER_TASK: usize = 64;
    let segments: Vec<&[u8]> = op.chunks(OP_SEGMENT_BYTES).collect();
    let mut hashes = vec![[0u8; 32]; segments.len()];
    if segments.len() <= PER_TASK {
        dpor_keccak::keccak256_many(&segments, &mut hashes);
    } else {
        hashes
            .par_chunks_mut(PER_TASK)
            .zip(segments.par_chunks(PER_TASK))
            .for_each(|(out, inputs)| dpor_keccak::keccak256_many(inputs, out));
    }
    keccak256(hashes.concat())
}

/// What an owner asks a node to do (§6). Each is carried inside a [`Signed`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OwnerOp {
    /// Init: start (or restart) the upload of a deal's file: N blocks of β bytes; both
    /// must match the deal on chain. Answer: [`Response::Accepted`].
    UploadBegin {
        /// N (a power of two).
        num_blocks: u64,
        /// β, bytes per block.
        block_bytes: u32,
    },
    /// Init: the next blocks of U, in order (`start` = blocks received so far), each β
    /// bytes, with their σ̃_U. Answer: [`Response::Accepted`].
    UploadBlocks {
        /// Index of the first block.
        start: u64,
        /// The blocks.
        blocks: Vec<ByteBuf>,
        /// σ̃_U of each block (32 bytes each).
        sealed_u: Vec<B256>,
    },
    /// Init, signed over block roots (issue 23 #3): as [`OwnerOp::UploadBlocks`], but
    /// the op names each block by its block root (`merkle::block_root`, the root of its
    /// chunk tree) and the blocks travel in [`Signed::blocks`]. The signed hash then
    /// covers 64 bytes per block instead of β; both sides hash every block's chunk
    /// tree anyway (the owner for rootU, the node for U's leaves). Answer:
    /// [`Response::Accepted`].
    UploadByRoots {
        /// Index of the first block.
        start: u64,
        /// The block root of each block, in order.
        roots: Vec<B256>,
        /// σ̃_U of each block (32 bytes each).
        sealed_u: Vec<B256>,
    },
    /// Init: all N blocks are in; build U's tree, C and C's tree. Answer:
    /// [`Response::Committed`].
    UploadFinish,
    /// Write(i, B) (§5.4): U[i] = B, then HAdd (or the C-rebuild on the N-th write).
    /// Answer: [`Response::Written`].
    Write {
        /// Block index, < N.
        index: u64,
        /// The new block, β bytes.
        block: ByteBuf,
        /// Its σ̃_U.
        sealed_u: B256,
    },
    /// A batch of writes (issue 11 #1): each `(i, B, σ̃_U)` in order, exactly as that
    /// many [`OwnerOp::Write`]s, committed atomically and durably once. At most
    /// [`batch_len`]`(β + 48)` writes (the payload limit). Answer:
    /// [`Response::WrittenBatch`].
    WriteBatch {
        /// The writes, in order (an index may repeat: the last value stays in U).
        writes: Vec<WireWrite>,
    },
    /// A batch of writes signed over block roots (issue 23 #3): as
    /// [`OwnerOp::WriteBatch`], each write `(i, block root, σ̃_U)`, the blocks in
    /// [`Signed::blocks`] in the same order. Same limit and answer
    /// ([`Response::WrittenBatch`]).
    WriteBatchByRoots {
        /// The writes, in order (an index may repeat: the last value stays in U).
        writes: Vec<WireWriteRoot>,
    },
    /// Store the owner's σ̃ for positions `start..` of a live run. Answer:
    /// [`Response::Accepted`].
    StoreSealed {
        /// The run.
        run: WireRun,
        /// First position.
        start: u64,
        /// σ̃ per position.
        sealed: Vec<B256>,
    },
    /// Co-sign a checkpoint digest: the node signs it (EIP-712) if it describes exactly
    /// its current state, its version is above any it signed, and `owner_signature`
    /// is the deal owner's signature over the same EIP-712 digest hash. The node keeps
    /// both signatures, so it can post the digest itself (issue 22: the owner cannot
    /// post an older co-signed state once the node posted a newer one), and keeps the
    /// runs of every co-signed digest not posted yet. Answer: [`Response::Cosigned`].
    Cosign {
        /// The digest.
        digest: WireDigest,
        /// The owner's 65-byte ECDSA signature (r ‖ s ‖ v) over the digest's EIP-712
        /// hash, exactly what `postDigest` takes as `ownerSig`. Absent from requests
        /// of older clients (decoded as empty): the node refuses those
        /// ([`ErrorCode::Unauthorized`]).
        #[serde(default)]
        owner_signature: ByteBuf,
    },
    /// Resize (App. A.3; docs/SCHEME.md §10.5): N becomes `num_blocks` (another power
    /// of two); U keeps its first min(N, N') blocks, new blocks are zero with σ̃ =
    /// `ZERO_BLOCK_U`; C is rebuilt for N' and H emptied. Answer: [`Response::Written`]
    /// (step C-rebuild, the new C, the new rootU).
    Resize {
        /// N', blocks.
        num_blocks: u64,
    },
    /// Co-sign a resize for `resizeDeal` (docs/CONTRACTS.md, "Resizing"): the node
    /// signs the EIP-712 `Resize` (the digest, the new price per epoch and collateral)
    /// if the digest describes exactly its current state (as [`OwnerOp::Cosign`]),
    /// the digest's N differs from the deal's N on chain, the price is at least its
    /// ask and the collateral at most its rate for N' blocks (wei). Answer:
    /// [`Response::Cosigned`].
    CosignResize {
        /// The first digest to post at the new size (the node's current state).
        digest: WireDigest,
        /// New price per epoch, wei.
        price_per_epoch: u128,
        /// New collateral, wei.
        collateral: u128,
    },
}

impl OwnerOp {
    /// CBOR bytes of the op (what [`Signed::op`] carries).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Serializing plain data into a Vec cannot fail.
        let _ = ciborium::into_writer(self, &mut out);
        out
    }

    /// Parses [`Signed::op`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        ciborium::from_reader(bytes).map_err(|e| e.to_string())
    }

    /// A short name for logs and metrics' `kind` label: an op signed over block roots
    /// has the name of the op it stands for (`upload-blocks`, `write-batch`), so
    /// dashboards and alerts keep counting the same operations.
    pub fn kind(&self) -> &'static str {
        match self {
            OwnerOp::UploadBegin { .. } => "upload-begin",
            OwnerOp::UploadBlocks { .. } | OwnerOp::UploadByRoots { .. } => "upload-blocks",
            OwnerOp::WriteBatchByRoots { .. } => "write-batch",
            OwnerOp::UploadFinish => "upload-finish",
            OwnerOp::Write { .. } => "write",
            OwnerOp::WriteBatch { .. } => "write-batch",
            OwnerOp::Resize { .. } => "resize",
            OwnerOp::CosignResize { .. } => "cosign-resize",
            OwnerOp::StoreSealed { .. } => "store-sealed",
            OwnerOp::Cosign { .. } => "cosign",
        }
    }
}

/// One write of an [`OwnerOp::WriteBatch`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireWrite {
    /// Block index, < N.
    pub index: u64,
    /// The new block, β bytes.
    pub block: ByteBuf,
    /// Its σ̃_U.
    pub sealed_u: B256,
}

/// One write of an [`OwnerOp::WriteBatchByRoots`]: its block travels in
/// [`Signed::blocks`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireWriteRoot {
    /// Block index, < N.
    pub index: u64,
    /// The new block's block root (`merkle::block_root`).
    pub root: B256,
    /// Its σ̃_U.
    pub sealed_u: B256,
}

/// A coded block with its run path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireSample {
    /// Position in the run.
    pub position: u64,
    /// The coded block (8·s bytes).
    pub block: ByteBuf,
    /// Its run path, leaf to root.
    pub path: Vec<B256>,
}

/// Upload progress of a deal on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WirePhase {
    /// Blocks `0..received` are in.
    Uploading {
        /// Blocks received.
        received: u64,
    },
    /// Uploaded: C is built and the deal serves reads, writes and audits.
    Live,
}

/// What a write rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireStep {
    /// HAdd filled this level (emptying the levels below).
    Level(u32),
    /// The N-th write since the last rebuild: C ← encode(U), H emptied.
    CRebuild,
}

impl From<WriteStep> for WireStep {
    fn from(s: WriteStep) -> Self {
        match s {
            WriteStep::Level(l) => WireStep::Level(l),
            WriteStep::CRebuild => WireStep::CRebuild,
        }
    }
}

/// The node's view of a deal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DealStatus {
    /// The deal.
    pub deal: u64,
    /// Upload progress.
    pub phase: WirePhase,
    /// N.
    pub num_blocks: u64,
    /// β in bytes.
    pub block_bytes: u32,
    /// The last owner nonce accepted.
    pub last_nonce: u64,
    /// t.
    pub write_count: u64,
    /// C-rebuilds so far.
    pub rebuild_count: u64,
    /// rootU.
    pub root_u: B256,
    /// C's name and root.
    pub c: (WireRun, B256),
    /// The filled levels: (ℓ, name, root), ascending ℓ.
    pub levels: Vec<(u32, WireRun, B256)>,
    /// Version of the latest digest the node co-signed.
    pub cosigned_version: Option<u64>,
    /// Version of the latest digest posted on chain that the node has seen.
    pub posted_version: Option<u64>,
    /// Why the node quarantined the deal (its files on the node are damaged: U
    /// missing or short, a run file missing or short), or `None`. A quarantined deal
    /// serves what is intact (coded runs, so extraction works) and answers what needs
    /// the damaged part, and every owner write, with [`ErrorCode::Damaged`]. Absent in
    /// the answers of older nodes (decoded as `None`).
    #[serde(default)]
    pub damaged: Option<String>,
}

/// What became of an owner request, by its nonce ([`Request::Outcome`]).
///
/// The node keeps the answer of the last write ([`OwnerOp::Write`]) and of the
/// upload's [`OwnerOp::UploadFinish`], committed atomically with the operation itself,
/// so an answer lost to a crash (of the node, the owner or the connection) can be
/// asked for again. Nonces strictly increase, so a request the node has not applied
/// can still be sent again with the same nonce and is applied at most once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireOutcome {
    /// The node has not accepted this nonce: `last_nonce` < nonce. Sending the same
    /// request again (same nonce) is safe.
    NotApplied {
        /// The last nonce the node accepted for the deal (0 if none).
        last_nonce: u64,
    },
    /// The node applied the request; `answer` is the reply it gave (or would have
    /// given): [`Response::Written`] for a write, [`Response::WrittenBatch`] for a
    /// batch, [`Response::Committed`] for an upload finish.
    Applied {
        /// The nonce asked about.
        nonce: u64,
        /// The reply.
        answer: Box<Response>,
    },
    /// The nonce is not above the last one accepted, but it is not the last write or
    /// upload finish: the node accepted a later request (or this nonce carried another
    /// kind of request, such as a σ̃ store) and keeps no answer for it.
    Superseded {
        /// The last nonce the node accepted.
        last_nonce: u64,
    },
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorCode {
    /// The frame did not decode as a request.
    Malformed,
    /// The request, or its answer, is over the size limits.
    TooLarge,
    /// The node holds no such deal (or it is not this node's deal on chain).
    UnknownDeal,
    /// No such live run.
    UnknownRun,
    /// An owner request not signed by the deal's owner.
    Unauthorized,
    /// A nonce not above the last one accepted (replayed or reordered).
    Replay,
    /// An index or position out of range, a bad batch start, or a deal parameter (N,
    /// β) outside what the node accepts.
    OutOfRange,
    /// A block of the wrong size.
    BadBlock,
    /// An operation in the wrong phase (e.g. a write before the upload finished).
    WrongPhase,
    /// A digest version not above the last one.
    StaleVersion,
    /// A digest that does not describe the node's state.
    Mismatch,
    /// The node refuses to store more: out of disk or quota.
    DiskFull,
    /// The deal is quarantined on this node: its files are damaged
    /// ([`DealStatus::damaged`] says how). The node still serves what is intact (coded
    /// runs: extract from them); it refuses U reads if U is the damaged part, and
    /// every owner write or resize.
    Damaged,
    /// Nothing kept under that name: an epoch response the node did not commit, or no
    /// longer keeps ([`Request::EpochResponse`]).
    NotFound,
    /// Anything else on the node's side (storage I/O, chain unreachable).
    Internal,
}

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    /// The kind.
    pub code: ErrorCode,
    /// What went wrong, for humans.
    pub message: String,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for WireError {}

/// A node's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// For [`Request::Status`].
    Status(DealStatus),
    /// For [`Request::Read`].
    Block {
        /// The index.
        index: u64,
        /// U[index], β bytes.
        block: ByteBuf,
        /// σ̃_U(index).
        sealed_u: B256,
        /// U path, leaf to root.
        path: Vec<B256>,
    },
    /// For [`Request::UPath`].
    UPath {
        /// The index.
        index: u64,
        /// Block root of U[index] (ENCODING §2).
        block_root: B256,
        /// σ̃_U(index).
        sealed_u: B256,
        /// U path, leaf to root.
        path: Vec<B256>,
    },
    /// For [`Request::UPaths`]: one item per index asked, in order.
    UPaths {
        /// (index, block root, σ̃_U, U path leaf to root) per index.
        items: Vec<(u64, B256, B256, Vec<B256>)>,
    },
    /// For [`Request::Download`].
    Blocks {
        /// First index.
        start: u64,
        /// The blocks, β bytes each.
        blocks: Vec<ByteBuf>,
    },
    /// For [`Request::ULeaves`]: (block root, σ̃_U) per index.
    ULeaves {
        /// First index.
        start: u64,
        /// The leaves' parts.
        leaves: Vec<(B256, B256)>,
    },
    /// For [`Request::Samples`].
    Samples {
        /// The run.
        run: WireRun,
        /// One per position asked, in order.
        samples: Vec<WireSample>,
    },
    /// For [`Request::Coded`].
    Coded {
        /// The run.
        run: WireRun,
        /// First position.
        start: u64,
        /// The coded blocks (8·s bytes each).
        blocks: Vec<ByteBuf>,
    },
    /// For [`Request::RunLeaves`].
    RunLeaves {
        /// The run.
        run: WireRun,
        /// First position.
        start: u64,
        /// The leaves.
        leaves: Vec<B256>,
    },
    /// For [`Request::Sealed`]: `None` where the owner stored nothing.
    Sealed {
        /// The run.
        run: WireRun,
        /// First position.
        start: u64,
        /// σ̃ per position.
        sealed: Vec<Option<B256>>,
    },
    /// For [`OwnerOp::UploadBegin`], [`OwnerOp::UploadBlocks`], [`OwnerOp::UploadByRoots`],
    /// [`OwnerOp::StoreSealed`].
    Accepted,
    /// For [`OwnerOp::UploadFinish`]: the roots the node committed to.
    Committed {
        /// rootU.
        root_u: B256,
        /// C's name.
        c: WireRun,
        /// rootC.
        root_c: B256,
    },
    /// For [`OwnerOp::Write`].
    Written {
        /// What was rebuilt.
        step: WireStep,
        /// The new run (a level, or C).
        run: WireRun,
        /// Its root.
        run_root: B256,
        /// The new rootU.
        root_u: B256,
    },
    /// For [`OwnerOp::WriteBatch`] and [`OwnerOp::WriteBatchByRoots`].
    WrittenBatch {
        /// Writes applied.
        count: u64,
        /// The new rootU.
        root_u: B256,
        /// The runs the batch built that the new state holds, with their roots: C first
        /// if the batch crossed a C-rebuild, then levels ascending (runs built and
        /// consumed inside the batch are not stored and not named).
        runs: Vec<(WireRun, B256)>,
    },
    /// For [`OwnerOp::Cosign`]: the provider's 65-byte EIP-712 signature.
    Cosigned {
        /// r ‖ s ‖ v.
        signature: ByteBuf,
        /// The signing provider account.
        provider: Address,
    },
    /// For [`Request::Outcome`].
    Outcome(WireOutcome),
    /// For [`Request::SecretAudit`]: one proof per run asked, in order.
    SecretAudit {
        /// The proofs.
        runs: Vec<SecretRunProof>,
    },
    /// For [`Request::EpochResponse`].
    EpochResponse(WireEpochResponse),
    /// Any failure.
    Error(WireError),
}

impl Response {
    /// An error answer.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        Response::Error(WireError { code, message: message.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) -> usize {
        let mut buf = Vec::new();
        ciborium::into_writer(v, &mut buf).unwrap();
        let back: T = ciborium::from_reader(buf.as_slice()).unwrap();
        assert_eq!(&back, v);
        buf.len()
    }

    #[test]
    fn hashes_and_blocks_encode_as_byte_strings() {
        // B256 must be a 32-byte CBOR byte string (34 bytes), not hex text or an array:
        // paths and blocks dominate the bytes on the wire.
        let path = vec![B256::repeat_byte(7); 16];
        let r = Response::Samples {
            run: WireRun { tag: 3, built_at: 9 },
            samples: vec![WireSample { position: 5, block: ByteBuf::from(vec![1u8; 4696]), path }],
        };
        let n = round_trip(&r);
        assert!(n < 4696 + 16 * 34 + 80, "encoding overhead too large: {n} bytes");
    }

    use alloy_primitives::hex;

    fn cbor(v: &impl Serialize) -> String {
        let mut buf = Vec::new();
        ciborium::into_writer(v, &mut buf).unwrap();
        hex::encode(buf)
    }

    /// The CBOR mapping docs/PROTOCOL.md spells out for other implementations: an enum
    /// variant with fields is a one-key map, a unit variant a text string, a newtype
    /// variant a one-key map to its value, keys are the snake_case field names, hashes
    /// and addresses are byte strings, None is null, tuples are arrays.
    #[test]
    fn cbor_mapping_is_the_one_protocol_md_describes() {
        // The two examples in PROTOCOL.md, byte for byte.
        assert_eq!(cbor(&Request::Read { deal: 1, index: 2 }), "a16452656164a2646465616c0165696e64657802");
        assert_eq!(cbor(&Response::Accepted), "684163636570746564");
        // Unit variants: text strings.
        assert_eq!(cbor(&OwnerOp::UploadFinish), format!("6c{}", hex::encode("UploadFinish")));
        assert_eq!(cbor(&ErrorCode::UnknownRun), format!("6a{}", hex::encode("UnknownRun")));
        // Newtype variant: {"Level": 3}.
        assert_eq!(cbor(&WireStep::Level(3)), format!("a165{}03", hex::encode("Level")));
        // A hash is a 32-byte byte string (0x58 0x20), an address 20 bytes (0x54).
        assert_eq!(cbor(&B256::repeat_byte(0xab)), format!("5820{}", "ab".repeat(32)));
        assert_eq!(cbor(&Address::repeat_byte(0xcd)), format!("54{}", "cd".repeat(20)));
        // None is null, Some(x) is x; a tuple is an array.
        assert_eq!(cbor(&Option::<B256>::None), "f6");
        assert_eq!(cbor(&(7u32, 8u64)), "820708");
        // Struct keys are the snake_case field names.
        assert_eq!(cbor(&WireRun { tag: 1, built_at: 2 }), format!("a263{}0168{}02", hex::encode("tag"), hex::encode("built_at")));
    }

    #[test]
    fn owner_ops_round_trip_through_bytes() {
        let op = OwnerOp::Write { index: 3, block: ByteBuf::from(vec![9u8; 64]), sealed_u: B256::repeat_byte(1) };
        assert_eq!(OwnerOp::from_bytes(&op.to_bytes()).unwrap(), op);
        assert!(OwnerOp::from_bytes(&[0xff, 0x00]).is_err());
        let signed =
            Request::Owner(Signed { deal: 1, nonce: 2, op: ByteBuf::from(op.to_bytes()), signature: ByteBuf::from(vec![0u8; 65]), blocks: vec![] });
        round_trip(&signed);
    }

    /// A request without blocks encodes exactly as before the field existed (an older
    /// node reads it), and one with blocks round-trips with them.
    #[test]
    fn signed_blocks_are_absent_when_empty() {
        #[derive(Serialize)]
        struct OldSigned {
            deal: u64,
            nonce: u64,
            op: ByteBuf,
            signature: ByteBuf,
        }
        let op = ByteBuf::from(OwnerOp::UploadFinish.to_bytes());
        let sig = ByteBuf::from(vec![7u8; 65]);
        let new = Signed { deal: 1, nonce: 2, op: op.clone(), signature: sig.clone(), blocks: vec![] };
        let old = OldSigned { deal: 1, nonce: 2, op, signature: sig };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        ciborium::into_writer(&new, &mut a).unwrap();
        ciborium::into_writer(&old, &mut b).unwrap();
        assert_eq!(a, b);
        let decoded: Signed = ciborium::from_reader(b.as_slice()).unwrap();
        assert_eq!(decoded, new);
        let op = OwnerOp::WriteBatchByRoots {
            writes: vec![WireWriteRoot { index: 2, root: B256::repeat_byte(3), sealed_u: B256::repeat_byte(4) }],
        };
        assert_eq!(OwnerOp::from_bytes(&op.to_bytes()).unwrap(), op);
        let with = Signed {
            deal: 1,
            nonce: 3,
            op: ByteBuf::from(op.to_bytes()),
            signature: ByteBuf::from(vec![0u8; 65]),
            blocks: vec![ByteBuf::from(vec![5u8; 64])],
        };
        round_trip(&Request::Owner(with));
    }

    #[test]
    fn outcomes_round_trip() {
        let written = Response::Written {
            step: WireStep::CRebuild,
            run: WireRun { tag: 0, built_at: 8 },
            run_root: B256::repeat_byte(2),
            root_u: B256::repeat_byte(3),
        };
        round_trip(&Response::Outcome(WireOutcome::Applied { nonce: 7, answer: Box::new(written) }));
        round_trip(&Response::Outcome(WireOutcome::NotApplied { last_nonce: 6 }));
        let batch = OwnerOp::WriteBatch {
            writes: vec![WireWrite { index: 2, block: ByteBuf::from(vec![1u8; 64]), sealed_u: B256::repeat_byte(2) }],
        };
        assert_eq!(OwnerOp::from_bytes(&batch.to_bytes()).unwrap(), batch);
        round_trip(&Response::Outcome(WireOutcome::Applied {
            nonce: 8,
            answer: Box::new(Response::WrittenBatch {
                count: 3,
                root_u: B256::repeat_byte(4),
                runs: vec![(WireRun { tag: 2, built_at: 10 }, B256::repeat_byte(5))],
            }),
        }));
        round_trip(&Response::Outcome(WireOutcome::Superseded { last_nonce: 9 }));
        round_trip(&Request::Outcome { deal: 1, nonce: 7 });
    }

    #[test]
    fn secret_audit_messages_round_trip_compactly() {
        let ask = Request::SecretAudit {
            deal: 1,
            seed: B256::repeat_byte(4),
            lambda: 128,
            runs: vec![SecretRunAsk { run: WireRun { tag: 0, built_at: 0 }, sealed: true }],
        };
        round_trip(&ask);
        let proof = Response::SecretAudit {
            runs: vec![SecretRunProof {
                run: WireRun { tag: 0, built_at: 0 },
                aggregate: ByteBuf::from(vec![3u8; 4696]),
                sealed: vec![Some(B256::repeat_byte(1)); 128],
            }],
        };
        // One coded block plus 34 bytes per σ̃ (a 32-byte byte string), little else.
        let n = round_trip(&proof);
        assert!(n < 4696 + 128 * 34 + 80, "{n} bytes");
        assert_eq!(cbor(&SecretRunAsk { run: WireRun { tag: 1, built_at: 2 }, sealed: false })[..4].to_string(), "a263");
    }

    #[test]
    fn request_hash_binds_every_field() {
        let m = Address::repeat_byte(5);
        let base = owner_request_hash(1, m, 2, 3, b"op");
        assert_ne!(base, owner_request_hash(9, m, 2, 3, b"op"));
        assert_ne!(base, owner_request_hash(1, Address::repeat_byte(6), 2, 3, b"op"));
        assert_ne!(base, owner_request_hash(1, m, 4, 3, b"op"));
        assert_ne!(base, owner_request_hash(1, m, 2, 4, b"op"));
        assert_ne!(base, owner_request_hash(1, m, 2, 3, b"oq"));
    }

    /// The segmented op hash against a reference written from its definition with
    /// alloy's sponge, one segment after another, at lengths around the segment size.
    #[test]
    fn op_hash_is_keccak_of_segment_hashes() {
        for len in [
            0usize,
            1,
            135,
            136,
            OP_SEGMENT_BYTES - 1,
            OP_SEGMENT_BYTES,
            OP_SEGMENT_BYTES + 1,
            5 * OP_SEGMENT_BYTES + 77,
            2 << 20,
            (4 << 20) + 3,
        ] {
            let op: Vec<u8> = (0..len).map(|i| (i.wrapping_mul(2654435761) >> 7) as u8).collect();
            let mut cat = Vec::new();
            for seg in op.chunks(OP_SEGMENT_BYTES) {
                cat.extend_from_slice(keccak256(seg).as_slice());
            }
            assert_eq!(op_hash(&op), keccak256(&cat), "length {len}");
        }
        // One byte changed anywhere changes it.
        let mut op = vec![7u8; 3 * OP_SEGMENT_BYTES];
        let base = op_hash(&op);
        op[2 * OP_SEGMENT_BYTES + 5] ^= 1;
        assert_ne!(op_hash(&op), base);
    }

    #[test]
    fn digest_converts_both_ways() {
        let d = Digest {
            dealId: alloy_primitives::U256::from(7u64),
            version: 3,
            numBlocks: 8,
            writeCount: 5,
            rebuildCount: 1,
            rootU: B256::repeat_byte(1),
            rootC: B256::repeat_byte(2),
            levelRoots: vec![B256::repeat_byte(3), B256::repeat_byte(4)],
        };
        let w = WireDigest::from(&d);
        assert_eq!(Digest::from(&w), d);
        round_trip(&w);
    }
}
