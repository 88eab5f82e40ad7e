// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Digest, SampleProof, BlockProof, DigestRecord} from "../lib/DporTypes.sol";
import {IRandomnessBeacon} from "./IRandomnessBeacon.sol";

/// @title IDporMarket
/// @notice Types, custom errors and events of the dpor market (docs/CONTRACTS.md); the
///         functions are in {IDporMarketFull} below.
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
    ///         (owner refunded; the provider is slashed one fault only if a digest was in
    ///         force at the epoch's start, see {EpochMissed}).
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

    /// @notice A deal. Times are block timestamps (seconds); epochs are on the market's
    ///         global grid (docs/CONTRACTS.md §2): deal epoch e is global epoch
    ///         startEpoch + e, it starts at genesis + (startEpoch + e)·epochSeconds.
    struct Deal {
        // slot 0
        address owner;
        /// Epochs of the term; {requestExit} may lower it (never raise it).
        uint32 numEpochs;
        uint32 blockSize;
        uint16 lambda;
        uint8 samplesPerEpoch;
        DealState state;
        // slot 1
        address provider;
        /// block.timestamp of acceptDeal (0 while Open).
        uint64 acceptedAt;
        uint16 failures;
        uint16 openDisputes;
        // slot 2
        uint64 numBlocks;
        /// Latest posted digest version (0 = none yet).
        uint64 digestVersion;
        /// Write count of the latest posted digest.
        uint64 writeCount;
        /// Global epoch of deal epoch 0: ⌊(acceptedAt − genesis)/epochSeconds⌋ + 1.
        uint64 startEpoch;
        // slot 3
        /// Hash of the latest posted digest.
        bytes32 digestHash;
        // slot 4
        uint128 pricePerEpoch;
        uint128 escrow;
        // slot 5
        uint128 collateral;
        uint128 slashPerFault;
        // slot 6
        /// block.timestamp of the first digest (0 = none yet). Epochs starting after it
        /// have a digest in force and can be faults.
        uint64 firstDigestAt;
        /// Epochs settled (proven or missed) that had a digest in force; closeDeal
        /// faults the rest of the faultable epochs.
        uint32 settledWithDigest;
        /// Epochs of the term at opening (before any exit).
        uint32 termEpochs;
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
        /// Answer deadline, a block timestamp (inclusive).
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
    /// A function of the extension was called directly instead of through the market.
    error WrongContext();
    /// A constructor parameter is below its floor (docs/CONTRACTS.md §1).
    error BelowFloor();
    error ZeroAmount();
    error AlreadyRegistered();
    error NotRegistered();
    error StakeTooLow();
    error StakeLocked();
    error InsufficientStake();
    error CapacityExceeded();
    error NumBlocksNotPowerOfTwo();
    error PriceBelowAsk();
    /// The provider's collateral per block is below the owner's minimum (finding 8).
    error CollateralBelowMin();
    /// A token transfer moved a different amount than asked (fee-on-transfer token).
    error UnsupportedToken();
    /// Only the deal's owner or provider.
    error NotDealParty();
    error UnknownDeal();
    error NotDealOwner();
    error NotDealProvider();
    error WrongDealState();
    error DealNotOver();
    /// A digest was posted: exitBeforeUpload no longer applies.
    error DigestExists();
    /// The upload deadline (acceptedAt + uploadSeconds) has not passed.
    error UploadNotOver();
    /// Disputes are closed: the deal's last deadline + graceSeconds has passed.
    error DisputePeriodOver();
    error DisputesOpen();
    error StaleVersion();
    error WrongNumBlocks();
    error WriteCountTooLarge();
    error LevelRootsMismatch();
    error BadOwnerSignature();
    error BadProviderSignature();
    error NoDigest();
    error DigestMismatch();
    /// The digest given is not the one in force for the epoch (the last one posted
    /// strictly before the epoch's start).
    error DigestNotInForce();
    /// Unknown digest version for the deal.
    error UnknownVersion();
    /// The beacon has not recorded the round of a global epoch's start yet.
    error SeedUnavailable(uint64 round);
    /// A coded block of the wrong length.
    error WrongBlockLength();
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
    /// @notice `startEpoch` is the global epoch of deal epoch 0.
    event DealAccepted(uint256 indexed dealId, uint64 acceptedAt, uint64 startEpoch, uint128 collateral);
    /// @notice A deal ended by closeDeal or exitBeforeUpload. `faultedEpochs` epochs that
    ///         had a digest in force were never settled and were faulted now, `slashed`
    ///         going to the owner. If those faults terminate the deal, this event carries
    ///         escrowRefund = collateralReturned = 0 and is followed by {DealTerminated}
    ///         with the escrow and collateral credited to the owner (each amount appears
    ///         in exactly one event).
    event DealClosed(
        uint256 indexed dealId,
        uint32 faultedEpochs,
        uint128 slashed,
        uint128 escrowRefund,
        uint128 collateralReturned
    );
    /// @notice A party asked to end the deal early: the term is now `numEpochs` epochs.
    event ExitRequested(uint256 indexed dealId, address indexed by, uint32 numEpochs);
    event DealTerminated(uint256 indexed dealId, uint16 failures, uint128 escrowRefund, uint128 collateralToOwner);
    /// @notice The whole digest preimage, so auditors can read every root from logs.
    event DigestPosted(uint256 indexed dealId, uint64 indexed version, bytes32 digestHash, Digest digest);
    /// @notice The seed of global epoch `globalEpoch` was stored: from beacon round
    ///         `round`, or, if `dev` (no beacon; local development only, grindable), from
    ///         blockhash(block.number − 1) of the first touch (round = 0).
    event SeedRecorded(uint64 indexed globalEpoch, uint64 round, bytes32 seed, bool dev);
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

/// @title IDporMarketFull
/// @notice The whole ABI of a deployed {DporMarket} (the market's own functions and
///         those its fallback delegates to {DporMarketExt}); chain/abi/DporMarket.json is
///         generated from it (script/gen-abi checks it matches the two contracts).
///         Semantics: docs/CONTRACTS.md §3 and the implementations' NatSpec.
interface IDporMarketFull is IDporMarket {
    // ------------------------------------------------------------ parameters
    function token() external view returns (address);
    function beacon() external view returns (IRandomnessBeacon);
    function verifier() external view returns (address);
    function extension() external view returns (address);
    function genesis() external view returns (uint64);
    function epochSeconds() external view returns (uint64);
    function answerSeconds() external view returns (uint64);
    function graceSeconds() external view returns (uint64);
    function uploadSeconds() external view returns (uint64);
    function exitNoticeEpochs() external view returns (uint32);
    function disputeBond() external view returns (uint128);
    function challengerShareBps() external view returns (uint16);
    function maxFailures() external view returns (uint16);
    function minStake() external view returns (uint256);
    function devSeeds() external view returns (bool);
    function MIN_EPOCH_SECONDS() external view returns (uint64);
    function MIN_ANSWER_SECONDS() external view returns (uint64);
    function MIN_GRACE_SECONDS() external view returns (uint64);
    function MAX_SECONDS() external view returns (uint64);
    function MIN_MAX_FAILURES() external view returns (uint16);

    // ------------------------------------------------------------ ledger
    function owed(address account) external view returns (uint256);
    function withdraw() external returns (uint256 amount);

    // ------------------------------------------------------------ providers (extension)
    function register(
        bytes calldata peerId,
        string[] calldata multiaddrs,
        uint128 pricePerBlockEpoch,
        uint128 collateralPerBlock,
        uint64 capacityBlocks,
        uint256 stake
    ) external;
    function updateProvider(
        bytes calldata peerId,
        string[] calldata multiaddrs,
        uint128 pricePerBlockEpoch,
        uint128 collateralPerBlock,
        uint64 capacityBlocks
    ) external;
    function addStake(uint256 amount) external;
    function withdrawStake(uint256 amount) external;
    function getProvider(address provider) external view returns (Provider memory);

    // ------------------------------------------------------------ deals
    function dealCount() external view returns (uint256);
    function openDeal(
        address provider,
        uint64 numBlocks,
        uint32 blockSize,
        uint16 lambda,
        uint8 samplesPerEpoch,
        uint32 numEpochs,
        uint128 pricePerBlockEpoch,
        uint128 minCollateralPerBlock
    ) external returns (uint256 dealId);
    function cancelDeal(uint256 dealId) external;
    function acceptDeal(uint256 dealId) external;
    function requestExit(uint256 dealId) external;
    function exitBeforeUpload(uint256 dealId) external;
    function closeDeal(uint256 dealId) external;
    function getDeal(uint256 dealId) external view returns (Deal memory);

    // ------------------------------------------------------------ digests
    function postDigest(Digest calldata d, bytes calldata ownerSig, bytes calldata providerSig) external;
    function digestHash(Digest calldata d) external view returns (bytes32);
    function domainSeparator() external view returns (bytes32);
    /// ERC-5267 (OpenZeppelin EIP712).
    function eip712Domain()
        external
        view
        returns (
            bytes1 fields,
            string memory name,
            string memory version,
            uint256 chainId,
            address verifyingContract,
            bytes32 salt,
            uint256[] memory extensions
        );
    function getDigestRecord(uint256 dealId, uint64 version) external view returns (DigestRecord memory);
    function digestInForce(uint256 dealId, uint64 epoch)
        external
        view
        returns (uint64 version, bytes32 hash, uint64 writeCount);

    // ------------------------------------------------------------ epochs and seeds
    function submitEpochProof(uint256 dealId, uint64 epoch, Digest calldata d, BlockProof[] calldata proofs)
        external;
    function markMissed(uint256 dealId, uint64 epoch) external;
    function globalSeeds(uint64 globalEpoch) external view returns (bytes32);
    function recordSeed(uint64 globalEpoch) external returns (bytes32);
    function touchSeed(uint256 dealId, uint64 epoch) external returns (bytes32);
    function peekSeed(uint256 dealId, uint64 epoch) external view returns (bytes32);
    function epochSample(uint256 dealId, uint64 epoch, uint256 j)
        external
        view
        returns (uint8 runTag, uint64 position);
    function epochWindow(uint256 dealId, uint64 epoch) external view returns (uint256 start, uint256 deadline);
    function epochStatus(uint256 dealId, uint64 epoch) external view returns (EpochStatus);

    // ------------------------------------------------------------ audits and disputes (extension)
    function auditCount() external view returns (uint256);
    function disputeCount() external view returns (uint256);
    function recordAudit(uint256 dealId, uint64 epoch, uint64 version, bool passed, bytes32 transcriptHash)
        external
        returns (uint256 auditId);
    function openDispute(
        uint256 dealId,
        uint64 epoch,
        uint64 version,
        bytes32 transcriptHash,
        uint8 runTag,
        uint64 position,
        uint32 chunkIndex
    ) external returns (uint256 disputeId);
    function answerDispute(uint256 disputeId, Digest calldata d, SampleProof calldata proof) external;
    function slash(uint256 disputeId) external;
    function getDispute(uint256 disputeId) external view returns (Dispute memory);
    function getAudit(uint256 auditId) external view returns (AuditRecord memory);
}
