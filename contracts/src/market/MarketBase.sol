// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {IDporMarket} from "./IDporMarket.sol";

/// @title MarketBase
/// @notice Storage, parameters and the pull-payment ledger shared by the market's parts.
abstract contract MarketBase is IDporMarket, ReentrancyGuard {
    using SafeERC20 for IERC20;

    /// @notice The ERC-20 used for escrow, collateral, stakes and bonds.
    IERC20 public immutable token;
    /// @notice L1 blocks per epoch (1..256, so a proof window fits the blockhash window).
    uint64 public immutable epochBlocks;
    /// @notice Blocks the provider has to answer a dispute.
    uint64 public immutable disputeWindow;
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
    /// @notice Seed of (deal, epoch), stored on first touch (0 = not touched yet).
    mapping(uint256 => mapping(uint256 => bytes32)) public epochSeeds;
    /// @dev 2 bits of {EpochStatus} per epoch, 128 epochs per word.
    mapping(uint256 => mapping(uint256 => uint256)) internal _epochBits;
    mapping(uint256 => AuditRecord) internal _audits;
    /// @notice Number of audit records; ids are 1..auditCount.
    uint256 public auditCount;
    mapping(uint256 => Dispute) internal _disputes;
    /// @notice Number of disputes; ids are 1..disputeCount.
    uint256 public disputeCount;

    constructor(
        IERC20 token_,
        uint64 epochBlocks_,
        uint64 disputeWindow_,
        uint128 disputeBond_,
        uint16 challengerShareBps_,
        uint16 maxFailures_,
        uint256 minStake_
    ) {
        if (
            address(token_) == address(0) || epochBlocks_ == 0 || epochBlocks_ > 256 || disputeWindow_ == 0
                || challengerShareBps_ > 10_000 || maxFailures_ == 0
        ) revert InvalidParameter();
        token = token_;
        epochBlocks = epochBlocks_;
        disputeWindow = disputeWindow_;
        disputeBond = disputeBond_;
        challengerShareBps = challengerShareBps_;
        maxFailures = maxFailures_;
        minStake = minStake_;
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

    // ------------------------------------------------------------ internals

    function _credit(address account, uint256 amount) internal {
        if (amount == 0) return;
        owed[account] += amount;
        emit Credited(account, amount);
    }

    function _pullTokens(address from, uint256 amount) internal {
        token.safeTransferFrom(from, address(this), amount);
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

    /// @dev Frees the provider's capacity reserved by an accepted deal.
    function _release(Deal storage d) internal {
        Provider storage p = _providers[d.provider];
        p.usedBlocks -= d.numBlocks;
        p.activeDeals -= 1;
    }

    /// @dev Counts a fault and takes the slash amount out of the deal's collateral.
    function _fault(Deal storage d) internal returns (uint128 amount) {
        amount = d.slashPerFault < d.collateral ? d.slashPerFault : d.collateral;
        d.collateral -= amount;
        d.failures += 1;
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

    /// @dev Epoch e's seed block s_e = acceptedAt + e·epochBlocks; proofs are accepted
    ///      in blocks (s_e, s_e + epochBlocks].
    function _window(Deal storage d, uint256 epoch) internal view returns (uint256 seedBlock, uint256 deadline) {
        if (epoch >= d.numEpochs) revert EpochOutOfRange();
        seedBlock = uint256(d.acceptedAt) + epoch * epochBlocks;
        deadline = seedBlock + epochBlocks;
    }

    function _epochStatus(uint256 dealId, uint256 epoch) internal view returns (EpochStatus) {
        return EpochStatus((_epochBits[dealId][epoch >> 7] >> ((epoch & 127) * 2)) & 3);
    }

    /// @dev Marks an unsettled epoch; reverts {EpochSettled} if already settled.
    function _settleEpoch(uint256 dealId, uint256 epoch, EpochStatus s) internal {
        uint256 shift = (epoch & 127) * 2;
        uint256 w = _epochBits[dealId][epoch >> 7];
        if ((w >> shift) & 3 != 0) revert EpochSettled();
        _epochBits[dealId][epoch >> 7] = w | (uint256(s) << shift);
    }

    /// @dev The seed the contract would store for (deal, epoch) now: the hash of the seed
    ///      block if it is among the last 256 blocks, else (late first touch) of the most
    ///      recent block s_e + 256·m that still is.
    function _computeSeed(uint256 dealId, uint256 epoch, uint256 seedBlock)
        internal
        view
        returns (bytes32 seed, uint256 source)
    {
        if (block.number <= seedBlock) revert EpochNotStarted();
        source = seedBlock;
        if (block.number - seedBlock > 256) source = seedBlock + ((block.number - 1 - seedBlock) / 256) * 256;
        seed = keccak256(abi.encode(blockhash(source), dealId, epoch));
    }

    function _touchSeed(uint256 dealId, uint256 epoch, uint256 seedBlock) internal returns (bytes32 seed) {
        seed = epochSeeds[dealId][epoch];
        if (seed != bytes32(0)) return seed;
        uint256 source;
        (seed, source) = _computeSeed(dealId, epoch, seedBlock);
        epochSeeds[dealId][epoch] = seed;
        emit EpochSeeded(dealId, uint64(epoch), source, seed);
    }
}
