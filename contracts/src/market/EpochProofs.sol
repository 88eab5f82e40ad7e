// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {DealResize} from "./DealResize.sol";
import {Digest, BlockProof, StoredDigest} from "../lib/DporTypes.sol";
import {DporSampling} from "../lib/DporSampling.sol";

/// @title EpochProofs
/// @notice Global epoch seeds (beacon or dev mode), per-epoch whole-block proofs
///         (docs/ENCODING.md §8) bound to the digest in force at the epoch's start, and
///         missed epochs (docs/CONTRACTS.md §5).
abstract contract EpochProofs is DealResize {
    /// @notice Proves epoch `epoch` of deal `dealId` with K whole coded blocks (finding 3)
    ///         against the digest in force at the epoch's start (finding 2): `d` is its
    ///         preimage, whatever was posted since. Credits the provider one epoch of payment.
    /// @dev Anyone may submit (the payment goes to the provider). Deal Active;
    ///      start_e ≤ now < start_e + epochSeconds ({EpochNotStarted}, {EpochClosed});
    ///      digest `d.version` posted strictly before start_e and no later digest posted
    ///      before start_e ({DigestNotInForce}); hash(d) equal to its record
    ///      ({DigestMismatch}); the global seed available ({SeedUnavailable}); exactly K
    ///      proofs ({WrongSampleCount}) naming the derived samples ({WrongSample}) that
    ///      verify ({InvalidProof}); epoch unsettled ({EpochSettled}). Samples and run
    ///      sizes use `d.numBlocks`, the N of the digest in force (hash-checked), which
    ///      differs from the deal's current N when a resize came after the epoch's start.
    /// @param dealId The deal.
    /// @param epoch The deal epoch (0-based).
    /// @param d Preimage of the digest in force for the epoch.
    /// @param proofs One whole-block proof per j = 0..K-1, in order.
    function submitEpochProof(uint256 dealId, uint64 epoch, Digest calldata d, BlockProof[] calldata proofs)
        external
    {
        Deal storage deal = _activeDeal(dealId);
        (uint256 start, uint256 deadline) = _window(deal, epoch);
        if (block.timestamp < start) revert EpochNotStarted();
        if (block.timestamp >= deadline) revert EpochClosed();
        if (d.dealId != dealId) revert DigestMismatch();
        bytes32 dh = _checkInForce(dealId, d, start);
        bytes32 seed = _sampleSeed(_touchGlobalSeed(uint64(deal.startEpoch + epoch)), dealId, epoch);
        _settleEpoch(dealId, deal, epoch, EpochStatus.Proven);
        verifier.verifyEpoch(seed, dh, d, proofs, deal.samplesPerEpoch, deal.blockSize);
        uint128 pay = deal.pricePerEpoch < deal.escrow ? deal.pricePerEpoch : deal.escrow;
        deal.escrow -= pay;
        emit EpochProven(dealId, epoch, d.version, pay);
        _credit(deal.provider, pay);
    }

    /// @notice Marks epoch `epoch` of deal `dealId` missed once its deadline has passed:
    ///         the epoch's escrow is credited back to the owner and, only if a digest was
    ///         in force at the epoch's start (finding 1), one fault is slashed from the
    ///         collateral to the owner. Enough faults terminate the deal.
    ///         **Beacon outage (second review).** In beacon mode the epoch is excused
    ///         instead of faulted when the beacon round of its start was not recorded
    ///         before start + epochSeconds/2 (never recorded, or first relayed at or
    ///         after that time): no proof was possible for at least half the window.
    ///         An excused epoch is settled Missed like any other (escrow back to the
    ///         owner, so the provider earns nothing for it; it counts as settled, so
    ///         {closeDeal} does not fault it later) with no slash, and emits
    ///         {EpochExcused} after {EpochMissed} (slashed = 0). Dev mode: no excuse.
    /// @dev Anyone; only for an Active deal, an unsettled epoch, now ≥ start_e + epochSeconds,
    ///      and a provider that posted no commitment for the epoch's global epoch
    ///      ({CommittedEpoch}: such an epoch is settled by a challenge or claimEpochs,
    ///      docs/COMMITMENTS.md §2).
    function markMissed(uint256 dealId, uint64 epoch) external {
        Deal storage deal = _activeDeal(dealId);
        (uint256 start, uint256 deadline) = _window(deal, epoch);
        if (block.timestamp < deadline) revert EpochNotOver();
        if (_isCommitted(deal.provider, uint256(deal.startEpoch) + epoch)) revert CommittedEpoch();
        bool fault = _settleEpoch(dealId, deal, epoch, EpochStatus.Missed);
        uint64 lateRound = fault ? _lateRound(start) : 0;
        if (lateRound != 0) fault = false;
        uint128 refund = deal.pricePerEpoch < deal.escrow ? deal.pricePerEpoch : deal.escrow;
        deal.escrow -= refund;
        uint128 slashed = fault ? _fault(deal, 1) : 0;
        emit EpochMissed(dealId, epoch, refund, slashed);
        if (lateRound != 0) emit EpochExcused(dealId, epoch, lateRound);
        _credit(deal.owner, uint256(refund) + slashed);
        _maybeTerminate(dealId, deal);
    }

    /// @dev Beacon mode: the round seeding an epoch that starts at `start` if the beacon
    ///      had not recorded it before start + epochSeconds/2 (the first relay's time,
    ///      which never changes), else 0. Always 0 in dev mode.
    function _lateRound(uint256 start) private view returns (uint64 round) {
        if (address(beacon) == address(0)) return 0;
        round = beacon.roundAt(start);
        uint64 at = beacon.recordedAt(round);
        if (at != 0 && at < start + epochSeconds / 2) return 0;
    }

    /// @notice Stores (if not yet stored) and returns the seed of global epoch `g`
    ///         (beacon: randomness of round roundAt(genesis + g·P); dev mode: a blockhash
    ///         once that time has passed). Anyone.
    function recordSeed(uint64 g) external returns (bytes32) {
        return _touchGlobalSeed(g);
    }

    /// @notice Stores the global seed of deal epoch `epoch` if needed and returns the
    ///         deal's sample seed S = keccak256(abi.encode(seed(G), dealId, epoch)). Anyone.
    function touchSeed(uint256 dealId, uint64 epoch) external returns (bytes32) {
        Deal storage deal = _deal(dealId);
        if (deal.acceptedAt == 0) revert WrongDealState();
        _window(deal, epoch);
        return _sampleSeed(_touchGlobalSeed(uint64(deal.startEpoch + epoch)), dealId, epoch);
    }

    /// @notice The sample seed S of a deal epoch: from the stored global seed, else what
    ///         {touchSeed} would store now (reverts {SeedUnavailable} / {EpochNotStarted}).
    function peekSeed(uint256 dealId, uint64 epoch) public view returns (bytes32) {
        Deal storage deal = _deal(dealId);
        if (deal.acceptedAt == 0) revert WrongDealState();
        _window(deal, epoch);
        (bytes32 g,) = _peekGlobalSeed(uint64(deal.startEpoch + epoch));
        return _sampleSeed(g, dealId, epoch);
    }

    /// @notice The digest in force for a deal epoch: the last one posted strictly before
    ///         the epoch's start (version 0 and zero hash if none). Anyone (view).
    function digestInForce(uint256 dealId, uint64 epoch)
        external
        view
        returns (uint64 version, bytes32 hash, uint64 writeCount)
    {
        Deal storage deal = _deal(dealId);
        if (deal.acceptedAt == 0) revert WrongDealState();
        (uint256 start,) = _window(deal, epoch);
        StoredDigest storage rec;
        (version, rec) = _inForce(dealId, deal, start);
        if (version != 0) return (version, rec.digestHash, rec.writeCount);
    }

    /// @notice Sample j of an epoch against the digest in force for it (for provers).
    /// @return runTag Run tag (0 = C, ℓ+1 = level ℓ).
    /// @return position Position in the run (the whole coded block there is proven).
    function epochSample(uint256 dealId, uint64 epoch, uint256 j)
        external
        view
        returns (uint8 runTag, uint64 position)
    {
        Deal storage deal = _deal(dealId);
        if (deal.acceptedAt == 0) revert WrongDealState();
        (uint256 start,) = _window(deal, epoch);
        (uint64 v, StoredDigest storage rec) = _inForce(dealId, deal, start);
        if (v == 0) revert NoDigest();
        bytes32 seed = peekSeed(dealId, epoch);
        // The N of the digest the epoch is bound to, not the deal's current one (a resize
        // after the epoch's start does not move its samples).
        (uint256 t, uint256 p) =
            DporSampling.epochSample(seed, rec.digestHash, j, uint256(1) << rec.log2NumBlocks, rec.writeCount);
        return (uint8(t), uint64(p));
    }

    /// @notice Window of a deal epoch: proofs in [start, deadline), markMissed from
    ///         `deadline` = start + epochSeconds (block timestamps).
    function epochWindow(uint256 dealId, uint64 epoch) external view returns (uint256 start, uint256 deadline) {
        return _window(_deal(dealId), epoch);
    }

    /// @notice Settlement of an epoch (0 none, 1 proven, 2 missed, 3 challenged).
    function epochStatus(uint256 dealId, uint64 epoch) external view returns (EpochStatus) {
        return _epochStatus(dealId, epoch);
    }
}
