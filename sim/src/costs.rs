//! The project's measured costs, in one place, each with where it comes from.

/// Gas per on-chain operation (transaction gas, every account cold, prague rules) and
/// the owner's repair time, as measured by the project.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// `submitEpochProof`, K = 1, steady state: 239 510 gas per deal per epoch
    /// (docs/PERFORMANCE.md, "Gas (contracts)", contracts/test/Gas.t.sol).
    pub epoch_proof_gas: u64,
    /// One provider's `commitEpoch` per epoch over all its deals, amortized with the
    /// safety draws (1 in 16 opens a challenge answered by `answerChallenge`):
    /// ≈ 112 800 gas (docs/PERFORMANCE.md, "Epoch commitments: gas"; docs/COMMITMENTS.md).
    pub epoch_commitment_gas: u64,
    /// `openDeal` (escrow transfer): 218 234 gas (docs/PERFORMANCE.md).
    pub open_deal_gas: u64,
    /// `acceptDeal` (collateral transfer): 74 156 gas (docs/PERFORMANCE.md).
    pub accept_deal_gas: u64,
    /// `postDigest`, first digest of a deal (the checkpoint after upload): 137 708 gas.
    pub post_digest_gas: u64,
    /// `FileManifest.replaceShard`, one per repair: 50 132 gas (execution, cold;
    /// `test_Gas_4of6`, docs/PERFORMANCE.md "Dispersal").
    pub replace_shard_gas: u64,
    /// `markMissed`, one missed epoch faulted: 82 878 gas (docs/PERFORMANCE.md).
    pub mark_missed_gas: u64,
    /// `slash`: 96 994 gas (docs/PERFORMANCE.md).
    pub slash_gas: u64,
    /// `claimEpochs` over a deal's term (120 epochs): 126 654 gas (docs/PERFORMANCE.md).
    pub claim_epochs_gas: u64,
    /// A repair's fixed time, seconds: a new deal opened and accepted on chain and the
    /// shard checkpointed, ≈ 6 s on a 1 block/s chain (docs/PERFORMANCE.md, "Repair").
    pub repair_fixed_seconds: f64,
    /// A repair's data-bound time per GiB of file (fetch k shards, decode, re-encode,
    /// upload one shard): ≈ 16 s per GiB (docs/PERFORMANCE.md, "Repair", 256 MiB,
    /// loopback; 40 s per GiB with the fixed part at that size).
    pub repair_seconds_per_gib: f64,
    /// Disk bytes per file byte of a single deal after upload (U + C + trees + metadata):
    /// 3.48 (docs/PERFORMANCE.md, "End to end", `script/bench`). A k-of-n file stores
    /// n/k times this.
    pub disk_bytes_per_deal_byte: f64,
    /// Bytes on the wire per byte uploaded: 1.028 (docs/PERFORMANCE.md, "upload bytes
    /// on the wire").
    pub wire_bytes_per_upload_byte: f64,
}

impl Costs {
    /// The figures measured on the project's code (see each field).
    pub const MEASURED: Costs = Costs {
        epoch_proof_gas: 239_510,
        epoch_commitment_gas: 112_800,
        open_deal_gas: 218_234,
        accept_deal_gas: 74_156,
        post_digest_gas: 137_708,
        replace_shard_gas: 50_132,
        mark_missed_gas: 82_878,
        slash_gas: 96_994,
        claim_epochs_gas: 126_654,
        repair_fixed_seconds: 6.0,
        repair_seconds_per_gib: 16.0,
        disk_bytes_per_deal_byte: 3.48,
        wire_bytes_per_upload_byte: 1.028,
    };

    /// Gas of placing one shard under a new deal: `openDeal` + `acceptDeal` + first
    /// `postDigest` (a repair adds `replaceShard`, a renewal does not).
    pub fn new_deal_gas(&self) -> u64 {
        self.open_deal_gas + self.accept_deal_gas + self.post_digest_gas
    }

    /// Seconds the owner spends repairing one shard of a file of `file_bytes`.
    pub fn repair_seconds(&self, file_bytes: u64) -> f64 {
        self.repair_fixed_seconds + self.repair_seconds_per_gib * file_bytes as f64 / (1u64 << 30) as f64
    }

    /// Bytes stored on disks per file byte for a k-of-n file (U, C and H of every shard).
    pub fn storage_overhead(&self, k: u16, n: u16) -> f64 {
        f64::from(n) / f64::from(k) * self.disk_bytes_per_deal_byte
    }
}

/// A chain's daily gas capacity: Ethereum mainnet at a 45 M gas limit per 12 s block
/// (the limit through most of 2025; an assumption, not a measurement of ours).
pub const MAINNET_GAS_PER_DAY: f64 = 45e6 * 86_400.0 / 12.0;
