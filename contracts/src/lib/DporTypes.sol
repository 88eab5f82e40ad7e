// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice A digest (docs/ENCODING.md §5): the provider's whole state at one moment.
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

/// @notice One chunk-level sample proof (ENCODING §3, §7 of docs/CONTRACTS.md): a
///         128-byte chunk of the coded block at `position` of run `runTag`, its path in
///         the block's chunk tree and the block's path in the run tree. Used by
///         disputes, where the challenger names the chunk.
struct SampleProof {
    uint8 runTag;
    uint64 position;
    uint32 chunkIndex;
    bytes chunk;
    bytes32[] chunkPath;
    bytes32[] runPath;
}

/// @notice One epoch sample proof (ENCODING §8): the WHOLE coded block at `position` of
///         run `runTag` (exactly 8·(1 + ⌈β/7⌉) bytes) and the block's path in the run
///         tree (log2(run size) siblings, leaf up). The contract recomputes the block
///         root (ENCODING §2 chunk tree) from `codedBlock` itself.
struct BlockProof {
    uint8 runTag;
    uint64 position;
    bytes codedBlock;
    bytes32[] runPath;
}

/// @notice What the market keeps of each posted digest (docs/CONTRACTS.md §4), as
///         `getDigestRecord` returns it: enough to tell which digest is in force for an
///         epoch, to check its preimage, and the N its positions are sampled and bounded
///         by (a deal's N changes with `resizeDeal`, docs/CONTRACTS.md §4.1).
/// @dev The view form; storage keeps the packed {StoredDigest}.
struct DigestRecord {
    /// EIP-712 digest hash (ENCODING §5).
    bytes32 digestHash;
    /// block.timestamp of the postDigest (or resizeDeal) transaction (seconds).
    uint64 postedAt;
    /// t of the digest.
    uint64 writeCount;
    /// Version of the next digest posted for the deal (0 while this is the latest).
    uint64 nextVersion;
    /// Version of the digest posted before this one (0 for the first).
    uint64 prevVersion;
    /// N of the digest (blocks; 0 for a version never posted). Epochs bound to this
    /// digest are sampled, and its disputes bounded, with this N, whatever the deal's N is now.
    uint64 numBlocks;
}

/// @notice Storage form of a {DigestRecord}: one slot for the hash, one for the rest.
/// @dev N is kept as log2(N) in a uint8 next to t, which takes the remaining 56 bits
///      (t < N ≤ 2^40, so it fits); no extra storage slot per digest.
struct StoredDigest {
    bytes32 digestHash;
    uint64 postedAt;
    /// t of the digest (< N ≤ 2^40).
    uint56 writeCount;
    /// log2(N) of the digest (N is a power of two, 1..2^40).
    uint8 log2NumBlocks;
    uint64 nextVersion;
    uint64 prevVersion;
}

/// @notice Constructor parameters of the market (docs/CONTRACTS.md §1). Times in
///         seconds; each has a floor (the constructor reverts {IDporMarket.BelowFloor}).
struct MarketParams {
    /// P, length of an epoch and of its proof window (floor 6 h).
    uint64 epochSeconds;
    /// Time a provider has to answer a dispute (floor 15 h).
    uint64 answerSeconds;
    /// Disputes stay possible this long after a deal's last deadline (floor 1 day).
    uint64 graceSeconds;
    /// A deal with no digest this long after acceptance may be exited by either party (floor 1 day).
    uint64 uploadSeconds;
    /// Epochs of notice of {IDporMarket.requestExit} after the current one (floor 1).
    uint32 exitNoticeEpochs;
    /// Bond a challenger locks per dispute.
    uint128 disputeBond;
    /// Challenger's share of a dispute slash, basis points (≤ 10 000).
    uint16 challengerShareBps;
    /// Faults that terminate a deal (floor 3).
    uint16 maxFailures;
    /// Stake a provider needs to accept deals.
    uint256 minStake;
}
