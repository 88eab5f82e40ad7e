// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Digest, SampleProof, BlockProof} from "../lib/DporTypes.sol";
import {DporDigest} from "../lib/DporDigest.sol";
import {DporSampling} from "../lib/DporSampling.sol";

/// @title DporVerifier
/// @notice The market's stateless proof checker, deployed by {DporMarket}'s constructor
///         (address: `DporMarket.verifier()`) so the market stays under the 24,576-byte
///         code size limit (EIP-170). Pure: anyone may call it to pre-check a proof.
contract DporVerifier {
    /// @notice The samples do not match the epoch's derivation (ENCODING §8).
    error WrongSample();
    /// @notice A sample does not verify against the digest's run root.
    error InvalidProof();
    /// @notice Not exactly K proofs.
    error WrongSampleCount();
    /// @notice A coded block of the wrong length.
    error WrongBlockLength();

    /// @notice Checks an epoch proof: `proofs.length == k`, proof j names the
    ///         (runTag, position) that ENCODING §8 derives from (seed, digestHash, j)
    ///         and carries the whole coded block (8·(1 + ⌈β/7⌉) bytes, else
    ///         WrongBlockLength) whose block root and run path lead to the run's root in
    ///         `d` (else InvalidProof). Reverts on any failure.
    /// @param seed Per-deal sample seed S (docs/ENCODING.md §9).
    /// @param digestHash D, the hash of `d` (checked by the caller).
    /// @param d The digest in force for the epoch (its preimage).
    /// @param proofs K whole-block proofs, in order j = 0..K-1.
    /// @param k Samples per epoch of the deal.
    /// @param blockSize β of the deal in bytes.
    function verifyEpoch(
        bytes32 seed,
        bytes32 digestHash,
        Digest calldata d,
        BlockProof[] calldata proofs,
        uint256 k,
        uint256 blockSize
    ) external pure {
        if (proofs.length != k) revert WrongSampleCount();
        uint256 blockBytes = DporSampling.codedBlockBytes(blockSize);
        for (uint256 j; j < proofs.length; ++j) {
            BlockProof calldata p = proofs[j];
            (uint256 tag, uint256 pos) = DporSampling.epochSample(seed, digestHash, j, d.numBlocks, d.writeCount);
            if (p.runTag != tag || p.position != pos) revert WrongSample();
            if (p.codedBlock.length != blockBytes) revert WrongBlockLength();
            if (!DporDigest.verifyBlock(d, p, blockBytes)) revert InvalidProof();
        }
    }

    /// @notice Checks a chunk-level proof (disputes): true iff `p` verifies against the
    ///         run root of `d` for coded blocks of data block size `blockSize`.
    function verifySample(Digest calldata d, SampleProof calldata p, uint256 blockSize)
        external
        pure
        returns (bool)
    {
        uint256 chunks = DporSampling.chunkCount(DporSampling.codedBlockBytes(blockSize));
        return DporDigest.verifySample(d, p, chunks, DporSampling.ceilLog2(chunks));
    }

    /// @notice Sample j of an epoch (ENCODING §8): (run tag, position).
    function epochSample(bytes32 seed, bytes32 digestHash, uint256 j, uint256 numBlocks, uint256 writeCount)
        external
        pure
        returns (uint8 runTag, uint64 position)
    {
        (uint256 t, uint256 p) = DporSampling.epochSample(seed, digestHash, j, numBlocks, writeCount);
        return (uint8(t), uint64(p));
    }
}
