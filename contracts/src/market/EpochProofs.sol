// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {DigestRegistry} from "./DigestRegistry.sol";
import {Digest, SampleProof} from "../lib/DporTypes.sol";
import {DporDigest} from "../lib/DporDigest.sol";
import {DporSampling} from "../lib/DporSampling.sol";

/// @title EpochProofs
/// @notice Epoch seeds, the per-epoch sample proofs (docs/ENCODING.md §8) and missed epochs.
abstract contract EpochProofs is DigestRegistry {
    /// @notice Proves epoch `epoch` of deal `dealId`: the K samples the epoch seed and the
    ///         deal's current digest pick, each a 128-byte chunk with its chunk path and run
    ///         path, checked against the run roots of `d` (the current digest's preimage).
    ///         Credits the provider one epoch of payment.
    /// @dev Anyone may submit (the payment goes to the provider). Only while the deal is
    ///      Active and a digest was posted, in blocks (s_e, s_e + epochBlocks], once per epoch.
    /// @param dealId The deal.
    /// @param epoch The epoch (0-based).
    /// @param d Preimage of the deal's current digest.
    /// @param proofs One sample proof per j = 0..K-1, in order.
    function submitEpochProof(uint256 dealId, uint64 epoch, Digest calldata d, SampleProof[] calldata proofs)
        external
    {
        Deal storage deal = _activeDeal(dealId);
        bytes32 dh = deal.digestHash;
        if (dh == bytes32(0)) revert NoDigest();
        (uint256 seedBlock, uint256 deadline) = _window(deal, epoch);
        if (block.number <= seedBlock) revert EpochNotStarted();
        if (block.number > deadline) revert EpochClosed();
        _settleEpoch(dealId, epoch, EpochStatus.Proven);
        if (_digestHashOf(d) != dh) revert DigestMismatch();
        if (proofs.length != deal.samplesPerEpoch) revert WrongSampleCount();
        _verifyEpochSamples(_touchSeed(dealId, epoch, seedBlock), dh, d, proofs, deal.blockSize);
        uint128 pay = deal.pricePerEpoch < deal.escrow ? deal.pricePerEpoch : deal.escrow;
        deal.escrow -= pay;
        emit EpochProven(dealId, epoch, deal.digestVersion, pay);
        _credit(deal.provider, pay);
    }

    /// @notice Marks epoch `epoch` of deal `dealId` missed after its deadline: the epoch's
    ///         escrow is credited back to the owner and, if a digest had been posted, one
    ///         fault is slashed from the collateral to the owner. Enough faults terminate the deal.
    /// @dev Anyone; only for an Active deal, an unsettled epoch, after its deadline.
    function markMissed(uint256 dealId, uint64 epoch) external {
        Deal storage deal = _activeDeal(dealId);
        (, uint256 deadline) = _window(deal, epoch);
        if (block.number <= deadline) revert EpochNotOver();
        _settleEpoch(dealId, epoch, EpochStatus.Missed);
        uint128 refund = deal.pricePerEpoch < deal.escrow ? deal.pricePerEpoch : deal.escrow;
        deal.escrow -= refund;
        uint128 slashed;
        if (deal.digestHash != bytes32(0)) slashed = _fault(deal);
        emit EpochMissed(dealId, epoch, refund, slashed);
        _credit(deal.owner, uint256(refund) + slashed);
        _maybeTerminate(dealId, deal);
    }

    /// @notice Stores (if not yet stored) and returns the seed of an epoch that has started.
    /// @dev Anyone. See docs/CONTRACTS.md for the rule after 256 blocks.
    function touchSeed(uint256 dealId, uint64 epoch) external returns (bytes32) {
        Deal storage deal = _deal(dealId);
        if (deal.acceptedAt == 0) revert WrongDealState();
        (uint256 seedBlock,) = _window(deal, epoch);
        return _touchSeed(dealId, epoch, seedBlock);
    }

    /// @notice The seed of an epoch: the stored one, else what {touchSeed} would store now.
    function peekSeed(uint256 dealId, uint64 epoch) public view returns (bytes32 seed) {
        seed = epochSeeds[dealId][epoch];
        if (seed != bytes32(0)) return seed;
        Deal storage deal = _deal(dealId);
        if (deal.acceptedAt == 0) revert WrongDealState();
        (uint256 seedBlock,) = _window(deal, epoch);
        (seed,) = _computeSeed(dealId, epoch, seedBlock);
    }

    /// @notice Sample j of an epoch against the deal's current digest (for provers).
    /// @return runTag Run tag (0 = C, ℓ+1 = level ℓ).
    /// @return position Position in the run.
    /// @return chunkIndex Chunk of the coded block.
    function epochSample(uint256 dealId, uint64 epoch, uint256 j)
        external
        view
        returns (uint8 runTag, uint64 position, uint32 chunkIndex)
    {
        Deal storage deal = _deal(dealId);
        if (deal.digestHash == bytes32(0)) revert NoDigest();
        bytes32 seed = peekSeed(dealId, epoch);
        uint256 chunks = DporSampling.chunkCount(DporSampling.codedBlockBytes(deal.blockSize));
        (uint256 t, uint256 p, uint256 c) =
            DporSampling.epochSample(seed, deal.digestHash, j, deal.numBlocks, deal.writeCount, chunks);
        return (uint8(t), uint64(p), uint32(c));
    }

    /// @notice Window of an epoch: its seed block s_e and its deadline s_e + epochBlocks.
    function epochWindow(uint256 dealId, uint64 epoch) external view returns (uint256 seedBlock, uint256 deadline) {
        return _window(_deal(dealId), epoch);
    }

    /// @notice Settlement of an epoch (0 none, 1 proven, 2 missed).
    function epochStatus(uint256 dealId, uint64 epoch) external view returns (EpochStatus) {
        return _epochStatus(dealId, epoch);
    }

    function _verifyEpochSamples(
        bytes32 seed,
        bytes32 dh,
        Digest calldata d,
        SampleProof[] calldata proofs,
        uint256 blockSize
    ) private pure {
        uint256 chunks = DporSampling.chunkCount(DporSampling.codedBlockBytes(blockSize));
        uint256 depth = DporSampling.ceilLog2(chunks);
        for (uint256 j; j < proofs.length; ++j) {
            SampleProof calldata p = proofs[j];
            (uint256 tag, uint256 pos, uint256 ci) =
                DporSampling.epochSample(seed, dh, j, d.numBlocks, d.writeCount, chunks);
            if (p.runTag != tag || p.position != pos || p.chunkIndex != ci) revert WrongSample();
            if (!DporDigest.verifySample(d, p, chunks, depth)) revert InvalidProof();
        }
    }
}
