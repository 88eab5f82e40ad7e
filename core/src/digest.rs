//! The digest of a provider's state, posted on-chain dual-signed (DESIGN §7,
//! ENCODING.md §5), as EIP-712 typed data (EIP-712; `sol!` makes Rust and Solidity
//! hash the same type string).

use crate::audit::RunTag;
use crate::state::{run_built_at, RunId};
use alloy_primitives::{Address, B256, U256};
use alloy_sol_types::{sol, Eip712Domain, SolStruct};
use std::borrow::Cow;
use thiserror::Error;

sol! {
    /// A provider's whole state at one moment (ENCODING.md §5).
    ///
    /// `numBlocks` = N (a power of two); `writeCount` = t, writes since the last
    /// C-rebuild (< N), whose set bits are the filled levels of H; `rebuildCount` =
    /// C-rebuilds so far; `levelRoots` = roots of the filled levels, ascending.
    #[derive(Debug, PartialEq, Eq)]
    struct Digest {
        uint256 dealId;
        uint64 version;
        uint64 numBlocks;
        uint64 writeCount;
        uint64 rebuildCount;
        bytes32 rootU;
        bytes32 rootC;
        bytes32[] levelRoots;
    }

    /// A deal resize (App. A.3; docs/CONTRACTS.md, "Resizing"), signed by both the
    /// owner and the provider and submitted with `resizeDeal`: the first digest of
    /// the new size (`digest.numBlocks` = the new N, t = 0, no level roots: C rebuilt
    /// for the new N, H empty), the new price per epoch (wei) and the new collateral
    /// (wei) of the deal.
    #[derive(Debug, PartialEq, Eq)]
    struct Resize {
        Digest digest;
        uint128 pricePerEpoch;
        uint128 collateral;
    }
}

impl Resize {
    /// The EIP-712 signing hash both parties sign for this resize, for the market at
    /// `contract` on `chain_id` (the contract's `resizeHash`).
    pub fn signing_hash(&self, chain_id: u64, contract: Address) -> B256 {
        self.eip712_signing_hash(&domain(chain_id, contract))
    }

    /// Checks the digest's shape ([`Digest::validate`], as `resizeDeal` does).
    pub fn validate(&self) -> Result<(), DigestError> {
        self.digest.validate()
    }
}

/// EIP-712 domain name of the market contract.
pub const DOMAIN_NAME: &str = "dpor";
/// EIP-712 domain version.
pub const DOMAIN_VERSION: &str = "1";

/// Errors of a digest's shape.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DigestError {
    /// N is not a power of two (or is 0).
    #[error("numBlocks {0} is not a power of two")]
    NumBlocks(u64),
    /// t ≥ N.
    #[error("writeCount {t} is not below numBlocks {n}")]
    WriteCount {
        /// t.
        t: u64,
        /// N.
        n: u64,
    },
    /// The level roots do not match the filled levels (popcount of t).
    #[error("{got} level roots for {expected} filled levels")]
    LevelRoots {
        /// Roots given.
        got: usize,
        /// popcount(t).
        expected: u32,
    },
    /// A level is not filled in this digest.
    #[error("level {0} is not filled in this digest")]
    NoSuchLevel(u32),
}

/// The EIP-712 domain of the market contract at `contract` on chain `chain_id`.
pub fn domain(chain_id: u64, contract: Address) -> Eip712Domain {
    Eip712Domain::new(
        Some(Cow::Borrowed(DOMAIN_NAME)),
        Some(Cow::Borrowed(DOMAIN_VERSION)),
        Some(U256::from(chain_id)),
        Some(contract),
        None,
    )
}

impl Digest {
    /// Checks the shape: N a power of two, t < N, one root per filled level.
    pub fn validate(&self) -> Result<(), DigestError> {
        if self.numBlocks == 0 || !self.numBlocks.is_power_of_two() {
            return Err(DigestError::NumBlocks(self.numBlocks));
        }
        if self.writeCount >= self.numBlocks {
            return Err(DigestError::WriteCount { t: self.writeCount, n: self.numBlocks });
        }
        if self.levelRoots.len() != self.writeCount.count_ones() as usize {
            return Err(DigestError::LevelRoots { got: self.levelRoots.len(), expected: self.writeCount.count_ones() });
        }
        Ok(())
    }

    /// hashStruct(digest) of EIP-712.
    pub fn struct_hash(&self) -> B256 {
        self.eip712_hash_struct()
    }

    /// The digest hash: the EIP-712 signing hash for the market at `contract` on
    /// `chain_id` (what both parties sign and the contract stores).
    pub fn digest_hash(&self, chain_id: u64, contract: Address) -> B256 {
        self.eip712_signing_hash(&domain(chain_id, contract))
    }

    /// log2 N.
    pub fn log_blocks(&self) -> u32 {
        self.numBlocks.trailing_zeros()
    }

    /// The runs the digest commits to, in run order (C, then filled levels
    /// ascending): `(tag, size in coded blocks, root)`.
    pub fn runs(&self) -> Vec<(RunTag, u64, B256)> {
        let mut out = vec![(RunTag::C, 2 * self.numBlocks, self.rootC)];
        let mut roots = self.levelRoots.iter();
        for level in 0..64u32 {
            if (self.writeCount >> level) & 1 == 1 {
                if let Some(r) = roots.next() {
                    out.push((RunTag::level(level), 2u64 << level, *r));
                }
            }
        }
        out
    }

    /// The runs the digest commits to, named: `(run id, size in coded blocks, root)`
    /// in run order. The build times follow from (rebuildCount, N, t) alone
    /// ([`crate::state::run_built_at`]), so anyone holding the digest can ask a node
    /// for exactly these runs.
    pub fn run_ids(&self) -> Vec<(RunId, u64, B256)> {
        let log_blocks = self.log_blocks();
        self.runs()
            .into_iter()
            .filter_map(|(tag, size, root)| {
                let built_at = run_built_at(self.rebuildCount, log_blocks, self.writeCount, tag)?;
                Some((RunId { tag, built_at }, size, root))
            })
            .collect()
    }

    /// The root of the run `tag`, if the digest has it.
    pub fn run_root(&self, tag: RunTag) -> Option<B256> {
        self.runs().into_iter().find(|(t, _, _)| *t == tag).map(|(_, _, r)| r)
    }

    /// Total writes ever: rebuildCount·N + writeCount.
    pub fn total_writes(&self) -> u64 {
        self.rebuildCount.saturating_mul(self.numBlocks).saturating_add(self.writeCount)
    }
}
