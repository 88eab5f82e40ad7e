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

/// @notice One sample proof (ENCODING §8): a 128-byte chunk of the coded block at
///         `position` of run `runTag`, its path in the block's chunk tree and the
///         block's path in the run tree.
struct SampleProof {
    uint8 runTag;
    uint64 position;
    uint32 chunkIndex;
    bytes chunk;
    bytes32[] chunkPath;
    bytes32[] runPath;
}
