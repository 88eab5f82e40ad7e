// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketBase} from "./MarketBase.sol";

/// @title UploadExit
/// @notice The exit of a deal that never got a digest, paying the provider for the
///         capacity it held (docs/CONTRACTS.md §6, rows 9 and 26 of §8). In the commitments
///         extension ({DporCommitmentsExt}, installed after deployment, reached by
///         delegatecall through the market and {DporMarketExt}): the market's init code,
///         which carries {DporMarketExt}, has no room left (EIP-3860).
abstract contract UploadExit is MarketBase {
    /// @notice Ends a deal that never got a digest (finding 9): after acceptedAt +
    ///         {uploadSeconds} with no digest posted, either party may close it. The
    ///         provider is paid for the capacity the deal held (second review): the price
    ///         of every global epoch from the one of acceptance to the current one,
    ///         both included, at most the escrow; the rest of the escrow goes back to the
    ///         owner, all collateral back to the provider (no epoch could be a fault:
    ///         none had a digest in force). Event {UploadLockPaid}, then {DealClosed}.
    /// @dev Only the deal's owner or provider, deal Active, no digest ever posted.
    function exitBeforeUpload(uint256 dealId) external {
        _onlyHome();
        Deal storage d = _activeDeal(dealId);
        if (msg.sender != d.owner && msg.sender != d.provider) revert NotDealParty();
        if (d.digestVersion != 0) revert DigestExists();
        if (block.timestamp < uint256(d.acceptedAt) + uploadSeconds) revert UploadNotOver();
        d.state = DealState.Completed;
        // Accepted in global epoch startEpoch − 1; the current one is ⌊(now − T0)/P⌋.
        uint256 locked = (block.timestamp - genesis) / epochSeconds + 2 - d.startEpoch;
        uint256 price = locked * d.pricePerEpoch;
        (uint128 esc, uint128 col) = _drain(d);
        uint128 fee = price < esc ? uint128(price) : esc;
        emit UploadLockPaid(dealId, uint32(locked), fee);
        emit DealClosed(dealId, 0, 0, esc - fee, col);
        _credit(d.owner, esc - fee);
        _credit(d.provider, uint256(col) + fee);
    }
}
