// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "../utils/CommitFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";

/// @notice Issue 22: a provider with many large deals and one tiny one drops the tiny
///         deal's data (worth little space) and commits a wrong entry for it every epoch,
///         betting nobody looks. The tiny deal's owner (or any watcher) that fetches its
///         response finds it missing and challenges: caught at once. Without any
///         watcher, the safety draw (weighted by size, docs/COMMITMENTS.md §5) picks a
///         deal of n blocks with probability n/(16·W) per epoch (W the provider's blocks
///         at the epoch's start): here 1/(16·385), so over E epochs the loss escapes
///         with (1 − 1/6160)^E (docs/CONTRACTS.md §5): the draw bounds the fraction of
///         the provider's data that can be lost unnoticed, not the number of deals; a
///         tiny deal is protected by its watcher. When it is drawn the market
///         challenges it itself. (The opposite case, one big deal dropped among many
///         small ones, is F27.)
contract F22_TinyDealAmongLarge is CommitFixture {
    uint256 internal constant LARGE = 6;

    function _setUpDeals() internal returns (uint256[] memory ids, Digest[] memory ds, uint256 tiny) {
        ids = new uint256[](LARGE + 1);
        ds = new Digest[](LARGE + 1);
        for (uint256 i; i < LARGE; ++i) {
            ids[i] = _openAccepted(64, BETA, 1, 8);
            ds[i] = _postReal(ids[i], 1, 0);
        }
        tiny = LARGE;
        ids[tiny] = _openAccepted(1, BETA, 1, 8);
        ds[tiny] = _postReal(ids[tiny], 1, 0);
    }

    function _lossyLeaves(uint256[] memory ids, Digest[] memory ds, uint64 g, uint256 tiny)
        internal
        view
        returns (bytes32[] memory l)
    {
        l = _leaves(ids, ds, g);
        l[tiny] = keccak256(abi.encode("lost", g)); // no response behind it
    }

    function test_attack_watcherCatchesTheTinyDeal() public {
        (uint256[] memory ids, Digest[] memory ds, uint256 tiny) = _setUpDeals();
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        bytes32[] memory l = _lossyLeaves(ids, ds, g, tiny);
        _commit(g, l);
        vm.prank(owner); // the tiny deal's owner watches it
        uint256 cid = market.challengeEntry(ids[tiny], 0);
        _noIndexWorks(cid, ds[tiny], l);
        _faultLater(cid);
        vm.assertEq(market.getDeal(ids[tiny]).failures, 1, "caught");
    }

    function test_attack_safetyDrawCatchesTheTinyDeal() public {
        (uint256[] memory ids, Digest[] memory ds, uint256 tiny) = _setUpDeals();
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        // a seed that draws the tiny deal (its one block of the provider's 385)
        vm.assertEq(market.providerDeals(provider)[tiny], ids[tiny]);
        _setDrawDeal(g, provider, ids[tiny]);
        bytes32[] memory l = _lossyLeaves(ids, ds, g, tiny);
        uint256 sid = _commit(g, l);
        vm.assertEq(market.getChallenge(sid).dealId, ids[tiny], "drawn");
        _noIndexWorks(sid, ds[tiny], l);
        uint256 ownerBefore = market.owed(owner);
        _faultLater(sid);
        vm.assertEq(market.getDeal(ids[tiny]).failures, 1, "caught without any watcher");
        vm.assertEq(market.owed(owner) - ownerBefore, _slash(ids[tiny]) + PRICE, "whole slash + refund to the owner");
    }

    /// The tiny deal's share of the draw is its one block of W = 385: x = 384 only.
    function test_tinyDealShareIsItsBlocks() public {
        (uint256[] memory ids,, uint256 tiny) = _setUpDeals();
        vm.assertEq(market.safetyDrawWeight(provider, _g(ids[0], 0)), 385);
        vm.assertEq(market.safetyDrawTarget(provider, 383), ids[LARGE - 1]);
        vm.assertEq(market.safetyDrawTarget(provider, 384), ids[tiny]);
        vm.assertEq(market.safetyDrawTarget(provider, 385), 0);
        for (uint256 i; i < LARGE; ++i) vm.assertEq(market.safetyDrawTarget(provider, 64 * i + 17), ids[i]);
    }

    /// The draw's rate: the market draws a deal in a fraction 1/16 of epochs (which deal:
    /// weighted by its blocks among the W blocks at the epoch's start). Over 64 consecutive seeds this checks the
    /// rate is not zero (the lossy provider is drawn) with deterministic beacon rounds.
    function test_drawRateIsAboutOneInSixteen() public view {
        uint256 hits;
        for (uint64 g = 1; g <= 512; ++g) {
            if (_drawR(keccak256(abi.encode("mock", g, bytes32(0))), provider) % 16 == 0) ++hits;
        }
        // 512/16 = 32 expected; a binomial(512, 1/16) lies in [16, 48] except with p < 1e-3
        vm.assertGe(hits, 16);
        vm.assertLe(hits, 48);
    }
}
