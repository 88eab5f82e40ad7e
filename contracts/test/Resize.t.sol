// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "./utils/MarketFixture.sol";
import {IDporMarket} from "../src/market/IDporMarket.sol";
import {Digest, BlockProof, SampleProof, DigestRecord} from "../src/lib/DporTypes.sol";
import {DporDigest} from "../src/lib/DporDigest.sol";
import {DporSampling} from "../src/lib/DporSampling.sol";
import {Wallet1271} from "./utils/Mocks.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice Unit tests of deal resizing (paper App. A.3; docs/CONTRACTS.md §4.1):
///         `resizeDeal` and `resizeHash`, the exact token movements of a grow and a
///         shrink, capacity, events, the digest records' N, and epoch proofs on both
///         sides of a resize (old N for an epoch bound to the pre-resize digest, new N
///         after it). Attacks: attacks/F11_Resize.t.sol.
contract ResizeTest is MarketFixture {
    uint32 internal constant EPOCHS = 10;

    struct Balances {
        uint256 owner;
        uint256 provider;
        uint256 market;
        uint256 owedOwner;
        uint256 owedProvider;
        uint64 used;
    }

    function _balances() internal view returns (Balances memory b) {
        b.owner = token.balanceOf(owner);
        b.provider = token.balanceOf(provider);
        b.market = token.balanceOf(address(market));
        b.owedOwner = market.owed(owner);
        b.owedProvider = market.owed(provider);
        b.used = market.getProvider(provider).usedBlocks;
    }

    /// The signing hash is EIP-712 over the documented type string, in the digests' domain.
    function test_resizeHash_isEip712() public {
        uint256 id = _openAccepted(4, BETA, 1, EPOCHS);
        Digest memory d = _resizeDigest(id, 2, 8);
        bytes32 typeHash = keccak256(
            "Resize(Digest digest,uint128 pricePerEpoch,uint128 collateral)Digest(uint256 dealId,uint64 version,uint64 numBlocks,uint64 writeCount,uint64 rebuildCount,bytes32 rootU,bytes32 rootC,bytes32[] levelRoots)"
        );
        bytes32 sh = keccak256(abi.encode(typeHash, DporDigest.structHashMemory(d), uint128(7), uint128(9)));
        bytes32 want = keccak256(abi.encodePacked(hex"1901", market.domainSeparator(), sh));
        vm.assertEq(market.resizeHash(d, 7, 9), want);
        // a digest signature is not a resize signature, and every field is bound
        vm.assertNotEq(market.resizeHash(d, 7, 9), market.digestHash(d));
        vm.assertNotEq(market.resizeHash(d, 7, 9), market.resizeHash(d, 8, 9));
        vm.assertNotEq(market.resizeHash(d, 7, 9), market.resizeHash(d, 7, 10));
        d.rootC = bytes32(uint256(d.rootC) ^ 1);
        vm.assertNotEq(market.resizeHash(d, 7, 9), want);
    }

    /// Grow 4 → 8 after one proven epoch: the owner pays the new price for the 9 epochs
    /// left, the provider locks the new collateral; capacity, deal, records and events.
    function test_grow_tokensCapacityEvents() public {
        uint256 id = _openAccepted(4, BETA, 1, EPOCHS);
        Digest memory d1 = _postReal(id, 1, 3);
        _prove(id, 0, d1); // 4 PRICE to the provider, escrow 36 PRICE
        Balances memory b = _balances();
        vm.assertEq(b.used, 4);
        Digest memory d2 = _resizeDigest(id, 2, 8);
        uint128 price = 8 * 2e18; // a new per-block price of 2
        uint128 col = 8 * 7e18;
        bytes32 h2 = market.digestHash(d2);
        (bytes memory so, bytes memory sp) = _resizeSigs(d2, price, col);
        vm.expectEmit(true, true, true, true, address(market));
        emit IDporMarket.DigestPosted(id, 2, h2, d2);
        vm.expectEmit(true, true, true, true, address(market));
        emit IDporMarket.DealResized(id, 4, 8, price, 9 * price, col);
        vm.prank(stranger); // a relayer
        market.resizeDeal(d2, price, col, so, sp);

        Balances memory a = _balances();
        uint256 escrowIn = 9 * uint256(price) - 36 * PRICE;
        uint256 colIn = uint256(col) - 4 * COLLATERAL;
        vm.assertEq(b.owner - a.owner, escrowIn);
        vm.assertEq(b.provider - a.provider, colIn);
        vm.assertEq(a.market - b.market, escrowIn + colIn);
        vm.assertEq(a.owedOwner, b.owedOwner);
        vm.assertEq(a.owedProvider, b.owedProvider);
        vm.assertEq(a.used, 8);

        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(deal.numBlocks, 8);
        vm.assertEq(deal.pricePerEpoch, price);
        vm.assertEq(deal.escrow, 9 * uint256(price));
        vm.assertEq(deal.collateral, col);
        vm.assertEq(deal.slashPerFault, (uint256(col) + MAX_FAILURES - 1) / MAX_FAILURES);
        vm.assertEq(deal.digestVersion, 2);
        vm.assertEq(deal.writeCount, 0);
        vm.assertEq(deal.digestHash, h2);
        vm.assertEq(deal.numEpochs, EPOCHS);

        _checkRecords(id, h2);

        // postDigest now wants the new N
        Digest memory old = buildDigest(id, 3, 4, 1, 0, BETA);
        bytes32 h = market.digestHash(old);
        vm.expectRevert(IDporMarket.WrongNumBlocks.selector);
        market.postDigest(old, _sig(OWNER_PK, h), _sig(PROVIDER_PK, h));
        _postReal(id, 3, 5); // a write at the new size
    }

    /// The records keep each digest's own N: 4 for v1, 8 for the resize's v2.
    function _checkRecords(uint256 id, bytes32 h2) internal view {
        DigestRecord memory r1 = market.getDigestRecord(id, 1);
        DigestRecord memory r2 = market.getDigestRecord(id, 2);
        vm.assertEq(r1.numBlocks, 4);
        vm.assertEq(r1.writeCount, 3);
        vm.assertEq(r1.nextVersion, 2);
        vm.assertEq(r2.numBlocks, 8);
        vm.assertEq(r2.digestHash, h2);
        vm.assertEq(r2.postedAt, block.timestamp);
        vm.assertEq(r2.writeCount, 0);
        vm.assertEq(r2.prevVersion, 1);
        vm.assertEq(market.getDigestRecord(id, 3).numBlocks, 0); // never posted

    }

    /// Shrink 8 → 2: nothing is pulled; the escrow and collateral differences are credited.
    function test_shrink_creditsOwed() public {
        uint256 id = _openAccepted(8, BETA, 1, EPOCHS);
        Digest memory d1 = _postReal(id, 1, 5);
        _prove(id, 0, d1);
        _pastEpoch(id, 1);
        market.markMissed(id, 1); // a fault: 8 PRICE back + one slash to the owner
        Balances memory b = _balances();
        uint256 oldCol = market.getDeal(id).collateral;
        vm.assertEq(oldCol, 8 * COLLATERAL - (8 * uint256(COLLATERAL) + MAX_FAILURES - 1) / MAX_FAILURES);
        Digest memory d2 = _resizeDigest(id, 4, 2);
        uint128 price = 2 * PRICE;
        uint128 col = 2 * COLLATERAL;
        vm.expectEmit(true, true, true, true, address(market));
        emit IDporMarket.DealResized(id, 8, 2, price, 8 * price, col);
        vm.expectEmit(true, true, true, true, address(market));
        emit IDporMarket.Credited(owner, 64 * PRICE - 8 * uint256(price));
        vm.expectEmit(true, true, true, true, address(market));
        emit IDporMarket.Credited(provider, oldCol - col);
        _resize(d2, price, col);
        Balances memory a = _balances();
        vm.assertEq(a.owner, b.owner);
        vm.assertEq(a.provider, b.provider);
        vm.assertEq(a.market, b.market);
        vm.assertEq(a.owedOwner - b.owedOwner, 64 * PRICE - 8 * uint256(price)); // 8 epochs left
        vm.assertEq(a.owedProvider - b.owedProvider, oldCol - col);
        vm.assertEq(a.used, 2);
        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(deal.escrow, 8 * uint256(price));
        vm.assertEq(deal.failures, 1); // faults are kept
        vm.assertEq(market.getDigestRecord(id, 4).numBlocks, 2);
        // the credits are pulled as usual
        vm.prank(provider);
        vm.assertEq(market.withdraw(), a.owedProvider);
    }

    /// A shrink passes even when the provider's capacity is now below what it uses.
    function test_shrink_belowLoweredCapacity() public {
        uint256 id = _openAccepted(8, BETA, 1, EPOCHS);
        vm.prank(provider);
        market.updateProvider(hex"0024080112", _addrs(), PRICE, COLLATERAL, 1);
        _resize(_resizeDigest(id, 1, 4), 4 * PRICE, 4 * COLLATERAL);
        vm.assertEq(market.getProvider(provider).usedBlocks, 4);
    }

    /// Same price and collateral: no token moves at all; the price can also drop to 0.
    function test_resize_sameTermsAndFreeDeal() public {
        uint256 id = _openAccepted(4, BETA, 1, EPOCHS);
        Balances memory b = _balances();
        _resize(_resizeDigest(id, 1, 2), 4 * PRICE, 4 * COLLATERAL); // the first digest is a resize
        Balances memory a = _balances();
        vm.assertEq(a.market, b.market);
        vm.assertEq(a.owedOwner, b.owedOwner);
        vm.assertEq(a.owedProvider, b.owedProvider);
        vm.assertEq(market.getDeal(id).firstDigestAt, block.timestamp);
        _resize(_resizeDigest(id, 2, 4), 0, 4 * COLLATERAL);
        vm.assertEq(market.getDeal(id).escrow, 0);
        vm.assertEq(market.owed(owner) - a.owedOwner, EPOCHS * 4 * PRICE);
    }

    /// From price 0 the unsettled epochs are counted from the status bits: proven and
    /// missed epochs are not charged again (a term over two status words).
    function test_resize_fromFreeDeal_countsUnsettledEpochs() public {
        vm.prank(provider);
        market.updateProvider(hex"0024080112", _addrs(), 0, COLLATERAL, CAPACITY);
        vm.prank(owner);
        uint256 id = market.openDeal(provider, 4, BETA, 16, 1, 200, 0, 0);
        vm.prank(provider);
        market.acceptDeal(id);
        Digest memory d1 = _postReal(id, 1, 0);
        _prove(id, 0, d1);
        _pastEpoch(id, 1);
        market.markMissed(id, 1);
        _prove(id, 2, d1);
        // epoch 130 (second status word) missed too
        _pastEpoch(id, 130);
        market.markMissed(id, 130);
        uint256 before = token.balanceOf(owner);
        _resize(_resizeDigest(id, 2, 8), 5, 8 * COLLATERAL);
        // 200 − 4 settled = 196 epochs at 5 wei
        vm.assertEq(market.getDeal(id).escrow, 196 * 5);
        vm.assertEq(before - token.balanceOf(owner), 196 * 5);
    }

    /// Epochs on both sides of a resize: the epoch already started when the resize lands
    /// stays bound to the old digest and is proven with old-N positions; later epochs use
    /// the new digest and new-N positions; a proof pays the new price.
    function test_epochProofs_acrossResize() public {
        uint256 id = _openAccepted(4, BETA, 2, EPOCHS);
        Digest memory d1 = _postReal(id, 1, 3);
        _prove(id, 0, d1);
        _enterEpoch(id, 1);
        vm.warp(block.timestamp + 1 hours);
        Digest memory d2 = _resizeDigest(id, 2, 64);
        uint128 price = 64 * PRICE;
        _resize(d2, price, 64 * COLLATERAL);

        // epoch 1: bound to d1 (N = 4); the samples are those of N = 4
        (uint64 v,,) = market.digestInForce(id, 1);
        vm.assertEq(v, 1);
        bytes32 seed = market.touchSeed(id, 1);
        bytes32 h1 = market.digestHash(d1);
        for (uint256 j; j < 2; ++j) {
            (uint8 tag, uint64 pos) = market.epochSample(id, 1, j);
            (uint256 t4, uint256 p4) = DporSampling.epochSample(seed, h1, j, 4, 3);
            vm.assertEq(tag, t4);
            vm.assertEq(pos, p4);
        }
        uint256 owed0 = market.owed(provider);
        market.submitEpochProof(id, 1, d1, _epochProofs(id, 1, d1));
        vm.assertEq(market.owed(provider) - owed0, price); // paid at the new price
        // the new digest is not in force for epoch 1
        _prove(id, 2, d2); // warps into epoch 2
        (v,,) = market.digestInForce(id, 2);
        vm.assertEq(v, 2);
        // epoch 3 samples the new digest with N = 64 (C has 128 positions)
        _enterEpoch(id, 3);
        seed = market.touchSeed(id, 3);
        bytes32 h2 = market.digestHash(d2);
        for (uint256 j; j < 2; ++j) {
            (uint8 tag, uint64 pos) = market.epochSample(id, 3, j);
            (uint256 t64, uint256 p64) = DporSampling.epochSample(seed, h2, j, 64, 0);
            vm.assertEq(tag, t64);
            vm.assertEq(pos, p64);
        }
        BlockProof[] memory ps = _epochProofs(id, 3, d2);
        vm.expectRevert(IDporMarket.DigestNotInForce.selector);
        market.submitEpochProof(id, 3, d1, ps);
        market.submitEpochProof(id, 3, d2, ps);
        vm.assertEq(market.getDeal(id).failures, 0);
        vm.assertEq(market.getDeal(id).escrow, (EPOCHS - 4) * uint256(price));
    }

    /// An old-N epoch proof whose samples land only where the new N has positions is
    /// refused: the proof for epoch 1 must use the old digest's N (run sizes and paths).
    function test_epochProof_oldEpochRejectsNewNProof() public {
        uint256 id = _openAccepted(4, BETA, 1, EPOCHS);
        Digest memory d1 = _postReal(id, 1, 0);
        _enterEpoch(id, 0);
        Digest memory d2 = _resizeDigest(id, 2, 16);
        _resize(d2, 16 * PRICE, 16 * COLLATERAL);
        // proofs built against the new trees (run path of log2(32) siblings) fail for epoch 0
        BlockProof[] memory ps = _epochProofs(id, 0, d1);
        BlockProof[] memory wrong = new BlockProof[](1);
        wrong[0] = buildBlockProof(ps[0].runTag, ps[0].position, 16, BETA);
        vm.expectRevert(IDporMarket.InvalidProof.selector);
        market.submitEpochProof(id, 0, d1, wrong);
        vm.expectRevert(IDporMarket.DigestNotInForce.selector);
        market.submitEpochProof(id, 0, d2, wrong);
        market.submitEpochProof(id, 0, d1, ps);
    }

    /// Disputes after a resize are against the new digest and bounded by its N; the
    /// provider answers with the new trees.
    function test_dispute_afterResize_usesNewN() public {
        uint256 id = _openAccepted(4, BETA, 1, EPOCHS);
        _postReal(id, 1, 1);
        Digest memory d2 = _resizeDigest(id, 2, 16);
        _resize(d2, 16 * PRICE, 16 * COLLATERAL);
        vm.startPrank(challenger);
        vm.expectRevert(IDporMarket.WrongSample.selector);
        market.openDispute(id, 0, 2, bytes32("t"), 0, 32, 0); // C of N = 16 has 32 positions
        vm.expectRevert(IDporMarket.WrongSample.selector);
        market.openDispute(id, 0, 2, bytes32("t"), 1, 0, 0); // level 0 is gone (t = 0)
        uint256 q = market.openDispute(id, 0, 2, bytes32("t"), 0, 20, 1);
        vm.stopPrank();
        SampleProof memory p = buildProof(0, 20, 1, 16, BETA);
        market.answerDispute(q, d2, p);
        vm.assertEq(uint256(market.getDispute(q).state), uint256(IDporMarket.DisputeState.Answered));
    }

    /// An ERC-1271 wallet owner consents to a grow through isValidSignature (and can
    /// refuse); the escrow difference is pulled from the wallet.
    function test_resize_contractWalletOwner() public {
        uint256 signerPk = 0x5151;
        Wallet1271 w = new Wallet1271(vm.addr(signerPk));
        token.mint(address(w), 1e24);
        w.exec(address(token), abi.encodeCall(IERC20.approve, (address(market), type(uint256).max)));
        bytes memory ret =
            w.exec(address(market), abi.encodeCall(market.openDeal, (provider, 4, BETA, 16, 1, 5, PRICE, COLLATERAL)));
        uint256 id = abi.decode(ret, (uint256));
        vm.prank(provider);
        market.acceptDeal(id);
        Digest memory d = _resizeDigest(id, 1, 8);
        bytes32 h = market.resizeHash(d, 8 * PRICE, 8 * COLLATERAL);
        bytes memory ws = _sig(signerPk, h);
        bytes memory ps = _sig(PROVIDER_PK, h);
        w.setRefuse(true);
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.resizeDeal(d, 8 * PRICE, 8 * COLLATERAL, ws, ps);
        w.setRefuse(false);
        uint256 before = token.balanceOf(address(w));
        market.resizeDeal(d, 8 * PRICE, 8 * COLLATERAL, ws, ps);
        vm.assertEq(before - token.balanceOf(address(w)), 5 * 4 * PRICE);
        vm.assertEq(market.getDeal(id).numBlocks, 8);
    }

    /// Closing after a resize returns the resized collateral and releases the new N.
    function test_close_afterResize() public {
        uint256 id = _openAccepted(4, BETA, 1, 3);
        Digest memory d1 = _postReal(id, 1, 0);
        _prove(id, 0, d1);
        Digest memory d2 = _resizeDigest(id, 2, 8);
        _resize(d2, 8 * PRICE, 8 * COLLATERAL); // during epoch 0: in force from epoch 1
        _prove(id, 1, d2);
        _prove(id, 2, d2);
        _pastGrace(id);
        uint256 before = market.owed(provider);
        market.closeDeal(id);
        vm.assertEq(market.owed(provider) - before, 8 * COLLATERAL);
        vm.assertEq(market.owed(provider), 4 * PRICE + 2 * 8 * PRICE + 8 * COLLATERAL);
        vm.assertEq(market.getProvider(provider).usedBlocks, 0);
        vm.assertEq(market.getProvider(provider).activeDeals, 0);
    }
}
