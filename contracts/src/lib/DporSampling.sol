// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title DporSampling
/// @notice Sizes, run tags (docs/ENCODING.md §1, §2, §6) and the epoch sample
///         derivation (§8).
library DporSampling {
    /// @notice keccak256("dpor.epoch.v1"), the domain of epoch sample derivation.
    bytes32 internal constant EPOCH_DOMAIN = keccak256("dpor.epoch.v1");

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

    /// @notice Total coded blocks held for N blocks and write count t:
    ///         2N + Σ_{bit ℓ of t} 2^(ℓ+1) = 2N + 2t.
    function totalCoded(uint256 numBlocks, uint256 writeCount) internal pure returns (uint256) {
        return 2 * numBlocks + 2 * writeCount;
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

    /// @notice h_j = uint256(keccak256(abi.encode(EPOCH_DOMAIN, seed, digestHash, j))).
    function epochHash(bytes32 seed, bytes32 digestHash, uint256 j) internal pure returns (uint256 h) {
        bytes32 dom = EPOCH_DOMAIN;
        assembly ("memory-safe") {
            let p := mload(0x40)
            mstore(p, dom)
            mstore(add(p, 0x20), seed)
            mstore(add(p, 0x40), digestHash)
            mstore(add(p, 0x60), j)
            h := keccak256(p, 0x80)
        }
    }

    /// @notice Maps u ∈ [0, 2N + 2t) to (run tag, position), runs laid end to end:
    ///         C first, then the filled levels in ascending ℓ.
    function locate(uint256 u, uint256 numBlocks, uint256 writeCount)
        internal
        pure
        returns (uint256 tag, uint256 position)
    {
        uint256 c = 2 * numBlocks;
        if (u < c) return (0, u);
        u -= c;
        for (uint256 l; l < 64; ++l) {
            if ((writeCount >> l) & 1 == 1) {
                uint256 size = uint256(1) << (l + 1);
                if (u < size) return (l + 1, u);
                u -= size;
            }
        }
        revert("locate: out of range");
    }

    /// @notice Sample j of an epoch: (run tag, position, chunk index) per ENCODING §8.
    /// @param chunks Chunks per coded block, chunkCount(codedBlockBytes(β)).
    function epochSample(
        bytes32 seed,
        bytes32 digestHash,
        uint256 j,
        uint256 numBlocks,
        uint256 writeCount,
        uint256 chunks
    ) internal pure returns (uint256 tag, uint256 position, uint256 chunkIndex) {
        uint256 h = epochHash(seed, digestHash, j);
        uint256 u = (h & type(uint128).max) % totalCoded(numBlocks, writeCount);
        chunkIndex = (h >> 128) % chunks;
        (tag, position) = locate(u, numBlocks, writeCount);
    }
}
