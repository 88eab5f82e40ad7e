// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "./utils/CommitFixture.sol";
import {IDporMarket, IDporMarketFull} from "../src/market/IDporMarket.sol";
import {DporMarket} from "../src/DporMarket.sol";
import {DporCommitmentsExt} from "../src/market/DporCommitmentsExt.sol";
import {IRandomnessBeacon} from "../src/market/IRandomnessBeacon.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Digest, BlockProof} from "../src/lib/DporTypes.sol";
import {DporMerkle} from "../src/lib/DporMerkle.sol";
import {DporCommitment} from "../src/lib/DporCommitment.sol";

/// @notice Epoch commitments, challenges, safety draws and claimEpochs (docs/COMMITMENTS.md).
contract CommitmentsTest is CommitFixture {
    event EpochCommitted(
        address indexed provider, uint64 indexed g, bytes32 root, uint32 leafCount, uint256 safetyChallengeId
    );
    event ChallengeOpened(
        uint256 indexed challengeId, uint256 indexed dealId, uint64 epoch, address challenger, uint64 deadline, uint128 bond
    );

    // ------------------------------------------------------------ commitEpoch

    function test_commit_windowOnceOnlyProviderSeed() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(3, 4, 4);
        uint64 g = _g(ids[0], 0);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.EpochNotStarted.selector);
        market.commitEpoch(g, bytes32(uint256(1)), 3);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        bytes32[] memory l = _leaves(ids, ds, g);
        bytes32 root = DporMerkle.rootOfLeaves(l);
        // not a provider
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.NotRegistered.selector);
        market.commitEpoch(g, root, 3);
        vm.expectEmit(true, true, true, true, address(market));
        emit EpochCommitted(provider, g, root, 3, 0);
        _commit(g, l);
        (bytes32 r, bool c) = market.getCommitment(provider, g);
        vm.assertEq(r, root);
        vm.assertTrue(c);
        (r, c) = market.getCommitment(provider, g + 1);
        vm.assertFalse(c);
        vm.assertEq(market.globalSeeds(g), _beaconSeed(g), "commit stores the seed");
        // once
        vm.prank(provider);
        vm.expectRevert(IDporMarket.CommitmentExists.selector);
        market.commitEpoch(g, root, 3);
        // the seed of g+1 withheld: no commitment before it is available
        uint64 round = beacon.roundAt(uint256(market.genesis()) + uint256(g + 1) * EPOCH);
        beacon.withhold(round, true);
        _enterEpoch(ids[0], 1);
        vm.prank(provider);
        vm.expectRevert(abi.encodeWithSelector(IDporMarket.SeedUnavailable.selector, round));
        market.commitEpoch(g + 1, root, 3);
        beacon.withhold(round, false);
        // after the window
        vm.warp(block.timestamp + EPOCH);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.EpochClosed.selector);
        market.commitEpoch(g + 1, root, 3);
    }

    function test_commit_emptyTree() public {
        vm.warp(T0 + EPOCH);
        _noDraw(1);
        vm.prank(provider);
        market.commitEpoch(1, bytes32(0), 0);
        (bytes32 r, bool c) = market.getCommitment(provider, 1);
        vm.assertEq(r, bytes32(0));
        vm.assertTrue(c);
    }

    // ------------------------------------------------------------ challenges

    function test_challenge_answered() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(3, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        bytes32[] memory l = _leaves(ids, ds, g);
        _commit(g, l);
        uint256 balBefore = token.balanceOf(challenger);
        vm.expectEmit(true, true, true, true, address(market));
        emit ChallengeOpened(1, ids[1], 0, challenger, uint64(block.timestamp + ANSWER), BOND);
        uint256 cid = _challenge(ids[1], 0);
        vm.assertEq(cid, 1);
        vm.assertEq(market.challengeCount(), 1);
        vm.assertEq(token.balanceOf(challenger), balBefore - BOND, "bond locked");
        vm.assertEq(uint256(market.epochStatus(ids[1], 0)), uint256(IDporMarket.EpochStatus.Challenged));
        IDporMarket.Challenge memory ch = market.getChallenge(cid);
        vm.assertEq(ch.dealId, ids[1]);
        vm.assertEq(ch.challenger, challenger);
        vm.assertEq(ch.bond, BOND);
        vm.assertEq(uint256(ch.state), uint256(IDporMarket.ChallengeState.Open));
        vm.assertEq(market.getDeal(ids[1]).openDisputes, 1);
        // nobody settles it twice meanwhile
        vm.expectRevert(IDporMarket.EpochSettled.selector);
        _challenge(ids[1], 0);
        BlockProof[] memory ps = _epochProofs(ids[1], 0, ds[1]);
        vm.expectRevert(IDporMarket.EpochSettled.selector);
        market.submitEpochProof(ids[1], 0, ds[1], ps);
        // a wrong index does not verify
        _answerReverts(cid, ds[1], l, 2, IDporMarket.NotInCommitment.selector);
        uint128 escrow = market.getDeal(ids[1]).escrow;
        vm.warp(ch.deadline); // inclusive
        _answer(cid, ds[1], l, 1);
        vm.assertEq(market.owed(provider), 4 * PRICE + BOND, "epoch pay + bond");
        vm.assertEq(uint256(market.epochStatus(ids[1], 0)), uint256(IDporMarket.EpochStatus.Proven));
        vm.assertEq(uint256(market.getChallenge(cid).state), uint256(IDporMarket.ChallengeState.Answered));
        IDporMarket.Deal memory deal = market.getDeal(ids[1]);
        vm.assertEq(deal.escrow, escrow - 4 * PRICE);
        vm.assertEq(deal.openDisputes, 0);
        vm.assertEq(deal.settledWithDigest, 1);
        _answerReverts(cid, ds[1], l, 1, IDporMarket.DisputeNotOpen.selector);
        vm.expectRevert(IDporMarket.DisputeNotOpen.selector);
        market.faultChallenge(cid);
    }

    function test_challenge_unansweredFaultsAndTerminates() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(2, 4, 5);
        uint256[] memory cids = new uint256[](3);
        for (uint64 e; e < 3; ++e) {
            _enterEpoch(ids[0], e);
            uint64 g = _g(ids[0], e);
            _noDraw(g);
            _commit(g, _leaves(ids, ds, g));
            cids[e] = _challenge(ids[0], e);
        }
        IDporMarket.Challenge memory ch = market.getChallenge(cids[0]);
        vm.expectRevert(IDporMarket.DeadlineNotPassed.selector);
        market.faultChallenge(cids[2]);
        vm.warp(ch.deadline + 1);
        _answerReverts(cids[0], ds[0], _leaves(ids, ds, _g(ids[0], 0)), 0, IDporMarket.DeadlinePassed.selector);
        uint256 slash = _slash(ids[0]);
        uint256 share = slash * SHARE_BPS / 10_000;
        vm.prank(stranger); // anyone
        market.faultChallenge(cids[0]);
        vm.assertEq(market.owed(challenger), share + BOND, "share + bond back");
        vm.assertEq(market.owed(owner), slash - share + 4 * PRICE, "rest + the epoch's escrow");
        vm.assertEq(uint256(market.epochStatus(ids[0], 0)), uint256(IDporMarket.EpochStatus.Missed));
        vm.assertEq(uint256(market.getChallenge(cids[0]).state), uint256(IDporMarket.ChallengeState.Faulted));
        vm.assertEq(market.getDeal(ids[0]).failures, 1);
        vm.expectRevert(IDporMarket.DisputeNotOpen.selector);
        market.faultChallenge(cids[0]);
        vm.warp(market.getChallenge(cids[2]).deadline + 1);
        market.faultChallenge(cids[1]);
        market.faultChallenge(cids[2]);
        IDporMarket.Deal memory deal = market.getDeal(ids[0]);
        vm.assertEq(uint256(deal.state), uint256(IDporMarket.DealState.Terminated));
        vm.assertEq(deal.escrow, 0);
        vm.assertEq(deal.collateral, 0);
        vm.assertEq(deal.openDisputes, 0);
        // terminated: off the provider's list; the other deal stays
        uint256[] memory list = market.providerDeals(provider);
        vm.assertEq(list.length, 1);
        vm.assertEq(list[0], ids[1]);
    }

    function test_challenge_errors() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(1, 4, 4);
        // a deal whose digest comes only during epoch 0: no digest in force at epoch 0
        uint256 late = _openAccepted(4, BETA, 1, 4);
        _enterEpoch(ids[0], 0);
        Digest memory dl = _postReal(late, 1, 0);
        uint64 g = _g(ids[0], 0);
        vm.expectRevert(IDporMarket.NotCommitted.selector);
        _challenge(ids[0], 0);
        _noDraw(g);
        uint256[] memory two = new uint256[](2);
        two[0] = ids[0];
        two[1] = late;
        Digest[] memory dd = new Digest[](2);
        dd[0] = ds[0];
        dd[1] = dl;
        bytes32[] memory l = new bytes32[](1);
        l[0] = _leaf(ids[0], 0, ds[0]); // `late` has no digest in force at g: no leaf
        _commit(g, l);
        vm.expectRevert(IDporMarket.NoDigest.selector);
        _challenge(late, 0);
        vm.expectRevert(IDporMarket.EpochOutOfRange.selector);
        _challenge(ids[0], 4);
        vm.expectRevert(IDporMarket.UnknownDeal.selector);
        _challenge(99, 0);
        vm.expectRevert(IDporMarket.UnknownDispute.selector);
        market.faultChallenge(7);
        BlockProof[] memory none;
        vm.expectRevert(IDporMarket.UnknownDispute.selector);
        market.answerChallenge(7, ds[0], none, 0, l);
        // the window: until start + P + grace
        (, uint256 deadline) = market.epochWindow(ids[0], 0);
        vm.warp(deadline + GRACE);
        vm.expectRevert(IDporMarket.ChallengePeriodOver.selector);
        _challenge(ids[0], 0);
        vm.warp(deadline + GRACE - 1);
        uint256 cid = _challenge(ids[0], 0);
        _answer(cid, ds[0], l, 0);
        two;
        dd;
    }

    // ------------------------------------------------------------ markMissed, claims, close

    function test_markMissed_refusedOnCommittedEpoch_allowedWithoutCommitment() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(3, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        _commit(g, _leaves(ids, ds, g));
        _pastEpoch(ids[0], 1); // epoch 1: no commitment
        for (uint256 i; i < 3; ++i) {
            vm.expectRevert(IDporMarket.CommittedEpoch.selector);
            market.markMissed(ids[i], 0);
            // a provider with no commitment for g+1 is faulted per deal
            market.markMissed(ids[i], 1);
            vm.assertEq(market.getDeal(ids[i]).failures, 1);
        }
    }

    function test_claimEpochs_paysCommittedEpochsAfterTheirWindow() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(1, 4, 4);
        uint256 id = ids[0];
        for (uint64 e; e < 4; ++e) {
            _enterEpoch(id, e);
            uint64 g = _g(id, e);
            _noDraw(g);
            if (e != 2) _commit(g, _leaves(ids, ds, g));
            if (e < 3) {
                vm.prank(stranger);
                market.claimEpochs(id, 4);
                vm.assertEq(market.owed(provider), 0, "nothing inside the challenge window");
            }
        }
        (uint256 s0,) = market.epochWindow(id, 0);
        vm.warp(s0 + EPOCH + GRACE - 1);
        market.claimEpochs(id, 4);
        vm.assertEq(market.owed(provider), 0);
        vm.warp(s0 + EPOCH + GRACE);
        market.claimEpochs(id, 4);
        vm.assertEq(market.owed(provider), 4 * PRICE, "epoch 0 paid");
        vm.assertEq(market.getDeal(id).claimCursor, 1);
        vm.assertEq(uint256(market.epochStatus(id, 0)), uint256(IDporMarket.EpochStatus.Proven));
        market.claimEpochs(id, 4);
        vm.assertEq(market.owed(provider), 4 * PRICE, "paid once");
        // epoch 2 was not committed: it can be marked missed (a fault); 3 cannot
        (uint256 s3,) = market.epochWindow(id, 3);
        vm.warp(s3 + EPOCH + GRACE);
        market.markMissed(id, 2);
        vm.expectRevert(IDporMarket.CommittedEpoch.selector);
        market.markMissed(id, 3);
        market.claimEpochs(id, 2); // upTo bounds the work
        vm.assertEq(market.getDeal(id).claimCursor, 2);
        vm.assertEq(market.owed(provider), 8 * PRICE);
        market.claimEpochs(id, 100);
        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(deal.claimCursor, 4);
        vm.assertEq(market.owed(provider), 12 * PRICE, "epochs 0, 1, 3");
        vm.assertEq(deal.settledWithDigest, 4);
        vm.assertEq(deal.escrow, 0);
        market.closeDeal(id);
        vm.assertEq(market.getDeal(id).failures, 1);
    }

    function test_closeDeal_committedAndUncommittedEpochs() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(2, 4, 4);
        for (uint64 e; e < 4; ++e) {
            _enterEpoch(ids[0], e);
            uint64 g = _g(ids[0], e);
            _noDraw(g);
            if (e != 2) _commit(g, _leaves(ids, ds, g));
        }
        _pastGrace(ids[0]);
        uint256 slash = _slash(ids[0]);
        market.closeDeal(ids[0]);
        IDporMarket.Deal memory deal = market.getDeal(ids[0]);
        vm.assertEq(uint256(deal.state), uint256(IDporMarket.DealState.Completed));
        vm.assertEq(deal.failures, 1, "the uncommitted epoch is a fault");
        vm.assertEq(market.owed(provider), 12 * PRICE + 4 * COLLATERAL - slash);
        vm.assertEq(market.owed(owner), 4 * PRICE + slash);
        vm.assertEq(market.providerDeals(provider).length, 1, "closed deal off the list");
    }

    function test_perDealProofStillWorksAlongside() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(2, 4, 2);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        _commit(g, _leaves(ids, ds, g));
        _prove(ids[0], 0, ds[0]); // settles it whatever the commitment says
        vm.assertEq(market.owed(provider), 4 * PRICE);
        vm.expectRevert(IDporMarket.EpochSettled.selector);
        _challenge(ids[0], 0);
        // an uncommitted epoch proven per deal, then the rest claimed
        _prove(ids[0], 1, ds[0]);
        _prove(ids[1], 1, ds[1]);
        _pastGrace(ids[0]);
        market.claimEpochs(ids[0], 2);
        market.claimEpochs(ids[1], 2);
        vm.assertEq(market.owed(provider), 4 * 4 * PRICE, "each epoch paid exactly once");
        market.closeDeal(ids[0]);
        market.closeDeal(ids[1]);
        vm.assertEq(market.getDeal(ids[0]).failures + market.getDeal(ids[1]).failures, 0);
    }

    // ------------------------------------------------------------ safety draws

    function test_safetyDraw_opensChallengeAnsweredByProvider() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(3, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _setDrawDeal(g, provider, ids[2]);
        bytes32[] memory l = _leaves(ids, ds, g);
        uint256 sid = _commit(g, l);
        vm.assertEq(sid, 1);
        IDporMarket.Challenge memory ch = market.getChallenge(sid);
        vm.assertEq(ch.dealId, ids[2]);
        vm.assertEq(ch.challenger, address(0));
        vm.assertEq(ch.bond, 0);
        vm.assertEq(ch.deadline, block.timestamp + ANSWER);
        _answer(sid, ds[2], l, 2);
        vm.assertEq(market.owed(provider), 4 * PRICE);
    }

    function test_safetyDraw_unansweredSlashesToOwner() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(1, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _setDrawDeal(g, provider, ids[0]);
        uint256 sid = _commit(g, _leaves(ids, ds, g));
        vm.assertTrue(sid != 0);
        vm.warp(block.timestamp + ANSWER + 1);
        market.faultChallenge(sid);
        vm.assertEq(market.owed(owner), _slash(ids[0]) + 4 * PRICE, "whole slash + refund to the owner");
        vm.assertEq(market.owed(address(0)), 0);
    }

    /// A deal accepted during g is not in W (the total blocks at g's start): it cannot
    /// move the draw.
    function test_safetyDraw_weightAtEpochStart() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(1, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _setDraw(g, provider, true, 8, 4, 8); // with W = 8 it would draw x in [4, 8): the fresh deal
        uint256 fresh = _openAccepted(4, BETA, 1, 4);
        vm.assertEq(market.providerDeals(provider).length, 2);
        vm.assertEq(market.safetyDrawWeight(provider, g), 4, "W = the 4 blocks at g's start");
        vm.assertEq(market.safetyDrawTarget(provider, 5), fresh);
        uint256 sid = _commit(g, _leaves(ids, ds, g));
        vm.assertTrue(sid != 0);
        vm.assertEq(market.getChallenge(sid).dealId, ids[0], "W = 4: x < 4 is the first deal");
    }

    function test_safetyDraw_missesWhenNotDrawn() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(2, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _setDraw(g, provider, false, 0, 0, 0);
        vm.assertEq(_commit(g, _leaves(ids, ds, g)), 0);
        vm.assertEq(market.challengeCount(), 0);
    }

    // ------------------------------------------------------------ the deal list

    function test_providerDeals_swapAndPop() public {
        uint256 a = _openAccepted(4, BETA, 1, 2);
        uint256 b = _openAccepted(4, BETA, 1, 2);
        uint256 c = _openAccepted(4, BETA, 1, 2);
        uint256[] memory list = market.providerDeals(provider);
        vm.assertEq(list.length, 3);
        vm.assertEq(list[1], b);
        vm.warp(block.timestamp + UPLOAD);
        vm.prank(owner);
        market.exitBeforeUpload(a); // a (index 0) out: c moves to 0
        list = market.providerDeals(provider);
        vm.assertEq(list.length, 2);
        vm.assertEq(list[0], c);
        vm.assertEq(list[1], b);
        vm.assertEq(market.getDeal(c).listIndex, 0);
        vm.assertEq(market.getDeal(b).listIndex, 1);
        vm.prank(provider);
        market.exitBeforeUpload(b);
        list = market.providerDeals(provider);
        vm.assertEq(list.length, 1);
        vm.assertEq(list[0], c);
    }

    // ------------------------------------------------------------ installation, encodings

    function test_install_onceByDeployerOnly() public {
        DporMarket m = new DporMarket(IERC20(address(token)), IRandomnessBeacon(address(beacon)), _params());
        IDporMarketFull fm = IDporMarketFull(address(m));
        vm.expectRevert(IDporMarket.NotInstalled.selector);
        fm.commitEpoch(0, bytes32(0), 0);
        vm.expectRevert(IDporMarket.NotInstalled.selector);
        fm.closeDeal(1);
        DporCommitmentsExt ext2 = new DporCommitmentsExt(fm);
        vm.assertEq(ext2.genesis(), m.genesis());
        vm.assertEq(ext2.epochSeconds(), m.epochSeconds());
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.NotDeployer.selector);
        fm.installCommitments(address(ext2));
        // an extension built for another market, or no contract
        address other = market.commitments();
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        fm.installCommitments(other);
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        fm.installCommitments(stranger);
        fm.installCommitments(address(ext2));
        vm.assertEq(fm.commitments(), address(ext2));
        vm.expectRevert(IDporMarket.AlreadyInstalled.selector);
        fm.installCommitments(address(ext2));
        // direct calls to the extension are refused
        vm.expectRevert(IDporMarket.WrongContext.selector);
        ext2.commitEpoch(0, bytes32(0), 0);
        vm.expectRevert(IDporMarket.WrongContext.selector);
        ext2.claimEpochs(1, 1);
        vm.assertEq(fm.SAFETY_PERIOD(), 16);
    }

    /// The byte layouts of docs/COMMITMENTS.md §1 and §5, written out by hand.
    function test_encodings() public pure {
        bytes32 rh = keccak256("response");
        bytes memory pre = abi.encodePacked(bytes1(0x04), bytes32(uint256(7)), bytes8(uint64(3)), bytes8(uint64(2)), rh);
        vm.assertEq(pre.length, 81);
        vm.assertEq(DporCommitment.leaf(7, 3, 2, rh), keccak256(pre));
        bytes[] memory blocks = new bytes[](2);
        blocks[0] = hex"0102";
        blocks[1] = hex"030405";
        vm.assertEq(DporCommitment.responseHash(bytes32(uint256(9)), blocks), keccak256(abi.encodePacked(bytes32(uint256(9)), hex"0102030405")));
        bytes memory draw = abi.encode(bytes32(uint256(1)), address(0xBEEF), "dpor.safety");
        vm.assertEq(draw.length, 160, "bytes32, address, then a dynamic string (offset 0x60, length 11)");
        bytes memory manual = abi.encodePacked(
            bytes32(uint256(1)), bytes32(uint256(uint160(0xBEEF))), bytes32(uint256(0x60)), bytes32(uint256(11)), bytes32("dpor.safety")
        );
        vm.assertEq(keccak256(draw), keccak256(manual));
    }
}
