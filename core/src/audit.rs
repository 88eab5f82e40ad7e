//! Audits (DESIGN §6, App. A.1; ENCODING.md §6–8).
//!
//! A public audit needs no secret: from a posted digest and an epoch seed it derives
//! λ positions per run (C and each filled level; small runs whole), asks the provider
//! for those coded blocks with their run paths, and checks each against the run's
//! root in the digest. The owner's spot-check after a rebuild is the same machinery
//! plus the checksums it expects for each coded block (§5.3).

use crate::block::BlockFormat;
use crate::checksum::{OwnerKeys, RHO};
use crate::digest::Digest;
use crate::field::Fp;
use crate::merkle::{self, MerkleError};
use alloy_primitives::{keccak256, B256, U256};
use std::sync::OnceLock;
use thiserror::Error;

/// A run's name in positions and disputes: C is 0, level ℓ is ℓ + 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunTag(pub u32);

impl RunTag {
    /// The tag of C.
    pub const C: RunTag = RunTag(0);

    /// The tag of level ℓ of H.
    pub fn level(level: u32) -> RunTag {
        RunTag(level + 1)
    }

    /// The level this tag names, or `None` for C.
    pub fn as_level(self) -> Option<u32> {
        self.0.checked_sub(1)
    }
}

impl std::fmt::Display for RunTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.as_level() {
            None => write!(f, "C"),
            Some(l) => write!(f, "H{l}"),
        }
    }
}

/// keccak256("dpor.audit.v1").
pub fn audit_domain() -> B256 {
    static D: OnceLock<B256> = OnceLock::new();
    *D.get_or_init(|| keccak256(b"dpor.audit.v1"))
}

/// keccak256("dpor.epoch.v2"): the domain of the epoch sample rule (docs/ENCODING.md §8).
pub fn epoch_domain_v2() -> B256 {
    static D: OnceLock<B256> = OnceLock::new();
    *D.get_or_init(|| keccak256(b"dpor.epoch.v2"))
}

fn hash_words(words: &[B256]) -> U256 {
    let mut buf = Vec::with_capacity(32 * words.len());
    for w in words {
        buf.extend_from_slice(w.as_slice());
    }
    U256::from_be_bytes(keccak256(&buf).0)
}

fn word(x: u64) -> B256 {
    B256::from(U256::from(x))
}

/// The positions a public audit checks in a run of `size` coded blocks (a power of
/// two) with tag `tag`: all of them if `size ≤ λ`, else λ positions (with
/// replacement) `keccak256(abi.encode(AUDIT_DOMAIN, seed, digestHash, tag, j)) mod size`.
/// Deterministic; unbiased since `size` divides 2^256.
pub fn audit_positions(seed: B256, digest_hash: B256, tag: RunTag, size: u64, lambda: u32) -> Vec<u64> {
    if size <= lambda as u64 {
        return (0..size).collect();
    }
    let mask = U256::from(size - 1);
    (0..lambda as u64)
        .map(|j| {
            let h = hash_words(&[audit_domain(), seed, digest_hash, word(tag.0 as u64), word(j)]);
            (h & mask).to::<u64>()
        })
        .collect()
}

/// One sample of the on-chain epoch proof (docs/ENCODING.md §8, "dpor.epoch.v2"): the
/// WHOLE coded block at `position` of run `tag` (docs/CONTRACTS.md §5 on why whole blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockSample {
    /// The run (0 = C, ℓ + 1 = level ℓ).
    pub tag: RunTag,
    /// Position in the run.
    pub position: u64,
}

/// The per-deal sample seed S = keccak256(abi.encode(globalSeed, dealId, epoch))
/// (docs/ENCODING.md §9) from the seed of the global epoch.
pub fn sample_seed(global_seed: B256, deal_id: u64, epoch: u64) -> B256 {
    B256::from(hash_words(&[global_seed, word(deal_id), word(epoch)]))
}

/// The runs of a digest with N = `num_blocks` and write count t, in run order (C, then
/// the filled levels ascending; ENCODING §6): (tag, size in coded blocks).
pub fn runs_in_order(num_blocks: u64, write_count: u64) -> Vec<(RunTag, u64)> {
    let mut runs = vec![(RunTag::C, num_blocks.saturating_mul(2))];
    for level in 0..64u32 {
        if (write_count >> level) & 1 == 1 {
            // Level ℓ holds 2^(ℓ+1) coded blocks (ℓ < log2 N ≤ 62 for any real deal).
            runs.push((RunTag::level(level), if level < 63 { 2u64 << level } else { u64::MAX }));
        }
    }
    runs
}

/// The `count` samples of an epoch proof (docs/ENCODING.md §8, "dpor.epoch.v2") for the
/// sample seed `seed`, the hash `digest_hash` of the digest in force, N and t:
/// with R = 1 + popcount(t) runs in run order, `u = keccak256(abi.encode(DOMAIN, S, D)) mod R`,
/// sample j is in run `(u + j) mod R` at position
/// `keccak256(abi.encode(DOMAIN, S, D, j)) mod size` (a power of two: exact). So
/// min(count, R) distinct runs are sampled, each equally likely. Deterministic; the same
/// rule as `DporSampling.epochSample` (checked by the fixture vectors).
pub fn epoch_block_samples(seed: B256, digest_hash: B256, num_blocks: u64, write_count: u64, count: u32) -> Vec<BlockSample> {
    let runs = runs_in_order(num_blocks, write_count);
    let r = U256::from(runs.len() as u64);
    let dom = epoch_domain_v2();
    let u = (hash_words(&[dom, seed, digest_hash]) % r).to::<u64>();
    (0..u64::from(count))
        .map(|j| {
            let (tag, size) = runs[((u + j) % runs.len() as u64) as usize];
            let h = hash_words(&[dom, seed, digest_hash, word(j)]);
            let position = (h & U256::from(size.saturating_sub(1))).to::<u64>();
            BlockSample { tag, position }
        })
        .collect()
}

/// One chunk sample: a 128-byte chunk of the coded block at `position` of run `tag`
/// (ENCODING §2). Disputes name one (the challenger chooses the chunk, docs/CONTRACTS.md
/// §7); epoch proofs use whole blocks ([`BlockSample`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSample {
    /// The run.
    pub tag: RunTag,
    /// Position in the run.
    pub position: u64,
    /// Chunk of the coded block.
    pub chunk: u64,
}

/// One coded block as a provider returns it for an audit or spot-check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleResponse {
    /// Position in the run.
    pub position: u64,
    /// The coded block's bytes (8·s).
    pub block: Vec<u8>,
    /// Its run path.
    pub path: Vec<B256>,
}

/// A provider's answer for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResponse {
    /// The run.
    pub tag: RunTag,
    /// The samples, in the order of the positions asked.
    pub samples: Vec<SampleResponse>,
}

/// Why one sample failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SampleFault {
    /// The provider did not return it.
    #[error("missing")]
    Missing,
    /// It came for another position than asked.
    #[error("returned position {0} instead")]
    WrongPosition(u64),
    /// The block has the wrong length.
    #[error("block of {got} bytes, expected {expected}")]
    Length {
        /// Bytes returned.
        got: usize,
        /// 8·s.
        expected: usize,
    },
    /// The path does not lead to the run's root in the digest.
    #[error("Merkle path: {0}")]
    Path(MerkleError),
    /// The block opens the path but its checksum is not the owner's expected one.
    #[error("checksum mismatch")]
    Checksum,
    /// The block's bytes are not canonical field elements.
    #[error("block is not canonical field elements")]
    Encoding,
}

/// A failed sample: enough to open a dispute on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleFailure {
    /// The run.
    pub tag: RunTag,
    /// The position asked.
    pub position: u64,
    /// What was wrong.
    pub fault: SampleFault,
}

/// The outcome of verifying an audit response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditOutcome {
    /// Samples checked (all positions of all runs).
    pub checked: usize,
    /// Failed samples, in run order.
    pub failures: Vec<SampleFailure>,
}

impl AuditOutcome {
    /// True if no sample failed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The positions an audit of `digest` asks, per run in run order.
pub fn audit_plan(digest: &Digest, digest_hash: B256, seed: B256, lambda: u32) -> Vec<(RunTag, Vec<u64>)> {
    digest
        .runs()
        .into_iter()
        .map(|(tag, size, _)| (tag, audit_positions(seed, digest_hash, tag, size, lambda)))
        .collect()
}

/// Checks one returned sample against a run root (path and length).
pub fn check_sample(
    root: &B256,
    size: u64,
    expected_bytes: usize,
    position: u64,
    sample: Option<&SampleResponse>,
) -> Result<(), SampleFault> {
    let s = sample.ok_or(SampleFault::Missing)?;
    if s.position != position {
        return Err(SampleFault::WrongPosition(s.position));
    }
    if s.block.len() != expected_bytes {
        return Err(SampleFault::Length { got: s.block.len(), expected: expected_bytes });
    }
    let leaf = merkle::run_leaf(position, &merkle::block_root(&s.block));
    merkle::verify_path(root, size.trailing_zeros(), position, leaf, &s.path).map_err(SampleFault::Path)
}

/// Verifies a public audit's response against the digest: every run of the digest
/// must answer every position of [`audit_plan`], in order, with a block of the
/// format's coded size whose run path leads to the root in the digest.
pub fn verify_audit(
    digest: &Digest,
    digest_hash: B256,
    seed: B256,
    lambda: u32,
    format: &BlockFormat,
    response: &[RunResponse],
) -> AuditOutcome {
    let mut out = AuditOutcome::default();
    for ((tag, positions), (_, size, root)) in audit_plan(digest, digest_hash, seed, lambda).into_iter().zip(digest.runs()) {
        let answer = response.iter().find(|r| r.tag == tag);
        for (j, &p) in positions.iter().enumerate() {
            out.checked += 1;
            let sample = answer.and_then(|a| a.samples.get(j));
            if let Err(fault) = check_sample(&root, size, format.coded_block_bytes(), p, sample) {
                out.failures.push(SampleFailure { tag, position: p, fault });
            }
        }
    }
    out
}

/// A run as the server committed to it: its tag, root and size in coded blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunCommitment {
    /// The run.
    pub tag: RunTag,
    /// Its Merkle root.
    pub root: B256,
    /// Coded blocks in it (a power of two).
    pub size: u64,
}

/// The owner's spot-check of a run the server built (§5.4 step 5): each sample's
/// path must lead to the committed root and its checksum must equal the one the
/// owner computed by running the same rebuild on checksums (`expected`: `size × ρ`
/// elements, flat). Returns the failures (empty if all passed).
pub fn spot_check(
    keys: &OwnerKeys,
    format: &BlockFormat,
    run: &RunCommitment,
    expected: &[Fp],
    positions: &[u64],
    samples: &[SampleResponse],
) -> Vec<SampleFailure> {
    let RunCommitment { tag, root, size } = *run;
    let root = &root;
    let mut failures = Vec::new();
    for (j, &p) in positions.iter().enumerate() {
        let sample = samples.get(j);
        let result = check_sample(root, size, format.coded_block_bytes(), p, sample).and_then(|()| {
            let s = sample.ok_or(SampleFault::Missing)?;
            let elements = format.coded_from_bytes(&s.block).map_err(|_| SampleFault::Encoding)?;
            let sigma = keys.checksum(&elements).map_err(|_| SampleFault::Encoding)?;
            let want = expected.get(p as usize * RHO..(p as usize + 1) * RHO).ok_or(SampleFault::Checksum)?;
            if sigma[..] == *want {
                Ok(())
            } else {
                Err(SampleFault::Checksum)
            }
        });
        if let Err(fault) = result {
            failures.push(SampleFailure { tag, position: p, fault });
        }
    }
    failures
}
