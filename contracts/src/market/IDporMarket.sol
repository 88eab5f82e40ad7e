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
    ///         force at the epoch's start, see {EpochMissed}), or Challenged: its entry in
    ///         the provider's epoch commitment is under an open challenge
    ///         (docs/COMMITMENTS.md §3), which ends it Proven or Missed.
    enum EpochStatus {
        None,
        Proven,
        Missed,
        Challenged
    }

    /// @notice Challenge on one deal epoch's entry in an epoch commitment
    ///         (docs/COMMITMENTS.md §3): Open → Answered (epoch proven, bond to the
    ///         provider) or Faulted (epoch missed, one fault slashed).
    enum ChallengeState {
        None,
        Open,
        Answered,
        Faulted
    }

    /// @notice A challenge of a deal epoch's commitment entry (docs/COMMITMENTS.md §3, §5).
    struct Challenge {
        // slot 0
        uint256 dealId;
        // slot 1
        /// Deal epoch (0-based) of the challenged entry.
        uint64 epoch;
        /// Who locked the bond; address(0) for a safety draw opened by the market itself.
        address challenger;
        // slot 2
        /// Bond locked (token units); 0 for a safety draw.
        uint128 bond;
        /// Answer deadline, a block timestamp (inclusive).
        uint64 deadline;
        ChallengeState state;
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
        /// First deal epoch {claimEpochs} has not looked at yet (docs/COMMITMENTS.md §4).
        uint32 claimCursor;
        /// Index of the deal in its provider's on-chain deal list while Active
        /// (docs/COMMITMENTS.md §5; {providerDeals}).
        uint32 listIndex;
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
    /// β·K above 64 KiB: the deal's epoch proofs would not fit a transaction (second review).
    error EpochProofTooLarge();
    /// No randomness beacon (blockhash seeds, grindable) on a chain that is not local (second review).
    error DevSeedsNotLocal();
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
    /// An exit was requested (numEpochs < termEpochs): the deal cannot be resized.
    error ExitPending();
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
    /// The beacon has not recorded the round of a global epoch's start yet.
    error SeedUnavailable(uint64 round);
    /// An epoch proof's coded block is not exactly 8·(1 + ⌈β/7⌉) bytes.
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
    /// The provider already committed this global epoch (docs/COMMITMENTS.md §2).
    error CommitmentExists();
    /// The deal's provider posted no commitment for the epoch's global epoch.
    error NotCommitted();
    /// markMissed on a deal epoch whose provider committed its global epoch: it is settled
    /// by a challenge or by {claimEpochs} (docs/COMMITMENTS.md §2). (Named `EpochCommitted`
    /// in the first draft of the spec; an error cannot share the event's name.)
    error CommittedEpoch();
    /// The epoch's challenge window (start + epochSeconds + graceSeconds) is over.
    error ChallengePeriodOver();
    /// The leaf path does not lead from the answer's leaf to the committed root.
    error NotInCommitment();
    /// Only the market's deployer may install the commitments extension, once.
    error NotDeployer();
    /// The commitments extension is already installed.
    error AlreadyInstalled();
    /// The commitments extension is not installed yet (docs/CONTRACTS.md §9).
    error NotInstalled();

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
    /// @notice exitBeforeUpload paid the provider `payment` wei (at most the escrow) for
    ///         the `epochs` global epochs, from acceptance's to the current one, during
    ///         which the never-uploaded deal held its capacity and collateral.
    event UploadLockPaid(uint256 indexed dealId, uint32 epochs, uint128 payment);
    /// @notice A party asked to end the deal early: the term is now `numEpochs` epochs.
    event ExitRequested(uint256 indexed dealId, address indexed by, uint32 numEpochs);
    event DealTerminated(uint256 indexed dealId, uint16 failures, uint128 escrowRefund, uint128 collateralToOwner);
    /// @notice A deal was resized (paper App. A.3; docs/CONTRACTS.md §4.1) from
    ///         `oldNumBlocks` to `newNumBlocks` blocks; from now on its price is
    ///         `pricePerEpoch` wei per epoch, its escrow `escrow` wei (price × unsettled
    ///         epochs) and its collateral `collateral` wei. Follows the {DigestPosted} of
    ///         the new size's first digest.
    event DealResized(
        uint256 indexed dealId,
        uint64 oldNumBlocks,
        uint64 newNumBlocks,
        uint128 pricePerEpoch,
        uint128 escrow,
        uint128 collateral
    );
    /// @notice The whole digest preimage, so auditors can read every root from logs.
    event DigestPosted(uint256 indexed dealId, uint64 indexed version, bytes32 digestHash, Digest digest);
    /// @notice The seed of global epoch `globalEpoch` was stored: from beacon round
    ///         `round`, or, if `dev` (no beacon; local development only, grindable), from
    ///         blockhash(block.number − 1) of the first touch (round = 0).
    event SeedRecorded(uint64 indexed globalEpoch, uint64 round, bytes32 seed, bool dev);
    event EpochProven(uint256 indexed dealId, uint64 indexed epoch, uint64 version, uint128 payment);
    event EpochMissed(uint256 indexed dealId, uint64 indexed epoch, uint128 refund, uint128 slashed);
    /// @notice The missed epoch just marked ({EpochMissed}, slashed = 0) is excused, not a
    ///         fault: beacon round `round`, which seeds it, was not recorded before the
    ///         middle of its window (a beacon outage; docs/CONTRACTS.md §5).
    event EpochExcused(uint256 indexed dealId, uint64 indexed epoch, uint64 round);
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
    /// @notice Provider `provider` committed to its responses of global epoch `g`
    ///         (docs/COMMITMENTS.md §2): Merkle root `root` over `leafCount` leaves (one per
    ///         deal epoch, sorted by deal id; the count is informative, not checked).
    ///         `safetyChallengeId` is the challenge the safety draw opened (§5), 0 if none.
    event EpochCommitted(
        address indexed provider, uint64 indexed g, bytes32 root, uint32 leafCount, uint256 safetyChallengeId
    );
    /// @notice A challenge of deal epoch `epoch`'s commitment entry was opened by
    ///         `challenger` (address(0) = a safety draw of the market), answerable until
    ///         `deadline` (a timestamp, inclusive); `bond` locked (token units).
    event ChallengeOpened(
        uint256 indexed challengeId,
        uint256 indexed dealId,
        uint64 epoch,
        address challenger,
        uint64 deadline,
        uint128 bond
    );
    /// @notice The challenge was answered: the epoch is Proven, the provider was credited
    ///         `pay` (the epoch's price from escrow) and the challenger's `bond`.
    event ChallengeAnswered(
        uint256 indexed challengeId, uint256 indexed dealId, uint64 epoch, uint128 pay, uint128 bond
    );
    /// @notice The challenge was not answered in time: the epoch is Missed and one fault
    ///         slashed. `toChallenger` is the challenger's share of the slash (its bond is
    ///         credited back on top); `toOwner` the rest of the slash plus the epoch's
    ///         escrow refund.
    event ChallengeFaulted(
        uint256 indexed challengeId, uint256 indexed dealId, uint64 epoch, uint128 toChallenger, uint128 toOwner
    );
    /// @notice {claimEpochs} (or {closeDeal}) looked at deal epochs [fromEpoch, toEpoch):
    ///         `proven` of them, committed and unchallenged, became Proven and paid the
    ///         provider `pay` in total.
    event EpochsClaimed(uint256 indexed dealId, uint64 fromEpoch, uint64 toEpoch, uint32 proven, uint128 pay);
    /// @notice The commitments extension (docs/CONTRACTS.md §1) was installed at `commitments`.
    event CommitmentsInstalled(address commitments);
    event Credited(address indexed account, uint256 amount);
    event Withdrawn(address indexed account, uint256 amount);
}

/// @title IDporMarketFull
/// @notice The whole ABI of a deployed {DporMarket} (the market's own functions and
///         those its fallback delegates to {DporMarketExt}); chain/abi/DporMarket.json is
///         generated from it (script/gen-abi checks it matches the two contracts).
///         Semantics: docs/CONTRACTS.md §3 and the implementations' NatSpec.
interface IDporMarketFull is IDporMarket {
    // ------------------------------------------------------------ from OpenZeppelin bases
    // (declared here so the generated ABI decodes every revert and event of the market)
    error ReentrancyGuardReentrantCall();
    error SafeERC20FailedOperation(address token);
    error InvalidShortString();
    error StringTooLong(string str);
    /// ERC-5267.
    event EIP712DomainChanged();

    // ------------------------------------------------------------ parameters
    /// @notice The ERC-20 of escrow, collateral, stakes and bonds.
    function token() external view returns (address);
    /// @notice The randomness beacon; address(0) in dev mode.
    function beacon() external view returns (IRandomnessBeacon);
    /// @notice The DporVerifier the market created.
    function verifier() external view returns (address);
    /// @notice The DporMarketExt the market delegates provider, audit and dispute calls to.
    function extension() external view returns (address);
    /// @notice T0, origin of the epoch grid (deployment timestamp).
    function genesis() external view returns (uint64);
    /// @notice P, seconds per epoch and per proof window.
    function epochSeconds() external view returns (uint64);
    /// @notice Seconds a provider has to answer a dispute.
    function answerSeconds() external view returns (uint64);
    /// @notice Seconds after the last deadline during which disputes may be opened.
    function graceSeconds() external view returns (uint64);
    /// @notice Seconds after acceptance after which a deal with no digest may be exited.
    function uploadSeconds() external view returns (uint64);
    /// @notice Epochs of notice of requestExit after the current epoch.
    function exitNoticeEpochs() external view returns (uint32);
    /// @notice Bond per dispute.
    function disputeBond() external view returns (uint128);
    /// @notice Challenger share of a dispute slash (basis points).
    function challengerShareBps() external view returns (uint16);
    /// @notice Faults that terminate a deal.
    function maxFailures() external view returns (uint16);
    /// @notice Stake needed to accept deals.
    function minStake() external view returns (uint256);
    /// @notice True in dev mode (blockhash seeds: grindable, local only).
    function devSeeds() external view returns (bool);
    /// @notice Floor of epochSeconds (6 h).
    function MIN_EPOCH_SECONDS() external view returns (uint64);
    /// @notice Floor of answerSeconds (15 h).
    function MIN_ANSWER_SECONDS() external view returns (uint64);
    /// @notice Floor of graceSeconds and uploadSeconds (1 day).
    function MIN_GRACE_SECONDS() external view returns (uint64);
    /// @notice Ceiling of every duration (365 days).
    function MAX_SECONDS() external view returns (uint64);
    /// @notice Floor of maxFailures (3).
    function MIN_MAX_FAILURES() external view returns (uint16);

    // ------------------------------------------------------------ ledger
    /// @notice Tokens `account` may pull with withdraw.
    function owed(address account) external view returns (uint256);
    /// @notice Pays the caller everything it is owed.
    function withdraw() external returns (uint256 amount);

    // ------------------------------------------------------------ providers (extension)
    /// @notice Registers the caller as a provider with a stake (extension).
    function register(
        bytes calldata peerId,
        string[] calldata multiaddrs,
        uint128 pricePerBlockEpoch,
        uint128 collateralPerBlock,
        uint64 capacityBlocks,
        uint256 stake
    ) external;
    /// @notice Updates the caller's provider record (extension).
    function updateProvider(
        bytes calldata peerId,
        string[] calldata multiaddrs,
        uint128 pricePerBlockEpoch,
        uint128 collateralPerBlock,
        uint64 capacityBlocks
    ) external;
    /// @notice Adds to the caller's stake (extension).
    function addStake(uint256 amount) external;
    /// @notice Withdraws stake with no active deal (extension).
    function withdrawStake(uint256 amount) external;
    /// @notice The provider record (extension).
    function getProvider(address provider) external view returns (Provider memory);

    // ------------------------------------------------------------ deals
    /// @notice Deals opened; ids are 1..dealCount.
    function dealCount() external view returns (uint256);
    /// @notice Opens a deal; escrow pulled; reverts PriceBelowAsk / CollateralBelowMin.
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
    /// @notice Cancels an Open deal (owner).
    function cancelDeal(uint256 dealId) external;
    /// @notice Accepts an Open deal, collateral pulled (provider).
    function acceptDeal(uint256 dealId) external;
    /// @notice Shortens the term to the current epoch + 1 + exitNoticeEpochs (owner or provider).
    function requestExit(uint256 dealId) external;
    /// @notice Closes a deal with no digest after uploadSeconds (owner or provider); the provider
    ///         is paid the global epochs since acceptance (capped at the escrow), the owner the rest.
    function exitBeforeUpload(uint256 dealId) external;
    /// @notice Closes after the last deadline + grace: claims committed epochs, then faults
    ///         unsettled epochs with a digest in force (commitments extension).
    function closeDeal(uint256 dealId) external;
    /// @notice The deal (state None if unknown).
    function getDeal(uint256 dealId) external view returns (Deal memory);

    // ------------------------------------------------------------ digests
    /// @notice Posts a digest signed by owner and provider (ECDSA or ERC-1271).
    function postDigest(Digest calldata d, bytes calldata ownerSig, bytes calldata providerSig) external;
    /// @notice The EIP-712 hash both parties sign.
    function digestHash(Digest calldata d) external view returns (bytes32);
    /// @notice The EIP-712 domain separator.
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
    /// @notice Resizes a deal to d.numBlocks with its first digest of the new size, a new
    ///         price per epoch and a new collateral, signed by owner and provider (App. A.3).
    function resizeDeal(
        Digest calldata d,
        uint128 pricePerEpoch,
        uint128 collateral,
        bytes calldata ownerSig,
        bytes calldata providerSig
    ) external;
    /// @notice The EIP-712 hash owner and provider sign for a resize.
    function resizeHash(Digest calldata d, uint128 pricePerEpoch, uint128 collateral)
        external
        view
        returns (bytes32);
    /// @notice The stored record of a digest version, with the digest's own N.
    function getDigestRecord(uint256 dealId, uint64 version) external view returns (DigestRecord memory);
    /// @notice The digest in force for a deal epoch (last posted strictly before its start).
    function digestInForce(uint256 dealId, uint64 epoch)
        external
        view
        returns (uint64 version, bytes32 hash, uint64 writeCount);

    // ------------------------------------------------------------ epochs and seeds
    /// @notice Proves a deal epoch with K whole coded blocks against the digest in force.
    function submitEpochProof(uint256 dealId, uint64 epoch, Digest calldata d, BlockProof[] calldata proofs)
        external;
    /// @notice Settles an unproven epoch after its deadline (a fault only with a digest in force,
    ///         excused in beacon mode if its round was recorded only from mid-window on).
    function markMissed(uint256 dealId, uint64 epoch) external;
    /// @notice Stored seed of a global epoch (0 if not stored).
    function globalSeeds(uint64 globalEpoch) external view returns (bytes32);
    /// @notice Stores and returns the seed of a global epoch.
    function recordSeed(uint64 globalEpoch) external returns (bytes32);
    /// @notice Stores the global seed if needed; returns the deal epoch's sample seed.
    function touchSeed(uint256 dealId, uint64 epoch) external returns (bytes32);
    /// @notice The sample seed of a deal epoch without storing.
    function peekSeed(uint256 dealId, uint64 epoch) external view returns (bytes32);
    /// @notice Sample j of a deal epoch: (run tag, position).
    function epochSample(uint256 dealId, uint64 epoch, uint256 j)
        external
        view
        returns (uint8 runTag, uint64 position);
    /// @notice Start and deadline (timestamps) of a deal epoch.
    function epochWindow(uint256 dealId, uint64 epoch) external view returns (uint256 start, uint256 deadline);
    /// @notice Settlement of a deal epoch.
    function epochStatus(uint256 dealId, uint64 epoch) external view returns (EpochStatus);

    // ------------------------------------------------------------ audits and disputes (extension)
    /// @notice Audit records; ids are 1..auditCount.
    function auditCount() external view returns (uint256);
    /// @notice Disputes; ids are 1..disputeCount.
    function disputeCount() external view returns (uint256);
    /// @notice Records an audit outcome, no economic effect (extension).
    function recordAudit(uint256 dealId, uint64 epoch, uint64 version, bool passed, bytes32 transcriptHash)
        external
        returns (uint256 auditId);
    /// @notice Opens a dispute on one chunk of the latest digest, bond pulled (extension).
    function openDispute(
        uint256 dealId,
        uint64 epoch,
        uint64 version,
        bytes32 transcriptHash,
        uint8 runTag,
        uint64 position,
        uint32 chunkIndex
    ) external returns (uint256 disputeId);
    /// @notice Answers a dispute with the chunk proof (extension).
    function answerDispute(uint256 disputeId, Digest calldata d, SampleProof calldata proof) external;
    /// @notice Slashes an unanswered dispute after its deadline (extension).
    function slash(uint256 disputeId) external;
    /// @notice The dispute (extension).
    function getDispute(uint256 disputeId) external view returns (Dispute memory);
    /// @notice The audit record (extension).
    function getAudit(uint256 auditId) external view returns (AuditRecord memory);

    // ------------------------------------------------------------ commitments (second extension, docs/COMMITMENTS.md)
    /// @notice The commitments extension (address(0) until installed).
    function commitments() external view returns (address);
    /// @notice Installs the commitments extension, once, by the market's deployer (extension).
    function installCommitments(address ext) external;
    /// @notice The market itself (answered by the commitments extension).
    function home() external view returns (address);
    /// @notice A commitment draws a deal for an on-chain proof with probability 1/SAFETY_PERIOD (16).
    function SAFETY_PERIOD() external view returns (uint256);
    /// @notice Commits the caller's responses of global epoch g (in g's window, once, seed available).
    function commitEpoch(uint64 g, bytes32 root, uint32 leafCount) external;
    /// @notice The root a provider committed for global epoch g, and whether it committed.
    function getCommitment(address provider, uint64 g) external view returns (bytes32 root, bool committed);
    /// @notice The provider's Active deals, in the order of the safety draw's cumulative weights.
    function providerDeals(address provider) external view returns (uint256[] memory);
    /// @notice The deal at weight offset x (blocks) of the provider's list, 0 if x ≥ its total blocks.
    function safetyDrawTarget(address provider, uint256 x) external view returns (uint256 dealId);
    /// @notice W (blocks) of the provider's safety draw of the current global epoch g: its total blocks at g's start.
    function safetyDrawWeight(address provider, uint64 g) external view returns (uint256 weight);
    /// @notice Challenges a committed deal epoch's entry; bond pulled.
    function challengeEntry(uint256 dealId, uint64 epoch) external returns (uint256 challengeId);
    /// @notice Answers a challenge with the epoch's whole-block proofs and the entry's leaf path.
    function answerChallenge(
        uint256 challengeId,
        Digest calldata d,
        BlockProof[] calldata proofs,
        uint256 leafIndex,
        bytes32[] calldata leafPath
    ) external;
    /// @notice Faults an unanswered challenge after its deadline.
    function faultChallenge(uint256 challengeId) external;
    /// @notice The challenge (state None if unknown).
    function getChallenge(uint256 challengeId) external view returns (Challenge memory);
    /// @notice Challenges; ids are 1..challengeCount.
    function challengeCount() external view returns (uint256);
    /// @notice Pays committed epochs whose challenge window closed, up to deal epoch upTo (exclusive).
    function claimEpochs(uint256 dealId, uint64 upTo) external;
}
