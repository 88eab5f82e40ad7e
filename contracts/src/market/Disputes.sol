// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketBase} from "./MarketBase.sol";
import {Digest, SampleProof, StoredDigest} from "../lib/DporTypes.sol";
import {DporSampling} from "../lib/DporSampling.sol";

/// @title Disputes
/// @notice Records of off-chain public audits, and disputes on one named sample.
abstract contract Disputes is MarketBase {
    /// @notice Records the outcome of an off-chain public audit (no economic effect; a
    ///         failure with consequences goes through {openDispute}).
    /// @dev Anyone, unbonded on purpose: a record moves no funds and changes no state any
    ///      function reads; each names its `auditor` (msg.sender), so readers filter by
    ///      the auditors they trust, and a spammer pays its own storage (≈ 130k gas per
    ///      record). docs/CONTRACTS.md §7. The deal must have been accepted;
    ///      1 ≤ version ≤ the posted version.
    /// @return auditId The record's id.
    function recordAudit(uint256 dealId, uint64 epoch, uint64 version, bool passed, bytes32 transcriptHash)
        external
        returns (uint256 auditId)
    {
        _onlyHome();
        Deal storage deal = _deal(dealId);
        if (deal.acceptedAt == 0) revert WrongDealState();
        if (epoch >= deal.numEpochs) revert EpochOutOfRange();
        if (version == 0 || version > deal.digestVersion) revert StaleVersion();
        auditId = _record(dealId, epoch, version, passed, transcriptHash);
    }

    /// @notice Records a failed audit and opens a dispute on one sample (run tag,
    ///         position, chunk index) of the deal's latest digest, locking {disputeBond}
    ///         from the caller (approve first). The provider must answer within
    ///         {answerSeconds} against the digest stored in the dispute.
    /// @dev Anyone. The deal must be Active, now < the last deadline + {graceSeconds}
    ///      ({DisputePeriodOver}, finding 6), `version` must be the posted version, and
    ///      the sample must exist in that digest: run `runTag` exists for its t, `position`
    ///      < the run's size under the digest's own N (its record), `chunkIndex` < the
    ///      chunks per coded block ({WrongSample}).
    /// @return disputeId The dispute's id.
    function openDispute(
        uint256 dealId,
        uint64 epoch,
        uint64 version,
        bytes32 transcriptHash,
        uint8 runTag,
        uint64 position,
        uint32 chunkIndex
    ) external nonReentrant returns (uint256 disputeId) {
        _onlyHome();
        Deal storage deal = _activeDeal(dealId);
        if (epoch >= deal.numEpochs) revert EpochOutOfRange();
        if (deal.digestVersion == 0) revert NoDigest();
        if (version != deal.digestVersion) revert StaleVersion();
        if (block.timestamp >= _lastDeadline(deal) + graceSeconds) revert DisputePeriodOver();
        // Bounded by the disputed digest's own t and N (its record), not the deal's: the
        // same values today (only the latest digest can be disputed and N changes only
        // with a new digest, resizeDeal), and no position valid only under another N.
        StoredDigest storage rec = _digests[dealId][version];
        if (
            !DporSampling.runExists(runTag, rec.writeCount)
                || position >= DporSampling.runSize(runTag, uint256(1) << rec.log2NumBlocks)
                || chunkIndex >= DporSampling.chunkCount(DporSampling.codedBlockBytes(deal.blockSize))
        ) revert WrongSample();
        uint256 auditId = _record(dealId, epoch, version, false, transcriptHash);
        disputeId = ++disputeCount;
        Dispute storage q = _disputes[disputeId];
        q.dealId = dealId;
        q.challenger = msg.sender;
        q.deadline = uint64(block.timestamp + answerSeconds); // answerSeconds ≤ 365 days: no wrap
        q.state = DisputeState.Open;
        q.runTag = runTag;
        q.position = position;
        q.chunkIndex = chunkIndex;
        q.version = version;
        q.bond = disputeBond;
        q.digestHash = deal.digestHash;
        deal.openDisputes += 1;
        emit DisputeOpened(
            disputeId,
            dealId,
            msg.sender,
            auditId,
            version,
            q.digestHash,
            runTag,
            position,
            chunkIndex,
            q.deadline,
            disputeBond
        );
        if (disputeBond > 0) _pullTokens(msg.sender, disputeBond);
    }

    /// @notice Answers an open dispute with the named sample's proof against the digest
    ///         the dispute stored (its preimage `d`, which may be older than the deal's
    ///         latest). The challenger's bond is credited to the provider.
    /// @dev Anyone (normally the provider), until the dispute's deadline (a timestamp, inclusive).
    function answerDispute(uint256 disputeId, Digest calldata d, SampleProof calldata proof) external {
        _onlyHome();
        Dispute storage q = _openDispute(disputeId);
        if (block.timestamp > q.deadline) revert DeadlinePassed();
        if (_digestHashOf(d) != q.digestHash) revert DigestMismatch();
        if (proof.runTag != q.runTag || proof.position != q.position || proof.chunkIndex != q.chunkIndex) {
            revert WrongSample();
        }
        Deal storage deal = _deals[q.dealId];
        if (!verifier.verifySample(d, proof, deal.blockSize)) revert InvalidProof();
        q.state = DisputeState.Answered;
        deal.openDisputes -= 1;
        uint128 bond = q.bond;
        emit DisputeAnswered(disputeId, q.dealId, bond);
        _credit(deal.provider, bond);
    }

    /// @notice Executes the slash of an unanswered dispute after its deadline: one fault's
    ///         slash is taken from the collateral, {challengerShareBps} of it plus the bond
    ///         to the challenger, the rest to the owner. Enough faults terminate the deal.
    /// @dev Anyone; once per dispute (a second call reverts {DisputeNotOpen}).
    function slash(uint256 disputeId) external {
        _onlyHome();
        Dispute storage q = _openDispute(disputeId);
        if (block.timestamp <= q.deadline) revert DeadlineNotPassed();
        q.state = DisputeState.Slashed;
        uint256 dealId = q.dealId;
        Deal storage deal = _deals[dealId];
        deal.openDisputes -= 1;
        uint128 amount = _fault(deal, 1);
        uint128 toChallenger = uint128((uint256(amount) * challengerShareBps) / 10_000);
        uint128 toOwner = amount - toChallenger;
        emit DisputeSlashed(disputeId, dealId, toChallenger, toOwner);
        _credit(q.challenger, uint256(toChallenger) + q.bond);
        _credit(deal.owner, toOwner);
        _maybeTerminate(dealId, deal);
    }

    /// @notice The dispute `disputeId` (state None if unknown). Anyone.
    function getDispute(uint256 disputeId) external view returns (Dispute memory) {
        return _disputes[disputeId];
    }

    /// @notice The audit record `auditId`. Anyone.
    function getAudit(uint256 auditId) external view returns (AuditRecord memory) {
        return _audits[auditId];
    }

    function _openDispute(uint256 disputeId) private view returns (Dispute storage q) {
        q = _disputes[disputeId];
        if (q.state == DisputeState.None) revert UnknownDispute();
        if (q.state != DisputeState.Open) revert DisputeNotOpen();
    }

    function _record(uint256 dealId, uint64 epoch, uint64 version, bool passed, bytes32 transcriptHash)
        private
        returns (uint256 auditId)
    {
        auditId = ++auditCount;
        _audits[auditId] = AuditRecord(dealId, msg.sender, epoch, version, passed, transcriptHash);
        emit AuditRecorded(auditId, dealId, epoch, version, passed, transcriptHash, msg.sender);
    }
}
