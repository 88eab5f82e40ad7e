// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BlockProof} from "./DporTypes.sol";

/// @title DporCommitment
/// @notice The leaves of epoch commitments (docs/COMMITMENTS.md §1): the response hash
///         of one deal epoch and its leaf. Shared by the market, tests and clients; the
///         tree over the leaves uses {DporMerkle.node} (0x01 ‖ l ‖ r) and
///         {DporMerkle.processPath}, padded with bytes32(0) leaves to a power of two.
library DporCommitment {
    /// @notice Domain byte of a commitment leaf (next to ENCODING §2's 0x00–0x03).
    uint8 internal constant LEAF_DOMAIN = 0x04;

    /// @notice leaf = keccak256(abi.encodePacked(uint8(0x04), uint256 dealId, uint64 e,
    ///         uint64 v, bytes32 responseHash)): 1 + 32 + 8 + 8 + 32 = 81 bytes hashed.
    /// @param dealId The deal.
    /// @param epoch Deal epoch e (global epoch − startEpoch).
    /// @param version v ≥ 1, the version of the digest in force at the epoch's start.
    /// @param rh The response hash, see {responseHash}.
    function leaf(uint256 dealId, uint64 epoch, uint64 version, bytes32 rh)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encodePacked(LEAF_DOMAIN, dealId, epoch, version, rh));
    }

    /// @notice responseHash = keccak256(abi.encodePacked(S, B_0, …, B_{K−1})): the per-deal
    ///         sample seed S followed by the K whole coded blocks, in sample order.
    /// @param seed S = keccak256(abi.encode(seed(g), dealId, e)) (ENCODING §9).
    /// @param blocks The K coded blocks (8·(1 + ⌈β/7⌉) bytes each).
    function responseHash(bytes32 seed, bytes[] memory blocks) internal pure returns (bytes32) {
        bytes memory buf = abi.encodePacked(seed);
        for (uint256 j; j < blocks.length; ++j) {
            buf = bytes.concat(buf, blocks[j]);
        }
        return keccak256(buf);
    }

    /// @notice {responseHash} over the coded blocks of calldata epoch proofs, in order.
    function responseHashOf(bytes32 seed, BlockProof[] calldata proofs) internal pure returns (bytes32 h) {
        uint256 total = 32;
        for (uint256 j; j < proofs.length; ++j) {
            total += proofs[j].codedBlock.length;
        }
        bytes memory buf = new bytes(total);
        assembly ("memory-safe") {
            mstore(add(buf, 32), seed)
        }
        uint256 off = 32;
        for (uint256 j; j < proofs.length; ++j) {
            bytes calldata b = proofs[j].codedBlock;
            assembly ("memory-safe") {
                calldatacopy(add(add(buf, 32), off), b.offset, b.length)
            }
            off += b.length;
        }
        assembly ("memory-safe") {
            h := keccak256(add(buf, 32), total)
        }
    }
}
