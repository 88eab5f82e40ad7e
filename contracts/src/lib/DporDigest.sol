// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Digest, SampleProof, BlockProof} from "./DporTypes.sol";
import {DporMerkle} from "./DporMerkle.sol";
import {DporSampling} from "./DporSampling.sol";

/// @title DporDigest
/// @notice EIP-712 struct hash of a {Digest} (docs/ENCODING.md §5) and verification of
///         a {SampleProof} (one chunk, disputes) or a {BlockProof} (a whole coded block,
///         epoch proofs) against the run roots of a digest preimage (§2, §3, §8).
library DporDigest {
    /// @notice The EIP-712 type hash of `Digest`.
    bytes32 internal constant DIGEST_TYPEHASH = keccak256(
        "Digest(uint256 dealId,uint64 version,uint64 numBlocks,uint64 writeCount,uint64 rebuildCount,bytes32 rootU,bytes32 rootC,bytes32[] levelRoots)"
    );

    /// @notice hashStruct(d) for a digest in calldata.
    function structHash(Digest calldata d) internal pure returns (bytes32) {
        return keccak256(
            abi.encode(
                DIGEST_TYPEHASH,
                d.dealId,
                d.version,
                d.numBlocks,
                d.writeCount,
                d.rebuildCount,
                d.rootU,
                d.rootC,
                keccak256(abi.encodePacked(d.levelRoots))
            )
        );
    }

    /// @notice hashStruct(d) for a digest in memory.
    function structHashMemory(Digest memory d) internal pure returns (bytes32) {
        return keccak256(
            abi.encode(
                DIGEST_TYPEHASH,
                d.dealId,
                d.version,
                d.numBlocks,
                d.writeCount,
                d.rebuildCount,
                d.rootU,
                d.rootC,
                keccak256(abi.encodePacked(d.levelRoots))
            )
        );
    }

    /// @notice EIP-712 signing hash keccak256(0x19 ‖ 0x01 ‖ domainSeparator ‖ structHash).
    function typedHash(bytes32 domainSeparator, bytes32 sh) internal pure returns (bytes32 h) {
        assembly ("memory-safe") {
            let p := mload(0x40)
            mstore(p, hex"1901")
            mstore(add(p, 0x02), domainSeparator)
            mstore(add(p, 0x22), sh)
            h := keccak256(p, 0x42)
        }
    }

    /// @notice Verifies `p` against the run root of digest `d` for blocks of
    ///         `chunks` chunks (tree depth `chunkDepth`). Returns false on any mismatch.
    /// @dev Checks the run exists in `d`, position < run size, chunkIndex < chunks,
    ///      path lengths, chunk length 128, then folds both paths.
    function verifySample(Digest calldata d, SampleProof calldata p, uint256 chunks, uint256 chunkDepth)
        internal
        pure
        returns (bool)
    {
        uint256 tag = p.runTag;
        if (!DporSampling.runExists(tag, d.writeCount)) return false;
        uint256 size = DporSampling.runSize(tag, d.numBlocks);
        if (p.position >= size || p.runPath.length != DporSampling.ceilLog2(size)) return false;
        if (p.chunkIndex >= chunks || p.chunkPath.length != chunkDepth || p.chunk.length != 128) return false;
        bytes32 root = tag == 0 ? d.rootC : d.levelRoots[DporSampling.levelIndex(tag, d.writeCount)];
        bytes32 blockRoot = DporMerkle.processPath(DporMerkle.chunkLeafCalldata(p.chunk), p.chunkIndex, p.chunkPath);
        return DporMerkle.processPath(DporMerkle.runLeaf(p.position, blockRoot), p.position, p.runPath) == root;
    }

    /// @notice Root of run `tag` in digest `d` (C: rootC; level ℓ: levelRoots[popcount(t & (2^ℓ − 1))]).
    /// @dev The caller checks the run exists.
    function runRoot(Digest calldata d, uint256 tag) internal pure returns (bytes32) {
        return tag == 0 ? d.rootC : d.levelRoots[DporSampling.levelIndex(tag, d.writeCount)];
    }

    /// @notice Verifies a whole-block proof `p` against digest `d` for coded blocks of
    ///         `blockBytes` bytes: the run exists, position < run size, run path length
    ///         log2(size), block length == blockBytes; then block root (ENCODING §2,
    ///         recomputed from every byte) → run leaf → run path = the run's root.
    ///         Returns false on any mismatch.
    function verifyBlock(Digest calldata d, BlockProof calldata p, uint256 blockBytes) internal pure returns (bool) {
        uint256 tag = p.runTag;
        if (!DporSampling.runExists(tag, d.writeCount)) return false;
        uint256 size = DporSampling.runSize(tag, d.numBlocks);
        if (p.position >= size || p.runPath.length != DporSampling.ceilLog2(size)) return false;
        if (p.codedBlock.length != blockBytes) return false;
        bytes32 blockRoot = DporMerkle.blockRootCalldata(p.codedBlock);
        return DporMerkle.processPath(DporMerkle.runLeaf(p.position, blockRoot), p.position, p.runPath)
            == runRoot(d, tag);
    }
}
