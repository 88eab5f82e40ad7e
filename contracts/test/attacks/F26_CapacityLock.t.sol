// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";

/// @notice Second review (low): a deal for a provider's whole capacity that is never
///         uploaded locked the capacity and the collateral for at least `uploadSeconds`
///         (≥ 1 day) at no cost: `exitBeforeUpload` refunded the whole escrow. Now it pays
///         the provider the price of every global epoch from acceptance's to the current
///         one (at most the escrow) and refunds only the rest; the node refuses deals
///         whose term numEpochs·epochSeconds is shorter than `uploadSeconds`, so the
///         escrow covers the lock (node/src/chain_tasks/deals.rs).
contract F26_CapacityLock is MarketFixture {
    /// The locker opens a one-epoch deal for the whole capacity, the provider accepts,
    /// nothing is ever uploaded: the capacity is full until the provider exits after
    /// uploadSeconds, and the locker's whole escrow (one epoch) goes to the provider.
    function test_attack_lockWholeCapacityPaysTheProvider() public {
        uint256 id = _openAccepted(CAPACITY, BETA, 1, 1);
        uint256 other = _open(1, BETA, 1, 10);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.CapacityExceeded.selector);
        market.acceptDeal(other);
        vm.warp(block.timestamp + UPLOAD);
        uint256 price = uint256(CAPACITY) * PRICE;
        vm.expectEmit(true, true, true, true, address(market));
        emit IDporMarket.UploadLockPaid(id, 2, uint128(price)); // two epochs held, capped at the escrow
        vm.expectEmit(true, true, true, true, address(market));
        emit IDporMarket.DealClosed(id, 0, 0, 0, uint128(uint256(CAPACITY) * COLLATERAL));
        vm.prank(provider);
        market.exitBeforeUpload(id);
        vm.assertEq(market.owed(provider), price + uint256(CAPACITY) * COLLATERAL);
        vm.assertEq(market.owed(owner), 0);
        vm.prank(provider);
        market.acceptDeal(other); // the capacity is free again
    }

    /// A longer deal: the locker pays the epochs it held (acceptance's and the current
    /// one, both included) and gets the rest of its escrow back, whoever exits.
    function test_attack_lockerPaysHeldEpochsOnly() public {
        uint256 id = _openAccepted(4, BETA, 1, 10); // accepted in global epoch 0
        vm.warp(block.timestamp + 3 * EPOCH + 5 hours); // global epoch 3: epochs 0..3 held
        vm.prank(owner);
        market.exitBeforeUpload(id);
        vm.assertEq(market.owed(provider), 4 * 4 * PRICE + 4 * COLLATERAL);
        vm.assertEq(market.owed(owner), (10 - 4) * 4 * PRICE);
    }

    /// The locker cannot dodge the fee by giving notice and waiting for closeDeal: the
    /// provider can exit at acceptedAt + uploadSeconds, long before the shortened term
    /// plus grace ends (uploadSeconds ≤ exitNoticeEpochs·P + graceSeconds).
    function test_attack_noticeDoesNotDodgeTheFee() public {
        uint256 id = _openAccepted(4, BETA, 1, 10);
        vm.prank(owner);
        market.requestExit(id);
        vm.warp(block.timestamp + UPLOAD);
        vm.expectRevert(IDporMarket.DealNotOver.selector);
        market.closeDeal(id);
        vm.prank(provider);
        market.exitBeforeUpload(id);
        vm.assertEq(market.owed(provider), 2 * 4 * PRICE + 4 * COLLATERAL);
        vm.assertEq(market.owed(owner), (10 - 2) * 4 * PRICE);
    }
}
