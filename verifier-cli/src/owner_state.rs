//! The owner's state: a small JSON file (DESIGN §1: "a 32-byte secret seed, its
//! Ethereum key, a few counters and roots, an optional cache of the smallest levels").
//!
//! It holds the secret seed the checksum keys derive from (so it is written with mode
//! 0600), the deal's shape, the roots the owner has verified, the write counter, the
//! last nonce it used with the node, the last digest version it posted, and the
//! checksums σ of the filled levels up to `cache_levels` (levels above are fetched
//! from the node as σ̃ when a rebuild consumes them). Saved atomically (temp file +
//! rename) after every operation that changes it.

use alloy_primitives::{Address, B256};
use anyhow::Context;
use dpor_core::checksum::{OwnerKeys, RHO};
use dpor_core::field::{self, Fp};
use dpor_core::BlockFormat;
use dpor_proto::messages::WireRun;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Default number of smallest levels whose checksums the owner caches: levels
/// 0..15, at most 2^17·16 bytes = 2 MiB of checksums (N ≤ 2^16 files need no σ̃
/// fetches at all).
pub const DEFAULT_CACHE_LEVELS: u32 = 16;

/// One filled run the owner has verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEntry {
    /// Its name.
    pub run: WireRun,
    /// Its Merkle root, as committed by the node and spot-checked.
    pub root: B256,
    /// Its checksums σ (size × ρ canonical values), if cached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<Vec<u64>>,
}

/// The owner's state for one deal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OwnerState {
    /// The deal id on chain.
    pub deal: u64,
    /// Chain id.
    pub chain_id: u64,
    /// Market contract.
    pub market: Address,
    /// The provider account of the deal.
    pub provider: Address,
    /// The secret seed of the checksum keys (hex). Keep this file private.
    pub seed: B256,
    /// N, blocks.
    pub num_blocks: u64,
    /// β, bytes per block.
    pub block_bytes: u32,
    /// λ, audit and spot-check samples per run.
    pub lambda: u32,
    /// The file's length in bytes (0 before upload).
    pub file_bytes: u64,
    /// The last nonce used with the node.
    pub nonce: u64,
    /// True once the upload is verified.
    pub uploaded: bool,
    /// t, writes since the last C-rebuild.
    pub write_count: u64,
    /// C-rebuilds so far.
    pub rebuild_count: u64,
    /// rootU.
    pub root_u: B256,
    /// C.
    pub c: Option<RunEntry>,
    /// Filled levels of H, by level (index ℓ; `None` when empty).
    pub levels: Vec<Option<RunEntry>>,
    /// Version of the last digest posted.
    pub digest_version: u64,
    /// Levels below this keep their checksums here.
    pub cache_levels: u32,
}

impl OwnerState {
    /// Reads the state file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the owner state {} (run `dpor deal open` first?)", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("the owner state {} is corrupt", path.display()))
    }

    /// Writes the state file atomically, readable by the owner only.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let tmp = path.with_extension("tmp");
        let text = serde_json::to_string_pretty(self)?;
        {
            use std::io::Write;
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                opts.mode(0o600);
            }
            let mut f = opts.open(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))?;
        Ok(())
    }

    /// The block format.
    pub fn format(&self) -> anyhow::Result<BlockFormat> {
        BlockFormat::new(self.block_bytes as usize).context("bad block size in the owner state")
    }

    /// k = log2 N.
    pub fn log_blocks(&self) -> u32 {
        self.num_blocks.trailing_zeros()
    }

    /// The checksum keys.
    pub fn keys(&self) -> anyhow::Result<OwnerKeys> {
        Ok(OwnerKeys::derive(&self.seed.0, self.format()?.width()))
    }

    /// Total writes ever.
    pub fn total_writes(&self) -> u64 {
        self.rebuild_count * self.num_blocks + self.write_count
    }

    /// The next nonce (and records it as used).
    pub fn next_nonce(&mut self) -> u64 {
        self.nonce += 1;
        self.nonce
    }

    /// The filled levels' roots, ascending ℓ.
    pub fn level_roots(&self) -> Vec<B256> {
        self.levels.iter().flatten().map(|r| r.root).collect()
    }

    /// C and the filled levels in run order, with sizes: (entry, size in coded blocks).
    pub fn runs(&self) -> Vec<(&RunEntry, u64)> {
        let mut out = Vec::new();
        if let Some(c) = &self.c {
            out.push((c, 2 * self.num_blocks));
        }
        for (l, e) in self.levels.iter().enumerate() {
            if let Some(e) = e {
                out.push((e, 2u64 << l));
            }
        }
        out
    }
}

/// Checksums as canonical integers (for the JSON file).
pub fn sigma_to_u64(s: &[Fp]) -> Vec<u64> {
    s.iter().map(|e| field::to_u64(*e)).collect()
}

/// Checksums back from canonical integers; errors on a non-canonical value.
pub fn sigma_from_u64(v: &[u64]) -> anyhow::Result<Vec<Fp>> {
    v.iter()
        .map(|x| field::from_bytes(x.to_le_bytes()).context("a cached checksum is not a field element (state file corrupt)"))
        .collect()
}

/// Width of checksum vectors (ρ).
pub const SIGMA_WIDTH: usize = RHO;
