// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "./utils/MarketFixture.sol";
import {IDporMarket} from "../src/market/IDporMarket.sol";
import {Digest, SampleProof, BlockProof} from "../src/lib/DporTypes.sol";
import {DporSampling} from "../src/lib/DporSampling.sol";

/// @notice Griefing: a malicious owner or auditor cannot get an honest provider slashed.
contract GriefingTest is MarketFixture {
    uint256 internal dealId;
    Digest internal posted;

    function setUp() public override {
        super.setUp();
        dealId = _openAccepted(4, BETA, 1, 10);
        Digest memory d = _postReal(dealId, 1, 3);
        posted = d;
    }

    /// The owner cannot post a digest (e.g. roots nobody can prove) without the provider.
    function testFuzz_ownerCannotPostAlone(bytes32 bogusRoot, uint256 forgedPk) public {
        forgedPk = 1 + forgedPk % 1e70;
        vm.assume(forgedPk != PROVIDER_PK);
        Digest memory d = buildDigest(dealId, 2, 4, 0, 0, BETA);
        d.rootC = bogusRoot;
        bytes32 hh = market.digestHash(d);
        bytes memory so = _sig(OWNER_PK, hh);
        vm.startPrank(owner);
        vm.expectRevert(IDporMarket.BadProviderSignature.selector);
        market.postDigest(d, so, so);
        vm.expectRevert(IDporMarket.BadProviderSignature.selector);
        market.postDigest(d, so, _sig(forgedPk, hh));
        vm.expectRevert(IDporMarket.BadProviderSignature.selector);
        market.postDigest(d, so, "");
        vm.stopPrank();
        vm.assertEq(market.getDeal(dealId).digestVersion, 1);
    }

    /// A false dispute (any existing sample) against an honest provider always loses its
    /// bond, even if a newer digest is posted meanwhile, and can never be slashed.
    function testFuzz_falseDisputeLosesBond(uint8 tagSel, uint64 pos, uint32 ci, bool newer) public {
        uint8 tag = [0, 1, 2][tagSel % 3];
        pos = uint64(pos % DporSampling.runSize(tag, 4));
        ci = ci % 2;
        uint256 before = token.balanceOf(challenger);
        vm.prank(challenger);
        uint256 q = market.openDispute(dealId, 0, 1, bytes32("false"), tag, pos, ci);
        if (newer) _postReal(dealId, 2, 0);
        vm.warp(block.timestamp + ANSWER / 2);
        SampleProof memory p = buildProof(tag, pos, ci, 4, BETA);
        vm.prank(provider);
        market.answerDispute(q, posted, p);
        vm.warp(block.timestamp + ANSWER * 2);
        vm.expectRevert(IDporMarket.DisputeNotOpen.selector);
        market.slash(q);
        vm.assertEq(market.owed(challenger), 0);
        vm.assertEq(token.balanceOf(challenger), before - BOND);
        vm.assertEq(market.owed(provider), BOND);
        vm.assertEq(market.getDeal(dealId).failures, 0);
        vm.assertEq(market.getDeal(dealId).collateral, 4 * COLLATERAL);
    }

    /// A slash is executed once: further calls revert and pay nothing.
    function testFuzz_slashOnce(uint8 extra) public {
        vm.prank(challenger);
        uint256 q = market.openDispute(dealId, 0, 1, bytes32("x"), 0, 1, 0);
        vm.warp(block.timestamp + ANSWER + 1 + extra);
        market.slash(q);
        uint256 owedC = market.owed(challenger);
        uint256 owedO = market.owed(owner);
        uint128 col = market.getDeal(dealId).collateral;
        for (uint256 i; i < 3; ++i) {
            vm.expectRevert(IDporMarket.DisputeNotOpen.selector);
            market.slash(q);
        }
        vm.assertEq(market.owed(challenger), owedC);
        vm.assertEq(market.owed(owner), owedO);
        vm.assertEq(market.getDeal(dealId).collateral, col);
    }

    /// Epoch proofs cannot be replayed into another epoch or deal.
    function test_epochProofNotReplayable() public {
        _prove(dealId, 0, posted);
        BlockProof[] memory ps = _epochProofs(dealId, 0, posted);
        vm.expectRevert(IDporMarket.EpochSettled.selector);
        market.submitEpochProof(dealId, 0, posted, ps);
        // the same samples do not prove the next epoch (another seed)
        _enterEpoch(dealId, 1);
        BlockProof[] memory next = _epochProofs(dealId, 1, posted);
        if (next[0].runTag != ps[0].runTag || next[0].position != ps[0].position) {
            vm.expectRevert(IDporMarket.WrongSample.selector);
            market.submitEpochProof(dealId, 1, posted, ps);
        }
    }
}
