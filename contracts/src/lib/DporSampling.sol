// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title DporSampling
/// @notice Sizes, run tags (docs/ENCODING.md §1, §2, §6) and the epoch sample
///         derivation (§8, "dpor.epoch.v2": one sample per run in turn, from a random
///         first run).
library DporSampling {
    /// @notice keccak256("dpor.epoch.v2"), the domain of epoch sample derivation.
    bytes32 internal constant EPOCH_DOMAIN = keccak256("dpor.epoch.v2");

    /// @notice Bytes of a coded block for data block size `blockSize`: 8·(1 + ⌈β/7⌉)
    ///         (the block index travels with the data as one more element).
    function codedBlockBytes(uint256 blockSize) internal pure returns (uint256) {
        return 8 * (1 + (blockSize + 6) / 7);
    }

    /// @notice Number of 128-byte chunks of a `nbytes`-byte block: ⌈b/128⌉.
    function chunkCount(uint256 nbytes) internal pure returns (uint256) {
        return (nbytes + 127) / 128;
    }

    /// @notice ⌈log2 x⌉ (0 for x ≤ 1).
    function ceilLog2(uint256 x) internal pure returns (uint256 r) {
        uint256 w = 1;
        while (w < x) {
            w <<= 1;
            ++r;
        }
    }

    /// @notice Population count of a 64-bit value.
    function popcount(uint256 x) internal pure returns (uint256 c) {
        x = x & 0xffffffffffffffff;
        x = x - ((x >> 1) & 0x5555555555555555);
        x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333);
        x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0f;
        c = ((x * 0x0101010101010101) & 0xffffffffffffffff) >> 56;
    }

    /// @notice Whether run `tag` exists for write count t (C always; level ℓ = tag-1 iff bit ℓ of t).
    function runExists(uint256 tag, uint256 writeCount) internal pure returns (bool) {
        if (tag == 0) return true;
        if (tag > 64) return false;
        return (writeCount >> (tag - 1)) & 1 == 1;
    }

    /// @notice Size in coded blocks of run `tag`: C is 2N, level ℓ is 2^(ℓ+1).
    function runSize(uint256 tag, uint256 numBlocks) internal pure returns (uint256) {
        return tag == 0 ? 2 * numBlocks : (uint256(1) << tag);
    }

    /// @notice Index in `levelRoots` of the level run `tag` (≥ 1): the filled levels below it.
    function levelIndex(uint256 tag, uint256 writeCount) internal pure returns (uint256) {
        return popcount(writeCount & ((uint256(1) << (tag - 1)) - 1));
    }

    /// @notice Tag of the run at index `idx` in run order (ENCODING §6): 0 is C, i ≥ 1 is
    ///         the i-th filled level in ascending ℓ (tag ℓ + 1). The caller checks
    ///         idx ≤ popcount(t).
    function runTagAt(uint256 idx, uint256 writeCount) internal pure returns (uint256) {
        if (idx == 0) return 0;
        for (uint256 l; l < 64; ++l) {
            if ((writeCount >> l) & 1 == 1 && --idx == 0) return l + 1;
        }
        revert("runTagAt: out of range");
    }

    /// @notice u = uint256(keccak256(abi.encode(EPOCH_DOMAIN, S, D))) mod R, the run
    ///         index of sample 0 (R = 1 + popcount(t) runs).
    function firstRun(bytes32 seed, bytes32 digestHash, uint256 runs) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(EPOCH_DOMAIN, seed, digestHash))) % runs;
    }

    /// @notice h_j = uint256(keccak256(abi.encode(EPOCH_DOMAIN, S, D, j))), the position hash of sample j.
    function positionHash(bytes32 seed, bytes32 digestHash, uint256 j) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(EPOCH_DOMAIN, seed, digestHash, j)));
    }

    /// @notice Sample j of an epoch (ENCODING §8): run index (u + j) mod R in run order,
    ///         position h_j mod size (size is a power of two: exact).
    /// @param seed The per-deal sample seed S = keccak256(abi.encode(seed(G), dealId, e)).
    /// @param digestHash D, the hash of the digest in force for the epoch.
    function epochSample(bytes32 seed, bytes32 digestHash, uint256 j, uint256 numBlocks, uint256 writeCount)
        internal
        pure
        returns (uint256 tag, uint256 position)
    {
        uint256 runs = 1 + popcount(writeCount);
        tag = runTagAt((firstRun(seed, digestHash, runs) + j) % runs, writeCount);
        position = positionHash(seed, digestHash, j) & (runSize(tag, numBlocks) - 1);
    }
}
