// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest, SampleProof} from "../../src/lib/DporTypes.sol";

/// @notice Finding 6 (medium): disputes after the term. The deal stayed Active after its
///         last epoch until someone closed it, and disputes opened then slashed a provider
///         for data it no longer had to hold. Now disputes close at the last deadline +
///         graceSeconds, and anyone (the node) closes the deal then.
contract F06_DisputesAfterTerm is MarketFixture {
    function test_attack_disputeLongAfterTheTerm() public {
        uint256 id = _openAccepted(4, BETA, 1, 2);
        Digest memory d = _postReal(id, 1, 3);
        _prove(id, 0, d);
        _prove(id, 1, d);
        // the provider deleted the data after the grace period; nobody closed the deal
        _pastGrace(id);
        vm.warp(block.timestamp + 30 days);
        vm.prank(owner);
        vm.expectRevert(IDporMarket.DisputePeriodOver.selector);
        market.openDispute(id, 1, 1, bytes32("late"), 0, 0, 0);
        vm.prank(provider);
        market.closeDeal(id);
        vm.assertEq(market.owed(provider), 8 * PRICE + 4 * COLLATERAL);
    }

    /// During the grace period auditors can still dispute the last epochs; an honest
    /// provider answers and closeDeal waits for the answer.
    function test_disputeDuringGraceIsAnswered() public {
        uint256 id = _openAccepted(4, BETA, 1, 2);
        Digest memory d = _postReal(id, 1, 3);
        _prove(id, 0, d);
        _prove(id, 1, d);
        _pastGrace(id);
        vm.warp(block.timestamp - 1);
        vm.prank(challenger);
        uint256 q = market.openDispute(id, 1, 1, bytes32("grace"), 2, 1, 1);
        vm.warp(block.timestamp + 1);
        vm.expectRevert(IDporMarket.DisputesOpen.selector);
        market.closeDeal(id);
        SampleProof memory p = buildProof(2, 1, 1, 4, BETA);
        market.answerDispute(q, d, p);
        market.closeDeal(id);
        vm.assertEq(market.owed(provider), 8 * PRICE + 4 * COLLATERAL + BOND);
    }
}
