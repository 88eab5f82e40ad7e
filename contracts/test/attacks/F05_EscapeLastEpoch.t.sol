// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";

/// @notice Finding 5 (medium): escaping the last epoch. closeDeal did not fault
///         unsettled epochs and was callable right after the last markMissed: a provider
///         that never proved got all collateral back if nobody marked its epochs. Now
///         closeDeal settles every unsettled epoch (a fault each when a digest was in force).
contract F05_EscapeLastEpoch is MarketFixture {
    function test_attack_neverProveThenClose() public {
        uint256 id = _openAccepted(4, BETA, 1, 5);
        _postReal(id, 1, 0);
        // nobody marks anything; the provider closes as soon as it can
        (, uint256 last) = market.epochWindow(id, 4);
        vm.warp(last);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.DealNotOver.selector);
        market.closeDeal(id);
        _pastGrace(id);
        vm.prank(provider);
        market.closeDeal(id);
        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(uint256(deal.state), uint256(IDporMarket.DealState.Terminated));
        vm.assertEq(deal.failures, 5);
        vm.assertEq(market.owed(provider), 0, "no collateral back");
        vm.assertEq(market.owed(owner), 20 * PRICE + 4 * COLLATERAL);
    }

    /// Proving all but the last epoch: the last is a fault at close.
    function test_attack_skipOnlyTheLastEpoch() public {
        uint256 id = _openAccepted(4, BETA, 1, 4);
        Digest memory d = _postReal(id, 1, 0);
        for (uint64 e; e < 3; ++e) _prove(id, e, d);
        _pastGrace(id);
        market.closeDeal(id);
        uint256 slash = (4 * uint256(COLLATERAL) + MAX_FAILURES - 1) / MAX_FAILURES;
        vm.assertEq(market.getDeal(id).failures, 1);
        vm.assertEq(market.owed(provider), 12 * PRICE + 4 * COLLATERAL - slash);
        vm.assertEq(market.owed(owner), 4 * PRICE + slash);
    }
}
