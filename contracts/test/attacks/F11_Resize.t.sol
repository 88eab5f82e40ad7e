// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest, BlockProof, SampleProof} from "../../src/lib/DporTypes.sol";

/// @notice Attacks on deal resizing (paper App. A.3; docs/CONTRACTS.md §4.1, §8 row 11).
///         `resizeDeal` changes N, the price and the collateral at once and may be relayed
///         by anyone, so each test tries to resize without both parties' consent to the
///         exact terms, at a moment when it would let a party escape a slash, past the
///         deal's bounds, or so that an honest provider is slashed for the old size. Each
///         performs the attack and asserts it fails.
contract F11_Resize is MarketFixture {
    uint32 internal constant EPOCHS = 10;

    /// A used resize cannot be replayed: not the same payload, nor an older signed
    /// resize after newer digests (versions strictly increase).
    function test_attack_replayUsedResize() public {
        uint256 id = _openAccepted(4, BETA, 1, EPOCHS);
        _postReal(id, 1, 0);
        Digest memory grow = _resizeDigest(id, 2, 8);
        (bytes memory so, bytes memory sp) = _resizeSigs(grow, 8 * PRICE, 8 * COLLATERAL);
        // both also signed a shrink back at version 3, which the owner keeps
        Digest memory back = _resizeDigest(id, 3, 4);
        (bytes memory so3, bytes memory sp3) = _resizeSigs(back, 4 * PRICE, 4 * COLLATERAL);
        market.resizeDeal(grow, 8 * PRICE, 8 * COLLATERAL, so, sp);
        vm.expectRevert(IDporMarket.StaleVersion.selector);
        market.resizeDeal(grow, 8 * PRICE, 8 * COLLATERAL, so, sp);
        _postReal(id, 5, 3); // the parties moved on at N = 8
        vm.expectRevert(IDporMarket.StaleVersion.selector);
        market.resizeDeal(back, 4 * PRICE, 4 * COLLATERAL, so3, sp3);
        vm.assertEq(market.getDeal(id).numBlocks, 8);
        vm.assertEq(market.getDeal(id).digestVersion, 5);
    }

    /// Neither party can sign for the other: the owner signing as provider, the provider
    /// as owner, a stranger for both, and the provider's ordinary digest signature of the
    /// same digest reused as consent to a resize.
    function test_attack_forgedSignatures() public {
        uint256 id = _openAccepted(4, BETA, 1, EPOCHS);
        Digest memory d = _resizeDigest(id, 1, 2); // a shrink: the provider's collateral out
        uint128 price = 2 * PRICE;
        uint128 col = 0;
        bytes32 h = market.resizeHash(d, price, col);
        vm.expectRevert(IDporMarket.BadProviderSignature.selector);
        market.resizeDeal(d, price, col, _sig(OWNER_PK, h), _sig(OWNER_PK, h));
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(d, price, col, _sig(PROVIDER_PK, h), _sig(PROVIDER_PK, h));
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(d, price, col, _sig(STRANGER_PK, h), _sig(PROVIDER_PK, h));
        vm.expectRevert(IDporMarket.BadProviderSignature.selector);
        market.resizeDeal(d, price, col, _sig(OWNER_PK, h), _sig(STRANGER_PK, h));
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(d, price, col, _sig(PROVIDER_PK, h), _sig(OWNER_PK, h)); // swapped
        bytes32 dh = market.digestHash(d);
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(d, price, col, _sig(OWNER_PK, dh), _sig(PROVIDER_PK, dh));
        vm.expectRevert(IDporMarket.BadProviderSignature.selector);
        market.resizeDeal(d, price, col, _sig(OWNER_PK, h), _sig(PROVIDER_PK, dh));
        vm.assertEq(market.getDeal(id).numBlocks, 4);
        vm.assertEq(market.getDeal(id).collateral, 4 * COLLATERAL);
    }

    /// A relayer holding both signatures cannot change the price, the collateral or any
    /// field of the digest (N, version, roots, deal).
    function test_attack_relayerChangesTerms() public {
        uint256 id = _openAccepted(4, BETA, 1, EPOCHS);
        uint256 other = _openAccepted(4, BETA, 1, EPOCHS);
        Digest memory d = _resizeDigest(id, 1, 8);
        uint128 price = 8 * PRICE;
        uint128 col = 8 * COLLATERAL;
        (bytes memory so, bytes memory sp) = _resizeSigs(d, price, col);
        vm.startPrank(stranger);
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(d, price + 1, col, so, sp); // owner pays more
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(d, price, col - 1, so, sp); // provider locks less
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(d, 0, 0, so, sp);
        Digest memory x = _resizeDigest(id, 1, 8);
        x.rootC = keccak256("another C");
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(x, price, col, so, sp);
        x = _resizeDigest(id, 1, 16);
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(x, price, col, so, sp);
        x = _resizeDigest(id, 7, 8);
        x.rootC = d.rootC;
        x.rootU = d.rootU;
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(x, price, col, so, sp);
        x = _resizeDigest(id, 1, 8);
        x.dealId = other; // the same consent for another deal of the same parties
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(x, price, col, so, sp);
        market.resizeDeal(d, price, col, so, sp); // the signed terms go through
        vm.stopPrank();
        vm.assertEq(market.getDeal(id).numBlocks, 8);
        vm.assertEq(market.getDeal(other).numBlocks, 4);
    }

    /// A provider facing a dispute cannot shrink (with an owner who co-signs) to take its
    /// collateral out before the slash: resizing waits until no dispute is open, and the
    /// slash is then taken from the whole collateral.
    function test_attack_shrinkDuringOpenDispute() public {
        uint256 id = _openAccepted(8, BETA, 1, EPOCHS);
        _postReal(id, 1, 0);
        vm.prank(challenger);
        uint256 q = market.openDispute(id, 0, 1, bytes32("t"), 0, 3, 0);
        Digest memory d = _resizeDigest(id, 2, 1);
        (bytes memory so, bytes memory sp) = _resizeSigs(d, PRICE, 0);
        vm.expectRevert(IDporMarket.DisputesOpen.selector);
        market.resizeDeal(d, PRICE, 0, so, sp);
        vm.warp(block.timestamp + ANSWER + 1);
        market.slash(q);
        uint256 slashAmt = (8 * uint256(COLLATERAL) + MAX_FAILURES - 1) / MAX_FAILURES;
        vm.assertEq(market.getDeal(id).collateral, 8 * COLLATERAL - slashAmt);
        uint256 toChallenger = slashAmt * SHARE_BPS / 10_000;
        vm.assertEq(market.owed(challenger), toChallenger + BOND);
        // only now, and only what is left after the slash, can leave
        market.resizeDeal(d, PRICE, 0, so, sp);
        vm.assertEq(market.owed(provider), 8 * COLLATERAL - slashAmt);
    }

    /// No resize of a deal that is not Active, or whose exit was requested (the term is
    /// being wound down: the escrow holds dropped epochs the new price must not reprice).
    function test_attack_resizeNotActiveOrExiting() public {
        Digest memory d;
        // unknown deal
        d = buildDigest(99, 1, 8, 0, 0, BETA);
        (bytes memory so, bytes memory sp) = _resizeSigs(d, 0, 0);
        vm.expectRevert(IDporMarket.UnknownDeal.selector);
        market.resizeDeal(d, 0, 0, so, sp);
        // open, not accepted
        uint256 id = _open(4, BETA, 1, EPOCHS);
        d = _resizeDigest(id, 1, 8);
        (so, sp) = _resizeSigs(d, 8 * PRICE, 8 * COLLATERAL);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.resizeDeal(d, 8 * PRICE, 8 * COLLATERAL, so, sp);
        // cancelled
        vm.prank(owner);
        market.cancelDeal(id);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.resizeDeal(d, 8 * PRICE, 8 * COLLATERAL, so, sp);
        // exit requested (by either party)
        id = _openAccepted(4, BETA, 1, EPOCHS);
        Digest memory d1 = _postReal(id, 1, 0);
        vm.prank(provider);
        market.requestExit(id);
        d = _resizeDigest(id, 2, 2);
        (so, sp) = _resizeSigs(d, 0, 0);
        vm.expectRevert(IDporMarket.ExitPending.selector);
        market.resizeDeal(d, 0, 0, so, sp);
        // completed
        uint32 end = market.getDeal(id).numEpochs;
        for (uint64 e; e < end; ++e) _prove(id, e, d1);
        _pastGrace(id);
        market.closeDeal(id);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.resizeDeal(d, 0, 0, so, sp);
        // terminated
        id = _openAccepted(4, BETA, 1, EPOCHS);
        _postReal(id, 1, 0);
        for (uint64 e; e < MAX_FAILURES; ++e) {
            _pastEpoch(id, e);
            market.markMissed(id, e);
        }
        vm.assertEq(uint256(market.getDeal(id).state), uint256(IDporMarket.DealState.Terminated));
        d = _resizeDigest(id, 2, 2);
        (so, sp) = _resizeSigs(d, 0, 0);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.resizeDeal(d, 0, 0, so, sp);
    }

    /// Shapes a resize digest must have, each properly signed: N a power of two in
    /// 1..2^40 and different from the deal's, t < N', one root per filled level.
    function test_attack_badShapes() public {
        uint256 id = _openAccepted(4, BETA, 1, EPOCHS);
        _tryShape(id, 6, 0, 0, IDporMarket.NumBlocksNotPowerOfTwo.selector);
        _tryShape(id, 0, 0, 0, IDporMarket.NumBlocksNotPowerOfTwo.selector);
        _tryShape(id, uint64(1) << 41, 0, 0, IDporMarket.NumBlocksNotPowerOfTwo.selector);
        _tryShape(id, 4, 0, 0, IDporMarket.WrongNumBlocks.selector); // same N
        _tryShape(id, 8, 8, 1, IDporMarket.WriteCountTooLarge.selector); // t = N'
        _tryShape(id, 8, 0, 1, IDporMarket.LevelRootsMismatch.selector); // a level root with t = 0
        _tryShape(id, 8, 3, 1, IDporMarket.LevelRootsMismatch.selector); // t = 3 needs 2 roots
        vm.assertEq(market.getDeal(id).digestVersion, 0);
        // Writes after the node's resize, before the transaction: t = 3 with its 2 roots.
        Digest memory d;
        d.dealId = id;
        d.version = 1;
        d.numBlocks = 8;
        d.writeCount = 3;
        d.rootC = keccak256("C");
        d.levelRoots = new bytes32[](2);
        (bytes memory so, bytes memory sp) = _resizeSigs(d, 0, 0);
        market.resizeDeal(d, 0, 0, so, sp);
        vm.assertEq(market.getDeal(id).numBlocks, 8);
        vm.assertEq(market.getDeal(id).writeCount, 3);
    }

    function _tryShape(uint256 id, uint64 n, uint64 t, uint256 levels, bytes4 err) internal {
        Digest memory d;
        d.dealId = id;
        d.version = 1;
        d.numBlocks = n;
        d.writeCount = t;
        d.rootC = keccak256("C");
        d.levelRoots = new bytes32[](levels);
        (bytes memory so, bytes memory sp) = _resizeSigs(d, 0, 0);
        vm.expectRevert(err);
        market.resizeDeal(d, 0, 0, so, sp);
    }

    /// A grow must fit the provider's capacity, counting its other deals (it co-signs,
    /// but the market's capacity accounting cannot be overdrawn).
    function test_attack_capacityOverflow() public {
        vm.prank(provider);
        market.updateProvider(hex"0024080112", _addrs(), PRICE, COLLATERAL, 12);
        uint256 a = _openAccepted(4, BETA, 1, EPOCHS);
        _openAccepted(4, BETA, 1, EPOCHS); // 8 of 12 used
        Digest memory d = _resizeDigest(a, 1, 16);
        (bytes memory so, bytes memory sp) = _resizeSigs(d, 16 * PRICE, 16 * COLLATERAL);
        vm.expectRevert(IDporMarket.CapacityExceeded.selector);
        market.resizeDeal(d, 16 * PRICE, 16 * COLLATERAL, so, sp);
        d = _resizeDigest(a, 1, 8); // 12 of 12: fits exactly
        (so, sp) = _resizeSigs(d, 8 * PRICE, 8 * COLLATERAL);
        market.resizeDeal(d, 8 * PRICE, 8 * COLLATERAL, so, sp);
        vm.assertEq(market.getProvider(provider).usedBlocks, 12);
        // a new deal no longer fits
        uint256 c = _open(1, BETA, 1, EPOCHS);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.CapacityExceeded.selector);
        market.acceptDeal(c);
        // escrow overflowing uint128 at the new price
        d = _resizeDigest(a, 2, 4);
        uint128 huge = type(uint128).max / 2;
        (so, sp) = _resizeSigs(d, huge, 0);
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        market.resizeDeal(d, huge, 0, so, sp);
    }

    /// An owner tries to get an honest provider slashed across a grow 4 → 16: a dispute
    /// against the pre-resize digest naming a position that exists only under the new N,
    /// and an epoch bound to the pre-resize digest challenged with new-N samples. All
    /// fail; the provider proves every epoch and answers every dispute with its trees.
    function test_attack_slashHonestProviderAcrossResize() public {
        uint256 id = _openAccepted(4, BETA, 1, EPOCHS);
        Digest memory d1 = _postReal(id, 1, 1);
        _prove(id, 0, d1);
        // before the resize: C of N = 4 has 8 positions; 20 is not a sample of v1
        vm.prank(owner);
        vm.expectRevert(IDporMarket.WrongSample.selector);
        market.openDispute(id, 0, 1, bytes32("t"), 0, 20, 0);
        // the resize lands inside epoch 1
        _enterEpoch(id, 1);
        Digest memory d2 = _resizeDigest(id, 2, 16);
        _resize(d2, 16 * PRICE, 16 * COLLATERAL);
        // after it: v1 can no longer be disputed at all (only the latest digest can), at
        // a new-N position or at an old one
        vm.startPrank(owner);
        vm.expectRevert(IDporMarket.StaleVersion.selector);
        market.openDispute(id, 1, 1, bytes32("t"), 0, 20, 0);
        vm.expectRevert(IDporMarket.StaleVersion.selector);
        market.openDispute(id, 1, 1, bytes32("t"), 1, 1, 0);
        vm.stopPrank();
        // epoch 1 is bound to v1 and sampled with N = 4: the provider's old trees prove it
        BlockProof[] memory ps = _epochProofs(id, 1, d1);
        vm.assertLt(ps[0].position, ps[0].runTag == 0 ? 8 : 2);
        market.submitEpochProof(id, 1, d1, ps);
        // a dispute on v2 at the new-N position is answered from the new trees
        vm.prank(owner);
        uint256 q = market.openDispute(id, 1, 2, bytes32("t"), 0, 20, 0);
        market.answerDispute(q, d2, buildProof(0, 20, 0, 16, BETA));
        // nothing to mark: the epoch is proven; the provider is never faulted
        _pastEpoch(id, 1);
        vm.expectRevert(IDporMarket.EpochSettled.selector);
        market.markMissed(id, 1);
        _prove(id, 2, d2);
        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(deal.failures, 0);
        vm.assertEq(deal.collateral, 16 * COLLATERAL);
        vm.assertEq(market.owed(provider), 4 * PRICE + 2 * 16 * PRICE + BOND);
    }
}
