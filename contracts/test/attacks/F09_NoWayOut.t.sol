// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";

/// @notice Finding 9 (low): no way out. If the owner never posted a first digest, or a
///         party stopped co-signing, the other's funds stayed locked for the whole term.
///         Now: exitBeforeUpload after uploadSeconds without a digest, and requestExit
///         (either party) ends the term after exitNoticeEpochs more epochs. No exit lets a
///         party skip a fault.
contract F09_NoWayOut is MarketFixture {
    /// The owner never uploads: the provider leaves after the upload deadline with its
    /// collateral and the price of the two global epochs the deal held its capacity
    /// (acceptance's and the current one: F26_CapacityLock); the owner gets the rest of
    /// its escrow back.
    function test_attack_ownerNeverPostsFirstDigest() public {
        uint256 id = _openAccepted(4, BETA, 1, 365);
        vm.warp(block.timestamp + UPLOAD);
        vm.prank(provider);
        market.exitBeforeUpload(id);
        vm.assertEq(market.owed(provider), 4 * COLLATERAL + 2 * 4 * PRICE);
        vm.assertEq(market.owed(owner), (365 - 2) * 4 * PRICE);
        vm.assertEq(market.getProvider(provider).activeDeals, 0);
    }

    /// The owner stops co-signing after the first digest: the provider gives notice,
    /// proves the notice epochs against the last digest and is out with its collateral.
    function test_attack_ownerStopsCosigning() public {
        uint256 id = _openAccepted(4, BETA, 1, 365);
        Digest memory d = _postReal(id, 1, 0);
        _prove(id, 0, d);
        _prove(id, 1, d);
        vm.prank(provider);
        market.requestExit(id);
        uint32 end = market.getDeal(id).numEpochs;
        vm.assertEq(end, 2 + NOTICE);
        for (uint64 e = 2; e < end; ++e) _prove(id, e, d);
        _pastGrace(id);
        market.closeDeal(id);
        vm.assertEq(market.owed(provider), uint256(end) * 4 * PRICE + 4 * COLLATERAL);
        vm.assertEq(market.owed(owner), uint256(365 - end) * 4 * PRICE);
    }

    /// The provider stops co-signing: the owner gives notice and gets the escrow of the
    /// dropped epochs back; the provider must still prove the notice epochs.
    function test_attack_providerStopsCosigning() public {
        uint256 id = _openAccepted(4, BETA, 1, 100);
        Digest memory d = _postReal(id, 1, 0);
        _prove(id, 0, d);
        vm.prank(owner);
        market.requestExit(id);
        vm.assertEq(market.getDeal(id).numEpochs, 1 + NOTICE);
        for (uint64 e = 1; e < 1 + NOTICE; ++e) _prove(id, e, d);
        _pastGrace(id);
        market.closeDeal(id);
        vm.assertEq(market.owed(owner), uint256(100 - 1 - NOTICE) * 4 * PRICE);
    }

    /// No exit skips a fault: a provider that gives notice and stops proving is faulted
    /// for every notice epoch at close; exitBeforeUpload is refused once a digest exists.
    function test_attack_exitDoesNotSkipFaults() public {
        uint256 id = _openAccepted(4, BETA, 1, 100);
        _postReal(id, 1, 0);
        vm.warp(block.timestamp + UPLOAD - 1); // still before epoch 0
        vm.prank(provider);
        vm.expectRevert(IDporMarket.DigestExists.selector);
        market.exitBeforeUpload(id);
        vm.prank(provider);
        market.requestExit(id); // before epoch 0 started: term = NOTICE epochs
        vm.assertEq(market.getDeal(id).numEpochs, NOTICE);
        _pastGrace(id);
        market.closeDeal(id);
        vm.assertEq(market.getDeal(id).failures, NOTICE);
        uint256 slash = (4 * uint256(COLLATERAL) + MAX_FAILURES - 1) / MAX_FAILURES;
        vm.assertEq(market.owed(provider), 4 * COLLATERAL - NOTICE * slash);
    }

    /// Neither party can lock the other: exits are open to both parties only, and the
    /// owner cannot stop the provider's exit by posting nothing.
    function test_exitsOnlyForParties() public {
        uint256 id = _openAccepted(4, BETA, 1, 10);
        vm.startPrank(stranger);
        vm.expectRevert(IDporMarket.NotDealParty.selector);
        market.requestExit(id);
        vm.warp(block.timestamp + UPLOAD);
        vm.expectRevert(IDporMarket.NotDealParty.selector);
        market.exitBeforeUpload(id);
        vm.stopPrank();
        vm.prank(owner);
        market.exitBeforeUpload(id);
    }
}
