// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {ProviderRegistry} from "./ProviderRegistry.sol";

/// @title DealManager
/// @notice Deal life cycle: open (escrow), cancel, accept (collateral), close.
abstract contract DealManager is ProviderRegistry {
    /// @dev Largest N accepted (2^40 blocks).
    uint256 internal constant MAX_BLOCKS = 1 << 40;
    /// @dev Largest block size accepted (1 MiB).
    uint256 internal constant MAX_BLOCK_SIZE = 1 << 20;

    /// @notice Opens a deal with `provider`, escrowing
    ///         pricePerBlockEpoch · numBlocks · numEpochs tokens from the caller (approve first).
    /// @dev Anyone may open a deal; the caller becomes its owner. The collateral is fixed
    ///      now from the provider's current rate.
    /// @param provider A registered provider.
    /// @param numBlocks N, a power of two (1..2^40).
    /// @param blockSize β in bytes (1..2^20).
    /// @param lambda Audit samples per run for off-chain audits (≥ 1).
    /// @param samplesPerEpoch K, on-chain samples per epoch proof (1..8; 0 means 1).
    /// @param numEpochs Duration in epochs (≥ 1).
    /// @param pricePerBlockEpoch Offered price, at least the provider's ask.
    /// @return dealId The new deal's id.
    function openDeal(
        address provider,
        uint64 numBlocks,
        uint32 blockSize,
        uint16 lambda,
        uint8 samplesPerEpoch,
        uint32 numEpochs,
        uint128 pricePerBlockEpoch
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
        if (pricePerBlockEpoch < p.pricePerBlockEpoch) revert PriceBelowAsk();
        uint256 perEpoch = uint256(pricePerBlockEpoch) * numBlocks;
        uint256 escrow = perEpoch * numEpochs;
        uint256 collateral = uint256(p.collateralPerBlock) * numBlocks;
        if (escrow > type(uint128).max || collateral > type(uint128).max) revert InvalidParameter();

        dealId = ++dealCount;
        Deal storage d = _deals[dealId];
        d.owner = msg.sender;
        d.numEpochs = numEpochs;
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
        emit DealOpened(
            dealId,
            msg.sender,
            provider,
            numBlocks,
            blockSize,
            lambda,
            samplesPerEpoch,
            numEpochs,
            uint128(perEpoch),
            uint128(escrow),
            uint128(collateral)
        );
        if (escrow > 0) _pullTokens(msg.sender, escrow);
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
    ///         Epoch 0 starts with the next block.
    /// @dev Only the deal's provider, only in state Open, with stake ≥ {minStake} and
    ///      free capacity for the deal's blocks.
    function acceptDeal(uint256 dealId) external nonReentrant {
        Deal storage d = _deal(dealId);
        if (msg.sender != d.provider) revert NotDealProvider();
        if (d.state != DealState.Open) revert WrongDealState();
        Provider storage p = _providers[msg.sender];
        if (p.stake < minStake) revert StakeTooLow();
        if (uint256(p.usedBlocks) + d.numBlocks > p.capacityBlocks) revert CapacityExceeded();
        p.usedBlocks += d.numBlocks;
        p.activeDeals += 1;
        d.state = DealState.Active;
        d.acceptedAt = uint64(block.number);
        uint128 collateral = d.collateral;
        emit DealAccepted(dealId, uint64(block.number), collateral);
        if (collateral > 0) _pullTokens(msg.sender, collateral);
    }

    /// @notice Closes an active deal after its last epoch's deadline: the provider is
    ///         credited its remaining collateral, the owner the escrow of epochs that
    ///         were never proven. Pull both with {withdraw}.
    /// @dev Anyone; requires no open dispute on the deal.
    function closeDeal(uint256 dealId) external {
        Deal storage d = _activeDeal(dealId);
        if (block.number <= uint256(d.acceptedAt) + uint256(d.numEpochs) * epochBlocks) revert DealNotOver();
        if (d.openDisputes != 0) revert DisputesOpen();
        d.state = DealState.Completed;
        (uint128 esc, uint128 col) = _drain(d);
        emit DealClosed(dealId, esc, col);
        _credit(d.owner, esc);
        _credit(d.provider, col);
    }

    /// @notice The deal `dealId` (state None if unknown). Anyone.
    function getDeal(uint256 dealId) external view returns (Deal memory) {
        return _deals[dealId];
    }
}
