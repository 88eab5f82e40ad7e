// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {MarketBase} from "./MarketBase.sol";
import {DporFenwick} from "../lib/DporFenwick.sol";

/// @title DealManager
/// @notice Deal life cycle: open (escrow), cancel, accept (collateral, the provider's
///         deal list), exits with notice. docs/CONTRACTS.md §2, §6. (`closeDeal` is in the
///         commitments extension, {EpochCommitments}: it settles committed epochs first.)
abstract contract DealManager is MarketBase {
    /// @dev Largest N accepted (2^40 blocks).
    uint256 internal constant MAX_BLOCKS = 1 << 40;
    /// @dev Largest block size accepted (1 MiB).
    uint256 internal constant MAX_BLOCK_SIZE = 1 << 20;
    /// @dev Largest β·K accepted, in bytes (64 KiB): the data the K whole coded blocks
    ///      of one epoch proof carry. An epoch proof is then at most ≈ 76 KB of calldata
    ///      and about 4.4 M gas (contracts/test/attacks/F12_UnprovableBlockSize.t.sol
    ///      measures it), well below EIP-7825's cap of 2^24 gas per transaction.
    ///      Without it an owner could open a deal with β = 1 MiB, whose proof (1.2 MB,
    ///      ≈ 64 M gas) no transaction can carry: the provider would miss every epoch
    ///      and lose its whole collateral to the owner (second review, high).
    uint256 internal constant MAX_EPOCH_PROOF_DATA = 1 << 16;

    /// @notice Opens a deal with `provider`, escrowing
    ///         pricePerBlockEpoch · numBlocks · numEpochs tokens from the caller (approve first).
    /// @dev Anyone may open a deal; the caller becomes its owner. The collateral is fixed
    ///      now from the provider's current rate, which must be at least the owner's
    ///      `minCollateralPerBlock` (so a provider cannot lower it just before; finding 8).
    /// @param provider A registered provider.
    /// @param numBlocks N, a power of two (1..2^40).
    /// @param blockSize β in bytes (1..2^20, and β·K ≤ 2^16: {EpochProofTooLarge}).
    /// @param lambda Audit samples per run for off-chain audits (≥ 1).
    /// @param samplesPerEpoch K, on-chain samples per epoch proof (1..8; 0 means 1).
    /// @param numEpochs Duration in epochs (≥ 1).
    /// @param pricePerBlockEpoch Offered price, at least the provider's ask ({PriceBelowAsk}).
    /// @param minCollateralPerBlock The least collateral per block the owner accepts
    ///        ({CollateralBelowMin} if the provider's current rate is lower).
    /// @return dealId The new deal's id.
    function openDeal(
        address provider,
        uint64 numBlocks,
        uint32 blockSize,
        uint16 lambda,
        uint8 samplesPerEpoch,
        uint32 numEpochs,
        uint128 pricePerBlockEpoch,
        uint128 minCollateralPerBlock
    ) external nonReentrant returns (uint256 dealId) {
        Provider storage p = _providers[provider];
        if (!p.registered) revert NotRegistered();
        if (numBlocks == 0 || numBlocks > MAX_BLOCKS || numBlocks & (numBlocks - 1) != 0) {
            revert NumBlocksNotPowerOfTwo();
        }
        if (samplesPerEpoch == 0) samplesPerEpoch = 1;
        if (
            blockSize == 0 || blockSize > MAX_BLOCK_SIZE || lambda == 0 || samplesPerEpoch > 8 || numEpochs == 0
        ) revert InvalidParameter();
        if (uint256(blockSize) * samplesPerEpoch > MAX_EPOCH_PROOF_DATA) revert EpochProofTooLarge();
        if (pricePerBlockEpoch < p.pricePerBlockEpoch) revert PriceBelowAsk();
        if (p.collateralPerBlock < minCollateralPerBlock) revert CollateralBelowMin();
        uint256 perEpoch = uint256(pricePerBlockEpoch) * numBlocks;
        uint256 escrow = perEpoch * numEpochs;
        uint256 collateral = uint256(p.collateralPerBlock) * numBlocks;
        if (escrow > type(uint128).max || collateral > type(uint128).max) revert InvalidParameter();
        dealId = ++dealCount;
        Deal storage d = _deals[dealId];
        d.owner = msg.sender;
        d.numEpochs = numEpochs;
        d.termEpochs = numEpochs;
        d.blockSize = blockSize;
        d.lambda = lambda;
        d.samplesPerEpoch = samplesPerEpoch;
        d.state = DealState.Open;
        d.provider = provider;
        d.numBlocks = numBlocks;
        d.pricePerEpoch = uint128(perEpoch);
        d.escrow = uint128(escrow);
        d.collateral = uint128(collateral);
        d.slashPerFault = uint128(Math.ceilDiv(collateral, maxFailures));
        _emitOpened(dealId, d);
        if (escrow > 0) _pullTokens(msg.sender, escrow);
    }

    function _emitOpened(uint256 dealId, Deal storage d) private {
        emit DealOpened(
            dealId,
            d.owner,
            d.provider,
            d.numBlocks,
            d.blockSize,
            d.lambda,
            d.samplesPerEpoch,
            d.numEpochs,
            d.pricePerEpoch,
            d.escrow,
            d.collateral
        );
    }

    /// @notice Cancels an open (not yet accepted) deal; the escrow is sent back to the owner.
    /// @dev Only the deal's owner, only in state Open.
    function cancelDeal(uint256 dealId) external nonReentrant {
        Deal storage d = _deal(dealId);
        if (msg.sender != d.owner) revert NotDealOwner();
        if (d.state != DealState.Open) revert WrongDealState();
        uint128 refund = d.escrow;
        d.escrow = 0;
        d.collateral = 0;
        d.state = DealState.Cancelled;
        emit DealCancelled(dealId, refund);
        if (refund > 0) _pushTokens(d.owner, refund);
    }

    /// @notice Accepts an open deal, locking its collateral from the caller (approve first).
    ///         Deal epoch 0 is the next global epoch: startEpoch = ⌊(now − genesis)/P⌋ + 1.
    /// @dev Only the deal's provider, only in state Open, with stake ≥ {minStake} and
    ///      free capacity for the deal's blocks.
    function acceptDeal(uint256 dealId) external nonReentrant {
        Deal storage d = _deal(dealId);
        if (msg.sender != d.provider) revert NotDealProvider();
        if (d.state != DealState.Open) revert WrongDealState();
        Provider storage p = _providers[msg.sender];
        if (p.stake < minStake) revert StakeTooLow();
        uint64 n = d.numBlocks;
        uint64 used = p.usedBlocks;
        if (uint256(used) + n > p.capacityBlocks) revert CapacityExceeded();
        ProviderBook storage b = _books[msg.sender];
        _noteListChange(b, used);
        p.usedBlocks = used + n;
        p.activeDeals += 1;
        uint256 len = b.deals.length;
        d.listIndex = uint32(len);
        b.deals.push(dealId);
        DporFenwick.push(b.tree, len + 1, n);
        d.state = DealState.Active;
        d.acceptedAt = uint64(block.timestamp);
        d.startEpoch = uint64((block.timestamp - genesis) / epochSeconds + 1);
        uint128 collateral = d.collateral;
        emit DealAccepted(dealId, d.acceptedAt, d.startEpoch, collateral);
        if (collateral > 0) _pullTokens(msg.sender, collateral);
    }

    /// @notice Ends the deal early with notice (finding 9): the term becomes the current
    ///         deal epoch plus {exitNoticeEpochs} more epochs (never longer than before).
    ///         Every epoch up to the new end must still be proven, disputes stay possible
    ///         until the new last deadline + {graceSeconds}, and {closeDeal} then refunds
    ///         the escrow of the dropped epochs to the owner. No fault is skipped.
    /// @dev Only the deal's owner or provider, deal Active.
    function requestExit(uint256 dealId) external {
        Deal storage d = _activeDeal(dealId);
        if (msg.sender != d.owner && msg.sender != d.provider) revert NotDealParty();
        uint256 g = (block.timestamp - genesis) / epochSeconds; // current global epoch
        uint256 next = g >= d.startEpoch ? g - d.startEpoch + 1 : 0; // first deal epoch not started
        uint256 end = next + exitNoticeEpochs;
        if (end < d.numEpochs) d.numEpochs = uint32(end);
        emit ExitRequested(dealId, msg.sender, d.numEpochs);
    }

    /// @notice The deal `dealId` (state None if unknown). Anyone.
    function getDeal(uint256 dealId) external view returns (Deal memory) {
        return _deals[dealId];
    }
}
