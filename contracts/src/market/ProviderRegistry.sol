// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketBase} from "./MarketBase.sol";

/// @title ProviderRegistry
/// @notice Storage providers: libp2p identity and addresses, prices, capacity, stake.
abstract contract ProviderRegistry is MarketBase {
    /// @notice Registers the caller as a provider and deposits `stake` tokens
    ///         (the caller must have approved the market).
    /// @dev Callable once per address. `stake` must be ≥ {minStake}.
    /// @param peerId libp2p peer id (multihash bytes).
    /// @param multiaddrs libp2p multiaddrs, as text ("/ip4/127.0.0.1/tcp/4001").
    /// @param pricePerBlockEpoch Asking price per block per epoch.
    /// @param collateralPerBlock Collateral locked per block of an accepted deal.
    /// @param capacityBlocks Blocks the provider is willing to hold across all deals.
    /// @param stake Tokens deposited as stake.
    function register(
        bytes calldata peerId,
        string[] calldata multiaddrs,
        uint128 pricePerBlockEpoch,
        uint128 collateralPerBlock,
        uint64 capacityBlocks,
        uint256 stake
    ) external nonReentrant {
        _onlyHome();
        Provider storage p = _providers[msg.sender];
        if (p.registered) revert AlreadyRegistered();
        if (stake < minStake) revert StakeTooLow();
        p.registered = true;
        p.stake = stake;
        _setInfo(p, peerId, multiaddrs, pricePerBlockEpoch, collateralPerBlock, capacityBlocks);
        emit ProviderRegistered(
            msg.sender, peerId, multiaddrs, pricePerBlockEpoch, collateralPerBlock, capacityBlocks, stake
        );
        if (stake > 0) _pullTokens(msg.sender, stake);
    }

    /// @notice Updates the caller's provider record. Deals already opened keep their terms.
    /// @dev Only a registered provider. The capacity may drop below the blocks in use
    ///      (new deals then cannot be accepted).
    function updateProvider(
        bytes calldata peerId,
        string[] calldata multiaddrs,
        uint128 pricePerBlockEpoch,
        uint128 collateralPerBlock,
        uint64 capacityBlocks
    ) external {
        _onlyHome();
        Provider storage p = _providers[msg.sender];
        if (!p.registered) revert NotRegistered();
        _setInfo(p, peerId, multiaddrs, pricePerBlockEpoch, collateralPerBlock, capacityBlocks);
        emit ProviderUpdated(msg.sender, peerId, multiaddrs, pricePerBlockEpoch, collateralPerBlock, capacityBlocks);
    }

    /// @notice Adds `amount` tokens to the caller's stake. Only a registered provider.
    function addStake(uint256 amount) external nonReentrant {
        _onlyHome();
        Provider storage p = _providers[msg.sender];
        if (!p.registered) revert NotRegistered();
        if (amount == 0) revert ZeroAmount();
        p.stake += amount;
        emit StakeAdded(msg.sender, amount, p.stake);
        _pullTokens(msg.sender, amount);
    }

    /// @notice Withdraws `amount` of the caller's stake, sent to the caller.
    /// @dev Only a registered provider with no open or active deal.
    function withdrawStake(uint256 amount) external nonReentrant {
        _onlyHome();
        Provider storage p = _providers[msg.sender];
        if (!p.registered) revert NotRegistered();
        if (amount == 0) revert ZeroAmount();
        if (p.activeDeals != 0) revert StakeLocked();
        if (amount > p.stake) revert InsufficientStake();
        p.stake -= amount;
        emit StakeWithdrawn(msg.sender, amount, p.stake);
        _pushTokens(msg.sender, amount);
    }

    /// @notice The record of `provider` (registered == false if unknown). Anyone.
    function getProvider(address provider) external view returns (Provider memory) {
        return _providers[provider];
    }

    function _setInfo(
        Provider storage p,
        bytes calldata peerId,
        string[] calldata multiaddrs,
        uint128 pricePerBlockEpoch,
        uint128 collateralPerBlock,
        uint64 capacityBlocks
    ) private {
        if (peerId.length == 0) revert InvalidParameter();
        p.peerId = peerId;
        delete p.multiaddrs;
        for (uint256 i; i < multiaddrs.length; ++i) p.multiaddrs.push(multiaddrs[i]);
        p.pricePerBlockEpoch = pricePerBlockEpoch;
        p.collateralPerBlock = collateralPerBlock;
        p.capacityBlocks = capacityBlocks;
    }
}
