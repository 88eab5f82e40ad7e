// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";

/// @notice Finding 1 (critical): faults before the data exists. The owner opens a deal,
///         lets maxFailures epochs pass during the upload, posts the first digest, then
///         marks those epochs missed. Before: the honest provider lost its whole
///         collateral. Now: an epoch is a fault only if a digest was in force at its start.
contract F01_FaultsBeforeData is MarketFixture {
    function test_attack_markMissedAfterLateFirstDigest() public {
        uint256 id = _openAccepted(4, BETA, 1, 10);
        uint128 col = market.getDeal(id).collateral;
        // the "upload" takes MAX_FAILURES epochs, then the first digest is posted
        _pastEpoch(id, MAX_FAILURES - 1);
        Digest memory d = _postReal(id, 1, 0);
        for (uint64 e; e < MAX_FAILURES; ++e) {
            vm.prank(owner);
            market.markMissed(id, e);
        }
        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(uint256(deal.state), uint256(IDporMarket.DealState.Active), "not terminated");
        vm.assertEq(deal.failures, 0, "no fault");
        vm.assertEq(deal.collateral, col, "collateral intact");
        // the owner only got the escrow of those epochs back
        vm.assertEq(market.owed(owner), uint256(MAX_FAILURES) * 4 * PRICE);
        // the epoch whose window holds the digest's post is not a fault either
        _pastEpoch(id, MAX_FAILURES);
        market.markMissed(id, MAX_FAILURES);
        vm.assertEq(market.getDeal(id).failures, 0);
        // from the next epoch on the provider must prove, and does
        for (uint64 e = MAX_FAILURES + 1; e < 10; ++e) _prove(id, e, d);
        _pastGrace(id);
        market.closeDeal(id);
        vm.assertEq(uint256(market.getDeal(id).state), uint256(IDporMarket.DealState.Completed));
        vm.assertEq(market.owed(provider), 6 * 4 * PRICE + col, "paid for 6 proven epochs, whole collateral back");
    }

    /// The same owner cannot get the unsettled pre-digest epochs faulted at close either.
    function test_attack_closeDealCountsOnlyEpochsWithDigest() public {
        uint256 id = _openAccepted(4, BETA, 1, 6);
        _pastEpoch(id, 2);
        Digest memory d = _postReal(id, 1, 0); // during epoch 3: in force from epoch 4
        _prove(id, 4, d);
        _prove(id, 5, d);
        _pastGrace(id);
        market.closeDeal(id);
        vm.assertEq(market.getDeal(id).failures, 0);
        vm.assertEq(market.owed(provider), 2 * 4 * PRICE + 4 * COLLATERAL);
    }
}
