// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Digest} from "../lib/DporTypes.sol";

/// @title IDporMarket
/// @notice Types, custom errors and events of the dpor market (docs/CONTRACTS.md).
interface IDporMarket {
    // ---------------------------------------------------------------- types

    /// @notice Life cycle of a deal: Open (escrowed, waiting for the provider) →
    ///         Active (accepted, collateral locked) → Completed (closed after its last
    ///         epoch) or Terminated (too many failures); Open → Cancelled by the owner.
    enum DealState {
        None,
        Open,
        Active,
        Completed,
        Terminated,
        Cancelled
    }

    /// @notice Outcome of an epoch: not settled yet, proven (provider paid) or missed
    ///         (owner refunded, provider slashed when a digest existed).
    enum EpochStatus {
        None,
        Proven,
        Missed
    }

    /// @notice Dispute state: Open → Answered (bond to the provider) or Slashed.
    enum DisputeState {
        None,
        Open,
        Answered,
        Slashed
    }

    struct Provider {
        bool registered;
        uint64 capacityBlocks;
        uint64 usedBlocks;
        uint32 activeDeals;
        uint128 pricePerBlockEpoch;
        uint128 collateralPerBlock;
        uint256 stake;
        bytes peerId;
        string[] multiaddrs;
    }

    struct Deal {
        // slot 0
        address owner;
        uint32 numEpochs;
        uint32 blockSize;
        uint16 lambda;
        uint8 samplesPerEpoch;
        DealState state;
        // slot 1
        address provider;
        uint64 acceptedAt;
        uint16 failures;
        uint16 openDisputes;
        // slot 2
        uint64 numBlocks;
        uint64 digestVersion;
        uint64 writeCount;
        // slot 3
        bytes32 digestHash;
        // slot 4
        uint128 pricePerEpoch;
        uint128 escrow;
        // slot 5
        uint128 collateral;
        uint128 slashPerFault;
    }

    struct AuditRecord {
        uint256 dealId;
        address auditor;
        uint64 epoch;
        uint64 version;
        bool passed;
        bytes32 transcriptHash;
    }

    struct Dispute {
        // slot 0
        uint256 dealId;
        // slot 1
        address challenger;
        uint64 deadline;
        DisputeState state;
        uint8 runTag;
        // slot 2
        uint64 position;
        uint32 chunkIndex;
        uint64 version;
        uint128 bond;
        // slot 3
        bytes32 digestHash;
    }

    // ---------------------------------------------------------------- errors

    error InvalidParameter();
    error ZeroAmount();
    error AlreadyRegistered();
    error NotRegistered();
    error StakeTooLow();
    error StakeLocked();
    error InsufficientStake();
    error CapacityExceeded();
    error NumBlocksNotPowerOfTwo();
    error PriceBelowAsk();
    error UnknownDeal();
    error NotDealOwner();
    error NotDealProvider();
    error WrongDealState();
    error DealNotOver();
    error DisputesOpen();
    error StaleVersion();
    error WrongNumBlocks();
    error WriteCountTooLarge();
    error LevelRootsMismatch();
    error BadOwnerSignature();
    error BadProviderSignature();
    error NoDigest();
    error DigestMismatch();
    error EpochOutOfRange();
    error EpochNotStarted();
    error EpochClosed();
    error EpochNotOver();
    error EpochSettled();
    error WrongSampleCount();
    error WrongSample();
    error InvalidProof();
    error UnknownDispute();
    error DisputeNotOpen();
    error DeadlinePassed();
    error DeadlineNotPassed();
    error NothingOwed();

    // ---------------------------------------------------------------- events

    event ProviderRegistered(
        address indexed provider,
        bytes peerId,
        string[] multiaddrs,
        uint128 pricePerBlockEpoch,
        uint128 collateralPerBlock,
        uint64 capacityBlocks,
        uint256 stake
    );
    event ProviderUpdated(
        address indexed provider,
        bytes peerId,
        string[] multiaddrs,
        uint128 pricePerBlockEpoch,
        uint128 collateralPerBlock,
        uint64 capacityBlocks
    );
    event StakeAdded(address indexed provider, uint256 amount, uint256 stake);
    event StakeWithdrawn(address indexed provider, uint256 amount, uint256 stake);
    event DealOpened(
        uint256 indexed dealId,
        address indexed owner,
        address indexed provider,
        uint64 numBlocks,
        uint32 blockSize,
        uint16 lambda,
        uint8 samplesPerEpoch,
        uint32 numEpochs,
        uint128 pricePerEpoch,
        uint128 escrow,
        uint128 collateral
    );
    event DealCancelled(uint256 indexed dealId, uint128 refund);
    event DealAccepted(uint256 indexed dealId, uint64 acceptedAt, uint128 collateral);
    event DealClosed(uint256 indexed dealId, uint128 escrowRefund, uint128 collateralReturned);
    event DealTerminated(uint256 indexed dealId, uint16 failures, uint128 escrowRefund, uint128 collateralToOwner);
    /// @notice The whole digest preimage, so auditors can read every root from logs.
    event DigestPosted(uint256 indexed dealId, uint64 indexed version, bytes32 digestHash, Digest digest);
    event EpochSeeded(uint256 indexed dealId, uint64 indexed epoch, uint256 sourceBlock, bytes32 seed);
    event EpochProven(uint256 indexed dealId, uint64 indexed epoch, uint64 version, uint128 payment);
    event EpochMissed(uint256 indexed dealId, uint64 indexed epoch, uint128 refund, uint128 slashed);
    event AuditRecorded(
        uint256 indexed auditId,
        uint256 indexed dealId,
        uint64 indexed epoch,
        uint64 version,
        bool passed,
        bytes32 transcriptHash,
        address auditor
    );
    event DisputeOpened(
        uint256 indexed disputeId,
        uint256 indexed dealId,
        address indexed challenger,
        uint256 auditId,
        uint64 version,
        bytes32 digestHash,
        uint8 runTag,
        uint64 position,
        uint32 chunkIndex,
        uint64 deadline,
        uint128 bond
    );
    event DisputeAnswered(uint256 indexed disputeId, uint256 indexed dealId, uint128 bondToProvider);
    event DisputeSlashed(uint256 indexed disputeId, uint256 indexed dealId, uint128 toChallenger, uint128 toOwner);
    event Credited(address indexed account, uint256 amount);
    event Withdrawn(address indexed account, uint256 amount);
}
