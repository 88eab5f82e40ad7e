// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {IDporMarket} from "./IDporMarket.sol";
import {IRandomnessBeacon} from "./IRandomnessBeacon.sol";
import {DporVerifier} from "./DporVerifier.sol";
import {Digest, StoredDigest, MarketParams} from "../lib/DporTypes.sol";
import {DporDigest} from "../lib/DporDigest.sol";
import {DporFenwick} from "../lib/DporFenwick.sol";

/// @title MarketBase
/// @notice Storage, parameters, the epoch grid, seeds, settlement and the pull-payment
///         ledger shared by the market's parts (docs/CONTRACTS.md §1, §2, §5). Both
///         {DporMarket} and {DporMarketExt} (reached by delegatecall from the market's
///         fallback) derive from it, so they share one storage layout; no other
///         contract in either hierarchy declares state variables.
abstract contract MarketBase is IDporMarket, ReentrancyGuard, EIP712 {
    using SafeERC20 for IERC20;

    /// @notice Floor of `epochSeconds` (6 h; docs/CONTRACTS.md §1: Sia's proof window is 144 blocks ≈ 24 h).
    uint64 public constant MIN_EPOCH_SECONDS = 6 hours;
    /// @notice Floor of `answerSeconds` (15 h = Filecoin's 1800-epoch dispute window of 30-s epochs).
    uint64 public constant MIN_ANSWER_SECONDS = 15 hours;
    /// @notice Floor of `graceSeconds` and `uploadSeconds` (1 day).
    uint64 public constant MIN_GRACE_SECONDS = 1 days;
    /// @notice Ceiling of every duration parameter (365 days), so no deadline can wrap a uint64.
    uint64 public constant MAX_SECONDS = 365 days;
    /// @notice Floor of `maxFailures`.
    uint16 public constant MIN_MAX_FAILURES = 3;

    /// @notice The ERC-20 used for escrow, collateral, stakes and bonds (a plain token:
    ///         fee-on-transfer tokens are rejected by a balance-delta check on every pull).
    IERC20 public immutable token;
    /// @notice The randomness beacon; address(0) = dev mode (blockhash seeds, grindable, local only).
    IRandomnessBeacon public immutable beacon;
    /// @notice The proof checker the market deployed in its constructor.
    DporVerifier public immutable verifier;
    /// @dev The market's address: code of this hierarchy runs only in its context
    ///      ({DporMarketExt} refuses direct calls, see {_onlyHome}).
    address internal immutable _home;
    /// @notice T0, origin of the epoch grid: the deployment block's timestamp.
    uint64 public immutable genesis;
    /// @notice P, seconds per epoch; global epoch G covers [T0 + G·P, T0 + (G+1)·P).
    uint64 public immutable epochSeconds;
    /// @notice Seconds a provider has to answer a dispute.
    uint64 public immutable answerSeconds;
    /// @notice Seconds after a deal's last deadline during which disputes may still be opened.
    uint64 public immutable graceSeconds;
    /// @notice Seconds after acceptance after which a deal with no digest may be exited.
    uint64 public immutable uploadSeconds;
    /// @notice Epochs of notice of an exit, after the current epoch.
    uint32 public immutable exitNoticeEpochs;
    /// @notice Bond a challenger locks when opening a dispute.
    uint128 public immutable disputeBond;
    /// @notice Share of a dispute slash paid to the challenger, in basis points.
    uint16 public immutable challengerShareBps;
    /// @notice Faults (missed epochs + lost disputes) that terminate a deal.
    uint16 public immutable maxFailures;
    /// @notice Stake a provider must hold to accept deals.
    uint256 public immutable minStake;

    mapping(address => Provider) internal _providers;
    mapping(uint256 => Deal) internal _deals;
    /// @notice Number of deals opened; deal ids are 1..dealCount.
    uint256 public dealCount;
    /// @notice Tokens each account may pull with {withdraw}.
    mapping(address => uint256) public owed;
    /// @notice Seed of a global epoch, stored on first touch (0 = not stored yet); shared by all deals.
    mapping(uint64 => bytes32) public globalSeeds;
    /// @dev Per deal and version: the digest records (history kept for epoch binding;
    ///      each with its own N, which {resizeDeal} may change for later versions).
    mapping(uint256 => mapping(uint64 => StoredDigest)) internal _digests;
    /// @dev 2 bits of {EpochStatus} per epoch, 128 epochs per word.
    mapping(uint256 => mapping(uint256 => uint256)) internal _epochBits;
    mapping(uint256 => AuditRecord) internal _audits;
    /// @notice Number of audit records; ids are 1..auditCount.
    uint256 public auditCount;
    mapping(uint256 => Dispute) internal _disputes;
    /// @notice Number of disputes; ids are 1..disputeCount.
    uint256 public disputeCount;

    /// @dev What the market keeps per provider for epoch commitments (docs/COMMITMENTS.md).
    struct ProviderBook {
        /// The provider's Active deals (appended by acceptDeal, swap-and-pop on release).
        uint256[] deals;
        /// Global epoch of the last change to `deals` or to one of their numBlocks (0 before any).
        uint64 changedEpoch;
        /// The total weight Σ numBlocks of `deals` at the start of `changedEpoch`, blocks
        /// (the safety draw's W, §5). The current total is the provider's `usedBlocks`,
        /// which acceptDeal, _release and resizeDeal keep equal to Σ numBlocks of `deals`.
        uint64 weightAtChange;
        /// Committed root per global epoch (bytes32(0) for an empty commitment).
        mapping(uint64 => bytes32) roots;
        /// Committed-epochs bitmap: bit g & 255 of word g >> 8.
        mapping(uint256 => uint256) committed;
        /// Fenwick tree over the positions of `deals` (position i + 1 = deals[i]), weights
        /// = numBlocks, four 64-bit nodes per word ({DporFenwick}; the safety draw's descent).
        mapping(uint256 => uint256) tree;
    }

    mapping(address => ProviderBook) internal _books;
    mapping(uint256 => Challenge) internal _challenges;
    /// @dev Number of challenges; ids are 1..count (view `challengeCount` in the commitments extension).
    uint256 internal _challengeCount;
    /// @dev The commitments extension ({DporCommitmentsExt}), installed once by the deployer.
    address internal _commitments;

    /// @dev Reverts {InvalidParameter} on a zero token, a share above 100 % or a duration
    ///      above {MAX_SECONDS}; {BelowFloor} on a parameter under its floor;
    ///      {DevSeedsNotLocal} without a beacon on any chain but a local one (chain id
    ///      31337: anvil, Hardhat; 1337: Ganache): blockhash seeds are grindable.
    ///      `genesis_` is T0 of the grid: the market's deployment timestamp (the
    ///      extensions get the market's).
    constructor(
        IERC20 token_,
        IRandomnessBeacon beacon_,
        MarketParams memory p,
        DporVerifier verifier_,
        address home_,
        uint64 genesis_
    ) EIP712("dpor", "1") {
        if (address(token_) == address(0) || p.challengerShareBps > 10_000) revert InvalidParameter();
        if (address(beacon_) == address(0) && block.chainid != 31337 && block.chainid != 1337) {
            revert DevSeedsNotLocal();
        }
        if (
            p.epochSeconds > MAX_SECONDS || p.answerSeconds > MAX_SECONDS || p.graceSeconds > MAX_SECONDS
                || p.uploadSeconds > MAX_SECONDS || p.exitNoticeEpochs > 1000
        ) revert InvalidParameter();
        if (
            p.epochSeconds < MIN_EPOCH_SECONDS || p.answerSeconds < MIN_ANSWER_SECONDS
                || p.graceSeconds < MIN_GRACE_SECONDS || p.uploadSeconds < MIN_GRACE_SECONDS
                || p.exitNoticeEpochs == 0 || p.maxFailures < MIN_MAX_FAILURES
        ) revert BelowFloor();
        token = token_;
        beacon = beacon_;
        verifier = verifier_;
        _home = home_;
        genesis = genesis_;
        epochSeconds = p.epochSeconds;
        answerSeconds = p.answerSeconds;
        graceSeconds = p.graceSeconds;
        uploadSeconds = p.uploadSeconds;
        exitNoticeEpochs = p.exitNoticeEpochs;
        disputeBond = p.disputeBond;
        challengerShareBps = p.challengerShareBps;
        maxFailures = p.maxFailures;
        minStake = p.minStake;
    }

    /// @notice Pays the caller everything it is owed (pull payment).
    /// @dev Callable by anyone with a positive {owed} balance.
    /// @return amount The amount transferred.
    function withdraw() external nonReentrant returns (uint256 amount) {
        amount = owed[msg.sender];
        if (amount == 0) revert NothingOwed();
        owed[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        token.safeTransfer(msg.sender, amount);
    }

    /// @notice True when seeds come from blockhash (no beacon): LOCAL DEVELOPMENT ONLY.
    ///         Whoever touches a seed first and any block builder can re-roll it at will
    ///         (no bound on bias); docs/CONTRACTS.md §5.
    function devSeeds() external view returns (bool) {
        return address(beacon) == address(0);
    }

    // ------------------------------------------------------------ internals

    /// @dev Reverts unless running in the market's context (no direct calls to the extension).
    function _onlyHome() internal view {
        if (address(this) != _home) revert WrongContext();
    }

    /// @dev EIP-712 hash of a digest preimage (ENCODING §5), checked against a stored hash.
    function _digestHashOf(Digest calldata d) internal view returns (bytes32) {
        return _hashTypedDataV4(DporDigest.structHash(d));
    }

    function _credit(address account, uint256 amount) internal {
        if (amount == 0) return;
        owed[account] += amount;
        emit Credited(account, amount);
    }

    /// @dev Pulls exactly `amount` (reverts {UnsupportedToken} if the balance moved by
    ///      anything else: fee-on-transfer or rebasing-on-transfer tokens).
    function _pullTokens(address from, uint256 amount) internal {
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(from, address(this), amount);
        if (token.balanceOf(address(this)) - before != amount) revert UnsupportedToken();
    }

    function _pushTokens(address to, uint256 amount) internal {
        token.safeTransfer(to, amount);
    }

    function _deal(uint256 dealId) internal view returns (Deal storage d) {
        d = _deals[dealId];
        if (d.state == DealState.None) revert UnknownDeal();
    }

    function _activeDeal(uint256 dealId) internal view returns (Deal storage d) {
        d = _deal(dealId);
        if (d.state != DealState.Active) revert WrongDealState();
    }

    /// @dev Frees the provider's capacity reserved by an accepted deal and removes it
    ///      from the provider's deal list (swap-and-pop, docs/COMMITMENTS.md §5): the last
    ///      deal moves to its position, in the list and in the Fenwick tree.
    function _release(Deal storage d) internal {
        address who = d.provider;
        uint64 n = d.numBlocks;
        Provider storage p = _providers[who];
        ProviderBook storage b = _books[who];
        uint64 used = p.usedBlocks;
        _noteListChange(b, used);
        p.usedBlocks = used - n;
        p.activeDeals -= 1;
        uint256[] storage list = b.deals;
        uint256 i = d.listIndex;
        uint256 len = list.length;
        uint256 last = list[len - 1];
        Deal storage l = _deals[last];
        unchecked {
            // position i + 1 takes the last deal's weight (a zero delta when i is the last)
            DporFenwick.add(b.tree, i + 1, uint64(l.numBlocks - n), len - 1);
        }
        DporFenwick.pop(b.tree, len);
        list[i] = last;
        l.listIndex = uint32(i);
        list.pop();
    }

    /// @dev Before a change to a provider's deal list or to a listed deal's numBlocks,
    ///      `used` being the provider's usedBlocks before it: the first change in a global
    ///      epoch records the total weight at the epoch's start (the safety draw's W,
    ///      docs/COMMITMENTS.md §5).
    function _noteListChange(ProviderBook storage b, uint64 used) internal {
        uint64 g = uint64((block.timestamp - genesis) / epochSeconds);
        if (b.changedEpoch != g) {
            b.changedEpoch = g;
            b.weightAtChange = used;
        }
    }

    /// @dev Whether `provider` committed global epoch `g`.
    function _isCommitted(address provider, uint256 g) internal view returns (bool) {
        return (_books[provider].committed[g >> 8] >> (g & 255)) & 1 == 1;
    }

    /// @dev Counts `n` faults and takes n slashes (at most the collateral left) out of the collateral.
    function _fault(Deal storage d, uint256 n) internal returns (uint128 amount) {
        uint256 want = uint256(d.slashPerFault) * n;
        amount = want < d.collateral ? uint128(want) : d.collateral;
        d.collateral -= amount;
        uint256 f = uint256(d.failures) + n;
        d.failures = f > type(uint16).max ? type(uint16).max : uint16(f);
    }

    /// @dev Empties a deal's escrow and collateral and releases its capacity; returns
    ///      what it held so the caller can credit it (deal close and termination).
    function _drain(Deal storage d) internal returns (uint128 esc, uint128 col) {
        esc = d.escrow;
        col = d.collateral;
        d.escrow = 0;
        d.collateral = 0;
        _release(d);
    }

    /// @dev Ends an active deal that reached {maxFailures}: the owner gets the unspent
    ///      escrow and what is left of the collateral.
    function _maybeTerminate(uint256 dealId, Deal storage d) internal {
        if (d.state != DealState.Active || d.failures < maxFailures) return;
        d.state = DealState.Terminated;
        (uint128 esc, uint128 col) = _drain(d);
        emit DealTerminated(dealId, d.failures, esc, col);
        _credit(d.owner, uint256(esc) + col);
    }

    /// @dev Start time of global epoch `g`: T0 + g·P.
    function _globalStart(uint256 g) internal view returns (uint256) {
        return uint256(genesis) + g * epochSeconds;
    }

    /// @dev Deal epoch e is global epoch startEpoch + e; proofs are accepted in
    ///      [start, start + P), it can be marked missed from `deadline` = start + P on.
    function _window(Deal storage d, uint256 epoch) internal view returns (uint256 start, uint256 deadline) {
        if (epoch >= d.numEpochs) revert EpochOutOfRange();
        start = _globalStart(uint256(d.startEpoch) + epoch);
        deadline = start + epochSeconds;
    }

    /// @dev The deadline of the deal's last epoch (start of global epoch startEpoch + numEpochs).
    function _lastDeadline(Deal storage d) internal view returns (uint256) {
        return _globalStart(uint256(d.startEpoch) + d.numEpochs);
    }

    /// @dev First deal epoch with a digest in force (its start is after the first digest),
    ///      or type(uint256).max while there is no digest.
    function _firstFaultable(Deal storage d) internal view returns (uint256) {
        uint256 t = d.firstDigestAt;
        if (t == 0) return type(uint256).max;
        return (t - genesis) / epochSeconds + 1 - d.startEpoch;
    }

    function _epochStatus(uint256 dealId, uint256 epoch) internal view returns (EpochStatus) {
        return EpochStatus((_epochBits[dealId][epoch >> 7] >> ((epoch & 127) * 2)) & 3);
    }

    /// @dev Marks an unsettled epoch (reverts {EpochSettled} if already settled) and
    ///      counts it in `settledWithDigest` when a digest was in force. Returns whether
    ///      it had a digest in force (i.e. whether missing it is a fault).
    function _settleEpoch(uint256 dealId, Deal storage d, uint256 epoch, EpochStatus s)
        internal
        returns (bool inForce)
    {
        uint256 shift = (epoch & 127) * 2;
        uint256 w = _epochBits[dealId][epoch >> 7];
        if ((w >> shift) & 3 != 0) revert EpochSettled();
        _epochBits[dealId][epoch >> 7] = w | (uint256(s) << shift);
        inForce = epoch >= _firstFaultable(d);
        if (inForce) d.settledWithDigest += 1;
    }

    /// @dev The seed of global epoch `g` without storing it: stored, else the beacon's
    ///      randomness of roundAt(start_g) (reverts {SeedUnavailable}), else in dev mode
    ///      blockhash(block.number − 1) once start_g has passed ({EpochNotStarted}).
    function _peekGlobalSeed(uint64 g) internal view returns (bytes32 seed, uint64 round) {
        seed = globalSeeds[g];
        if (seed != bytes32(0)) return (seed, 0);
        uint256 start = _globalStart(g);
        if (address(beacon) != address(0)) {
            round = beacon.roundAt(start);
            seed = beacon.randomness(round);
            if (seed == bytes32(0)) revert SeedUnavailable(round);
        } else {
            if (block.timestamp < start) revert EpochNotStarted();
            seed = blockhash(block.number - 1);
            if (seed == bytes32(0)) seed = bytes32(uint256(1));
        }
    }

    /// @dev Stores (on first touch) and returns the seed of global epoch `g`.
    function _touchGlobalSeed(uint64 g) internal returns (bytes32 seed) {
        seed = globalSeeds[g];
        if (seed != bytes32(0)) return seed;
        uint64 round;
        (seed, round) = _peekGlobalSeed(g);
        globalSeeds[g] = seed;
        emit SeedRecorded(g, round, seed, address(beacon) == address(0));
    }

    /// @dev Per-deal sample seed S = keccak256(abi.encode(seed(G), dealId, e)) (ENCODING §9).
    function _sampleSeed(bytes32 globalSeed, uint256 dealId, uint256 epoch) internal pure returns (bytes32) {
        return keccak256(abi.encode(globalSeed, dealId, epoch));
    }

    /// @dev The record of the digest in force for deal epoch `epoch` (the last posted
    ///      strictly before the epoch's start), and its version; version 0 if none.
    function _inForce(uint256 dealId, Deal storage d, uint256 start)
        internal
        view
        returns (uint64 version, StoredDigest storage rec)
    {
        version = d.digestVersion;
        rec = _digests[dealId][version];
        // Walk back from the latest: digests posted in the epoch's window or later are
        // skipped. Used by views only; proofs name their version (O(1) check).
        while (version != 0 && rec.postedAt >= start) {
            version = rec.prevVersion;
            rec = _digests[dealId][version];
        }
    }

    /// @dev Checks `d` is the digest in force at `start` (the last posted strictly before
    ///      it: {DigestNotInForce}) and its preimage ({DigestMismatch}); returns its hash.
    function _checkInForce(uint256 dealId, Digest calldata d, uint256 start) internal view returns (bytes32 dh) {
        StoredDigest storage rec = _digests[dealId][d.version];
        uint64 postedAt = rec.postedAt;
        if (postedAt == 0 || postedAt >= start) revert DigestNotInForce();
        uint64 next = rec.nextVersion;
        if (next != 0 && _digests[dealId][next].postedAt < start) revert DigestNotInForce();
        dh = rec.digestHash;
        if (_digestHashOf(d) != dh) revert DigestMismatch();
    }
}
