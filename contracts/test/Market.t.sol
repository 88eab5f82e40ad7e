// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "./utils/MarketFixture.sol";
import {DporMarket} from "../src/DporMarket.sol";
import {IDporMarket, IDporMarketFull} from "../src/market/IDporMarket.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IRandomnessBeacon} from "../src/market/IRandomnessBeacon.sol";
import {DporMarketExt} from "../src/market/DporMarketExt.sol";
import {DporVerifier} from "../src/market/DporVerifier.sol";
import {Digest, SampleProof, BlockProof, MarketParams, DigestRecord} from "../src/lib/DporTypes.sol";

/// @notice Unit tests: every external function of the market and every custom error.
contract MarketTest is MarketFixture {
    // ------------------------------------------------------------ constructor

    function test_constructor_params() public view {
        vm.assertEq(address(market.token()), address(token));
        vm.assertEq(address(market.beacon()), address(beacon));
        vm.assertFalse(market.devSeeds());
        vm.assertEq(market.genesis(), T0);
        vm.assertEq(market.epochSeconds(), EPOCH);
        vm.assertEq(market.answerSeconds(), ANSWER);
        vm.assertEq(market.graceSeconds(), GRACE);
        vm.assertEq(market.uploadSeconds(), UPLOAD);
        vm.assertEq(market.exitNoticeEpochs(), NOTICE);
        vm.assertEq(market.disputeBond(), BOND);
        vm.assertEq(market.challengerShareBps(), SHARE_BPS);
        vm.assertEq(market.maxFailures(), MAX_FAILURES);
        vm.assertEq(market.minStake(), MIN_STAKE);
        vm.assertTrue(market.verifier() != address(0));
        vm.assertTrue(market.extension() != address(0));
    }

    /// @dev Finding 7: every duration and maxFailures has a floor; too large durations are rejected.
    function test_constructor_rejectsBadParams() public {
        IERC20 t = IERC20(address(token));
        IRandomnessBeacon b = IRandomnessBeacon(address(0));
        MarketParams memory p = _params();
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        new DporMarket(IERC20(address(0)), b, p);
        p.challengerShareBps = 10_001;
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        new DporMarket(t, b, p);
        p = _params();
        p.epochSeconds = 366 days;
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        new DporMarket(t, b, p);
        p = _params();
        p.answerSeconds = type(uint64).max; // would wrap a uint64 deadline
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        new DporMarket(t, b, p);
        p = _params();
        p.epochSeconds = 6 hours - 1;
        vm.expectRevert(IDporMarket.BelowFloor.selector);
        new DporMarket(t, b, p);
        p = _params();
        p.answerSeconds = 15 hours - 1;
        vm.expectRevert(IDporMarket.BelowFloor.selector);
        new DporMarket(t, b, p);
        p = _params();
        p.graceSeconds = 1 days - 1;
        vm.expectRevert(IDporMarket.BelowFloor.selector);
        new DporMarket(t, b, p);
        p = _params();
        p.uploadSeconds = 1 days - 1;
        vm.expectRevert(IDporMarket.BelowFloor.selector);
        new DporMarket(t, b, p);
        p = _params();
        p.exitNoticeEpochs = 0;
        vm.expectRevert(IDporMarket.BelowFloor.selector);
        new DporMarket(t, b, p);
        p = _params();
        p.maxFailures = 2;
        vm.expectRevert(IDporMarket.BelowFloor.selector);
        new DporMarket(t, b, p);
        // exactly the floors is fine
        p = MarketParams(6 hours, 15 hours, 1 days, 1 days, 1, 0, 0, 3, 0);
        new DporMarket(t, b, p);
    }

    function test_extension_refusesDirectCalls() public {
        DporMarketExt ext = DporMarketExt(market.extension());
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.WrongContext.selector);
        ext.register(hex"01", _addrs(), 1, 1, 1, MIN_STAKE);
        vm.expectRevert(IDporMarket.WrongContext.selector);
        ext.slash(1);
    }

    function test_fallback_unknownSelectorReverts() public {
        (bool ok,) = address(market).call(abi.encodeWithSignature("nope()"));
        vm.assertFalse(ok);
    }

    function test_domainSeparator() public view {
        bytes32 expected = keccak256(
            abi.encode(
                keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
                keccak256("dpor"),
                keccak256("1"),
                block.chainid,
                address(market)
            )
        );
        vm.assertEq(market.domainSeparator(), expected);
    }

    // ------------------------------------------------------------ token

    function test_token_anyoneMints() public {
        vm.prank(stranger);
        token.mint(address(0xBEEF), 5);
        vm.assertEq(token.balanceOf(address(0xBEEF)), 5);
    }

    // ------------------------------------------------------------ providers

    function test_register_storesAndStakes() public view {
        IDporMarket.Provider memory p = market.getProvider(provider);
        vm.assertTrue(p.registered);
        vm.assertEq(p.peerId, hex"0024080112");
        vm.assertEq(p.multiaddrs.length, 2);
        vm.assertEq(p.multiaddrs[0], "/ip4/127.0.0.1/tcp/4001");
        vm.assertEq(p.pricePerBlockEpoch, PRICE);
        vm.assertEq(p.collateralPerBlock, COLLATERAL);
        vm.assertEq(p.capacityBlocks, CAPACITY);
        vm.assertEq(p.stake, MIN_STAKE);
        vm.assertEq(token.balanceOf(address(market)), MIN_STAKE);
    }

    function test_register_errors() public {
        vm.prank(provider);
        vm.expectRevert(IDporMarket.AlreadyRegistered.selector);
        market.register(hex"01", _addrs(), 1, 1, 1, MIN_STAKE);
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.StakeTooLow.selector);
        market.register(hex"01", _addrs(), 1, 1, 1, MIN_STAKE - 1);
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        market.register(hex"", _addrs(), 1, 1, 1, MIN_STAKE);
    }

    function test_updateProvider() public {
        string[] memory a = new string[](1);
        a[0] = "/ip4/10.0.0.1/tcp/1";
        vm.prank(provider);
        market.updateProvider(hex"aabb", a, 7, 8, 9);
        IDporMarket.Provider memory p = market.getProvider(provider);
        vm.assertEq(p.peerId, hex"aabb");
        vm.assertEq(p.multiaddrs.length, 1);
        vm.assertEq(p.pricePerBlockEpoch, 7);
        vm.assertEq(p.collateralPerBlock, 8);
        vm.assertEq(p.capacityBlocks, 9);
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.NotRegistered.selector);
        market.updateProvider(hex"aabb", a, 7, 8, 9);
    }

    function test_stake_addAndWithdraw() public {
        vm.prank(provider);
        market.addStake(5);
        vm.assertEq(market.getProvider(provider).stake, MIN_STAKE + 5);
        uint256 before = token.balanceOf(provider);
        vm.prank(provider);
        market.withdrawStake(5);
        vm.assertEq(token.balanceOf(provider), before + 5);
        vm.assertEq(market.getProvider(provider).stake, MIN_STAKE);
    }

    function test_stake_errors() public {
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.NotRegistered.selector);
        market.addStake(1);
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.NotRegistered.selector);
        market.withdrawStake(1);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.ZeroAmount.selector);
        market.addStake(0);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.ZeroAmount.selector);
        market.withdrawStake(0);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.InsufficientStake.selector);
        market.withdrawStake(MIN_STAKE + 1);
        _openAccepted(4, BETA, 1, 3);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.StakeLocked.selector);
        market.withdrawStake(1);
    }

    // ------------------------------------------------------------ deals

    function test_openDeal_escrowsAndStores() public {
        uint256 before = token.balanceOf(owner);
        uint256 id = _open(8, 4096, 2, 5);
        vm.assertEq(id, 1);
        vm.assertEq(market.dealCount(), 1);
        IDporMarket.Deal memory d = market.getDeal(id);
        vm.assertEq(d.owner, owner);
        vm.assertEq(d.provider, provider);
        vm.assertEq(d.numBlocks, 8);
        vm.assertEq(d.blockSize, 4096);
        vm.assertEq(d.lambda, 16);
        vm.assertEq(d.samplesPerEpoch, 2);
        vm.assertEq(d.numEpochs, 5);
        vm.assertEq(uint256(d.state), uint256(IDporMarket.DealState.Open));
        vm.assertEq(d.pricePerEpoch, 8 * PRICE);
        vm.assertEq(d.escrow, 40 * PRICE);
        vm.assertEq(d.collateral, 8 * COLLATERAL);
        vm.assertEq(d.slashPerFault, 8 * COLLATERAL / MAX_FAILURES);
        vm.assertEq(token.balanceOf(owner), before - 40 * PRICE);
    }

    function test_openDeal_defaultSamples() public {
        uint256 id = _open(8, 4096, 0, 5);
        vm.assertEq(market.getDeal(id).samplesPerEpoch, 1);
    }

    function test_openDeal_errors() public {
        vm.startPrank(owner);
        vm.expectRevert(IDporMarket.NotRegistered.selector);
        market.openDeal(stranger, 8, BETA, 16, 1, 5, PRICE, 0);
        vm.expectRevert(IDporMarket.NumBlocksNotPowerOfTwo.selector);
        market.openDeal(provider, 3, BETA, 16, 1, 5, PRICE, 0);
        vm.expectRevert(IDporMarket.NumBlocksNotPowerOfTwo.selector);
        market.openDeal(provider, 0, BETA, 16, 1, 5, PRICE, 0);
        vm.expectRevert(IDporMarket.NumBlocksNotPowerOfTwo.selector);
        market.openDeal(provider, uint64(1) << 41, BETA, 16, 1, 5, PRICE, 0);
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        market.openDeal(provider, 8, 0, 16, 1, 5, PRICE, 0);
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        market.openDeal(provider, 8, BETA, 0, 1, 5, PRICE, 0);
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        market.openDeal(provider, 8, BETA, 16, 9, 5, PRICE, 0);
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        market.openDeal(provider, 8, BETA, 16, 1, 0, PRICE, 0);
        vm.expectRevert(IDporMarket.InvalidParameter.selector);
        market.openDeal(provider, 8, BETA, 16, 1, 5, type(uint128).max, 0);
        vm.expectRevert(IDporMarket.PriceBelowAsk.selector);
        market.openDeal(provider, 8, BETA, 16, 1, 5, PRICE - 1, 0);
        vm.expectRevert(IDporMarket.CollateralBelowMin.selector);
        market.openDeal(provider, 8, BETA, 16, 1, 5, PRICE, COLLATERAL + 1);
        vm.stopPrank();
    }

    function test_cancelDeal_refunds() public {
        uint256 before = token.balanceOf(owner);
        uint256 id = _open(8, BETA, 1, 5);
        vm.prank(owner);
        market.cancelDeal(id);
        vm.assertEq(token.balanceOf(owner), before);
        vm.assertEq(uint256(market.getDeal(id).state), uint256(IDporMarket.DealState.Cancelled));
        vm.assertEq(market.getDeal(id).escrow, 0);
    }

    function test_cancelDeal_errors() public {
        vm.expectRevert(IDporMarket.UnknownDeal.selector);
        market.cancelDeal(99);
        uint256 id = _open(8, BETA, 1, 5);
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.NotDealOwner.selector);
        market.cancelDeal(id);
        vm.prank(provider);
        market.acceptDeal(id);
        vm.prank(owner);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.cancelDeal(id);
    }

    function test_acceptDeal_locksCollateral() public {
        uint256 id = _open(8, BETA, 1, 5);
        uint256 before = token.balanceOf(provider);
        vm.warp(T0 + 3 * EPOCH + 5);
        vm.prank(provider);
        market.acceptDeal(id);
        IDporMarket.Deal memory d = market.getDeal(id);
        vm.assertEq(uint256(d.state), uint256(IDporMarket.DealState.Active));
        vm.assertEq(d.acceptedAt, T0 + 3 * EPOCH + 5);
        vm.assertEq(d.startEpoch, 4); // the next global epoch
        (uint256 start, uint256 deadline) = market.epochWindow(id, 0);
        vm.assertEq(start, T0 + 4 * EPOCH);
        vm.assertEq(deadline, T0 + 5 * EPOCH);
        vm.assertEq(token.balanceOf(provider), before - 8 * COLLATERAL);
        IDporMarket.Provider memory p = market.getProvider(provider);
        vm.assertEq(p.usedBlocks, 8);
        vm.assertEq(p.activeDeals, 1);
    }

    function test_acceptDeal_errors() public {
        uint256 id = _open(8, BETA, 1, 5);
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.NotDealProvider.selector);
        market.acceptDeal(id);
        // capacity
        vm.prank(provider);
        market.updateProvider(hex"01", _addrs(), PRICE, COLLATERAL, 7);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.CapacityExceeded.selector);
        market.acceptDeal(id);
        vm.prank(provider);
        market.updateProvider(hex"01", _addrs(), PRICE, COLLATERAL, CAPACITY);
        // stake
        vm.prank(provider);
        market.withdrawStake(1);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.StakeTooLow.selector);
        market.acceptDeal(id);
        vm.prank(provider);
        market.addStake(1);
        vm.prank(provider);
        market.acceptDeal(id);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.acceptDeal(id);
    }

    function test_closeDeal_paysAndReleases() public {
        uint256 id = _openAccepted(4, BETA, 1, 2);
        Digest memory d = _postReal(id, 1, 0);
        _prove(id, 0, d);
        _prove(id, 1, d);
        (, uint256 deadline) = market.epochWindow(id, 1);
        vm.warp(deadline + GRACE - 1);
        vm.expectRevert(IDporMarket.DealNotOver.selector);
        market.closeDeal(id);
        vm.warp(deadline + GRACE);
        market.closeDeal(id);
        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(uint256(deal.state), uint256(IDporMarket.DealState.Completed));
        vm.assertEq(market.owed(provider), 8 * PRICE + 4 * COLLATERAL);
        vm.assertEq(market.owed(owner), 0);
        vm.assertEq(market.getProvider(provider).usedBlocks, 0);
        vm.assertEq(market.getProvider(provider).activeDeals, 0);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.closeDeal(id);
    }

    /// @dev Finding 5: closeDeal faults every unsettled epoch that had a digest in force.
    function test_closeDeal_faultsUnsettled() public {
        uint256 id = _openAccepted(4, BETA, 1, 3);
        Digest memory d = _postReal(id, 1, 0);
        _prove(id, 0, d);
        _pastGrace(id);
        market.closeDeal(id);
        uint256 slash = (4 * uint256(COLLATERAL) + MAX_FAILURES - 1) / MAX_FAILURES;
        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(deal.failures, 2);
        vm.assertEq(uint256(deal.state), uint256(IDporMarket.DealState.Completed));
        vm.assertEq(market.owed(owner), 8 * PRICE + 2 * slash);
        vm.assertEq(market.owed(provider), 4 * PRICE + 4 * COLLATERAL - 2 * slash);
    }

    function test_closeDeal_terminatesOnEnoughFaults() public {
        uint256 id = _openAccepted(4, BETA, 1, 4);
        _postReal(id, 1, 0);
        _pastGrace(id);
        uint128 slash = uint128((4 * uint256(COLLATERAL) + MAX_FAILURES - 1) / MAX_FAILURES);
        vm.expectEmit(true, true, true, true, address(market));
        emit IDporMarket.DealClosed(id, 4, 3 * slash, 0, 0); // 4 faults, capped by the collateral
        vm.expectEmit(true, true, true, true, address(market));
        emit IDporMarket.DealTerminated(id, 4, 16 * PRICE, 4 * COLLATERAL - 3 * slash);
        market.closeDeal(id);
        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(uint256(deal.state), uint256(IDporMarket.DealState.Terminated));
        vm.assertEq(market.owed(owner), 16 * PRICE + 4 * COLLATERAL);
        vm.assertEq(market.owed(provider), 0);
    }

    /// @dev Epochs that started before the first digest are never faults at close.
    function test_closeDeal_noFaultBeforeFirstDigest() public {
        uint256 id = _openAccepted(4, BETA, 1, 3);
        _enterEpoch(id, 1);
        vm.warp(block.timestamp + 10);
        Digest memory d = _postReal(id, 1, 0); // in force from epoch 2 on
        _prove(id, 2, d);
        _pastGrace(id);
        market.closeDeal(id);
        vm.assertEq(market.getDeal(id).failures, 0);
        vm.assertEq(market.owed(provider), 4 * PRICE + 4 * COLLATERAL);
        vm.assertEq(market.owed(owner), 8 * PRICE);
    }

    function test_requestExit_shortensTerm() public {
        uint256 id = _openAccepted(4, BETA, 1, 10);
        Digest memory d = _postReal(id, 1, 0);
        _prove(id, 0, d);
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.NotDealParty.selector);
        market.requestExit(id);
        vm.prank(owner);
        market.requestExit(id); // in epoch 0: term = 1 + NOTICE epochs
        vm.assertEq(market.getDeal(id).numEpochs, 1 + NOTICE);
        vm.prank(provider);
        market.requestExit(id); // never lengthens
        vm.assertEq(market.getDeal(id).numEpochs, 1 + NOTICE);
        _prove(id, 1, d);
        _prove(id, 2, d);
        vm.expectRevert(IDporMarket.EpochOutOfRange.selector);
        market.epochWindow(id, 3);
        _pastGrace(id);
        market.closeDeal(id);
        vm.assertEq(market.owed(provider), 12 * PRICE + 4 * COLLATERAL);
        vm.assertEq(market.owed(owner), 28 * PRICE); // the 7 dropped epochs
    }

    function test_requestExit_beforeStart() public {
        uint256 id = _openAccepted(4, BETA, 1, 10);
        vm.prank(provider);
        market.requestExit(id);
        vm.assertEq(market.getDeal(id).numEpochs, NOTICE);
    }

    function test_exitBeforeUpload() public {
        uint256 id = _openAccepted(4, BETA, 1, 10);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.UploadNotOver.selector);
        market.exitBeforeUpload(id);
        vm.warp(block.timestamp + UPLOAD);
        vm.prank(stranger);
        vm.expectRevert(IDporMarket.NotDealParty.selector);
        market.exitBeforeUpload(id);
        vm.prank(provider);
        market.exitBeforeUpload(id);
        vm.assertEq(uint256(market.getDeal(id).state), uint256(IDporMarket.DealState.Completed));
        // accepted in global epoch 0, exited in global epoch 1: two epochs of lock paid (F21)
        vm.assertEq(market.owed(owner), (10 - 2) * 4 * PRICE);
        vm.assertEq(market.owed(provider), 4 * COLLATERAL + 2 * 4 * PRICE);
        vm.assertEq(market.getProvider(provider).activeDeals, 0);
        uint256 id2 = _openAccepted(4, BETA, 1, 10);
        _postReal(id2, 1, 0);
        vm.warp(block.timestamp + UPLOAD);
        vm.prank(owner);
        vm.expectRevert(IDporMarket.DigestExists.selector);
        market.exitBeforeUpload(id2);
    }

    function test_withdraw() public {
        uint256 id = _openAccepted(4, BETA, 1, 2);
        Digest memory d = _postReal(id, 1, 0);
        _prove(id, 0, d);
        uint256 before = token.balanceOf(provider);
        vm.prank(provider);
        uint256 got = market.withdraw();
        vm.assertEq(got, 4 * PRICE);
        vm.assertEq(token.balanceOf(provider), before + 4 * PRICE);
        vm.assertEq(market.owed(provider), 0);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.NothingOwed.selector);
        market.withdraw();
    }

    // ------------------------------------------------------------ digests

    function test_postDigest_storesAndEmits() public {
        uint256 id = _openAccepted(4, BETA, 1, 5);
        Digest memory d = buildDigest(id, 1, 4, 3, 0, BETA);
        bytes32 h = market.digestHash(d);
        bytes memory so = _sig(OWNER_PK, h);
        bytes memory sp = _sig(PROVIDER_PK, h);
        vm.prank(stranger); // a relayer
        market.postDigest(d, so, sp);
        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(deal.digestVersion, 1);
        vm.assertEq(deal.digestHash, h);
        vm.assertEq(deal.writeCount, 3);
        vm.assertEq(deal.firstDigestAt, block.timestamp);
        DigestRecord memory r = market.getDigestRecord(id, 1);
        vm.assertEq(r.digestHash, h);
        vm.assertEq(r.postedAt, block.timestamp);
        vm.assertEq(r.writeCount, 3);
        vm.assertEq(r.nextVersion, 0);
        vm.assertEq(r.prevVersion, 0);
        vm.assertEq(r.numBlocks, 4); // the digest's own N (docs/CONTRACTS.md §4.1)
        vm.warp(block.timestamp + 7);
        Digest memory d5 = buildDigest(id, 5, 4, 1, 0, BETA);
        _post(d5);
        r = market.getDigestRecord(id, 1);
        vm.assertEq(r.nextVersion, 5);
        r = market.getDigestRecord(id, 5);
        vm.assertEq(r.prevVersion, 1);
        vm.assertEq(r.postedAt, block.timestamp);
        vm.assertEq(market.getDeal(id).firstDigestAt, block.timestamp - 7);
    }

    function test_postDigest_errors() public {
        uint256 id = _open(4, BETA, 1, 5);
        Digest memory d = buildDigest(id, 1, 4, 1, 0, BETA);
        bytes32 h = market.digestHash(d);
        bytes memory so = _sig(OWNER_PK, h);
        bytes memory sp = _sig(PROVIDER_PK, h);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.postDigest(d, so, sp);
        vm.prank(provider);
        market.acceptDeal(id);
        market.postDigest(d, so, sp);
        vm.expectRevert(IDporMarket.StaleVersion.selector);
        market.postDigest(d, so, sp);

        d.version = 2;
        d.numBlocks = 8;
        vm.expectRevert(IDporMarket.WrongNumBlocks.selector);
        market.postDigest(d, so, sp);
        d.numBlocks = 4;
        d.writeCount = 4;
        vm.expectRevert(IDporMarket.WriteCountTooLarge.selector);
        market.postDigest(d, so, sp);
        d.writeCount = 3; // popcount 2, one level root given
        vm.expectRevert(IDporMarket.LevelRootsMismatch.selector);
        market.postDigest(d, so, sp);
        d.writeCount = 1;
        // signatures over version 1 do not cover version 2
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.postDigest(d, so, sp);
        h = market.digestHash(d);
        so = _sig(OWNER_PK, h);
        vm.expectRevert(IDporMarket.BadProviderSignature.selector);
        market.postDigest(d, so, sp);
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.postDigest(d, hex"1234", sp);
        vm.expectRevert(IDporMarket.UnknownDeal.selector);
        d.dealId = 77;
        market.postDigest(d, so, sp);
    }

    // ------------------------------------------------------------ epochs

    function test_submitEpochProof_paysProvider() public {
        uint256 id = _openAccepted(4, BETA, 3, 5);
        Digest memory d = _postReal(id, 1, 3);
        _prove(id, 0, d);
        vm.assertEq(uint256(market.epochStatus(id, 0)), uint256(IDporMarket.EpochStatus.Proven));
        vm.assertEq(market.owed(provider), 4 * PRICE);
        vm.assertEq(market.getDeal(id).escrow, 16 * PRICE);
        vm.assertEq(market.getDeal(id).settledWithDigest, 1);
        vm.assertNotEq(market.globalSeeds(market.getDeal(id).startEpoch), bytes32(0));
        _prove(id, 1, d);
        vm.assertEq(market.owed(provider), 8 * PRICE);
    }

    function test_submitEpochProof_errors() public {
        uint256 id = _openAccepted(4, BETA, 2, 3);
        Digest memory d = buildDigest(id, 1, 4, 1, 0, BETA);
        BlockProof[] memory none = new BlockProof[](0);
        _enterEpoch(id, 0);
        vm.expectRevert(IDporMarket.DigestNotInForce.selector);
        market.submitEpochProof(id, 0, d, none);
        _post(d); // posted in epoch 0: in force from epoch 1
        vm.expectRevert(IDporMarket.DigestNotInForce.selector);
        market.submitEpochProof(id, 0, d, none);
        vm.expectRevert(IDporMarket.EpochOutOfRange.selector);
        market.submitEpochProof(id, 3, d, none);
        vm.expectRevert(IDporMarket.EpochNotStarted.selector);
        market.submitEpochProof(id, 1, d, none);
        _enterEpoch(id, 1);
        vm.expectRevert(IDporMarket.WrongSampleCount.selector);
        market.submitEpochProof(id, 1, d, none);
        BlockProof[] memory ps = _epochProofs(id, 1, d);
        Digest memory other = buildDigest(id, 1, 4, 1, 1, BETA);
        vm.expectRevert(IDporMarket.DigestMismatch.selector);
        market.submitEpochProof(id, 1, other, ps);
        other = buildDigest(id + 1, 1, 4, 1, 0, BETA);
        vm.expectRevert(IDporMarket.DigestMismatch.selector);
        market.submitEpochProof(id, 1, other, ps);
        // wrong sample: another position
        BlockProof[] memory bad = _epochProofs(id, 1, d);
        bad[0].position = uint64((bad[0].position + 1) % 2);
        vm.expectRevert(IDporMarket.WrongSample.selector);
        market.submitEpochProof(id, 1, d, bad);
        // invalid proof: one byte of the coded block changed (any byte, not just a sampled chunk)
        bad = _epochProofs(id, 1, d);
        bad[1].codedBlock[239] = bytes1(uint8(bad[1].codedBlock[239]) ^ 1);
        vm.expectRevert(IDporMarket.InvalidProof.selector);
        market.submitEpochProof(id, 1, d, bad);
        // a block one byte short
        bad = _epochProofs(id, 1, d);
        bytes memory shorter = new bytes(239);
        for (uint256 i; i < 239; ++i) shorter[i] = bad[0].codedBlock[i];
        bad[0].codedBlock = shorter;
        vm.expectRevert(IDporMarket.WrongBlockLength.selector);
        market.submitEpochProof(id, 1, d, bad);
        market.submitEpochProof(id, 1, d, ps);
        vm.expectRevert(IDporMarket.EpochSettled.selector);
        market.submitEpochProof(id, 1, d, ps);
        _pastEpoch(id, 2);
        vm.expectRevert(IDporMarket.EpochClosed.selector);
        market.submitEpochProof(id, 2, d, ps);
        uint256 fresh = _open(4, BETA, 1, 1);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.submitEpochProof(fresh, 0, d, ps);
    }

    function test_submitEpochProof_seedUnavailable() public {
        uint256 id = _openAccepted(4, BETA, 1, 3);
        Digest memory d = _postReal(id, 1, 0);
        (uint256 start,) = market.epochWindow(id, 0);
        uint64 round = beacon.roundAt(start);
        beacon.withhold(round, true);
        _enterEpoch(id, 0);
        vm.expectRevert(abi.encodeWithSelector(IDporMarket.SeedUnavailable.selector, round));
        market.peekSeed(id, 0);
        vm.expectRevert(abi.encodeWithSelector(IDporMarket.SeedUnavailable.selector, round));
        market.submitEpochProof(id, 0, d, new BlockProof[](1));
        beacon.withhold(round, false);
        _prove(id, 0, d);
    }

    function test_markMissed_refundsAndSlashes() public {
        uint256 id = _openAccepted(4, BETA, 1, 5);
        _postReal(id, 1, 0);
        (, uint256 deadline) = market.epochWindow(id, 0);
        vm.warp(deadline - 1);
        vm.expectRevert(IDporMarket.EpochNotOver.selector);
        market.markMissed(id, 0);
        vm.warp(deadline);
        vm.prank(stranger);
        market.markMissed(id, 0);
        uint256 slash = (4 * uint256(COLLATERAL) + MAX_FAILURES - 1) / MAX_FAILURES;
        vm.assertEq(market.owed(owner), 4 * PRICE + slash);
        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(deal.failures, 1);
        vm.assertEq(deal.collateral, 4 * COLLATERAL - slash);
        vm.assertEq(uint256(market.epochStatus(id, 0)), uint256(IDporMarket.EpochStatus.Missed));
        vm.expectRevert(IDporMarket.EpochSettled.selector);
        market.markMissed(id, 0);
    }

    function test_markMissed_noDigestNoSlash() public {
        uint256 id = _openAccepted(4, BETA, 1, 5);
        _pastEpoch(id, 0);
        market.markMissed(id, 0);
        vm.assertEq(market.owed(owner), 4 * PRICE);
        vm.assertEq(market.getDeal(id).failures, 0);
        vm.assertEq(market.getDeal(id).settledWithDigest, 0);
    }

    function test_repeatedMisses_terminate() public {
        uint256 id = _openAccepted(4, BETA, 1, 10);
        _postReal(id, 1, 0);
        _pastEpoch(id, 2);
        market.markMissed(id, 0);
        market.markMissed(id, 1);
        market.markMissed(id, 2);
        IDporMarket.Deal memory deal = market.getDeal(id);
        vm.assertEq(uint256(deal.state), uint256(IDporMarket.DealState.Terminated));
        vm.assertEq(deal.escrow, 0);
        vm.assertEq(deal.collateral, 0);
        // owner gets all escrow (nothing was proven) and all collateral
        vm.assertEq(market.owed(owner), 40 * PRICE + 4 * COLLATERAL);
        vm.assertEq(market.getProvider(provider).activeDeals, 0);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.markMissed(id, 3);
    }

    function test_seed_beaconFixedAndStored() public {
        uint256 id = _openAccepted(4, BETA, 1, 5);
        (uint256 start, uint256 deadline) = market.epochWindow(id, 1);
        vm.assertEq(deadline - start, EPOCH);
        uint64 g = market.getDeal(id).startEpoch + 1;
        vm.warp(start - 1);
        uint64 round = beacon.roundAt(start);
        vm.expectRevert(abi.encodeWithSelector(IDporMarket.SeedUnavailable.selector, round));
        market.peekSeed(id, 1);
        vm.warp(start + 100);
        bytes32 global = beacon.randomness(round);
        bytes32 expect = keccak256(abi.encode(global, id, uint256(1)));
        vm.assertEq(market.peekSeed(id, 1), expect);
        vm.assertEq(market.touchSeed(id, 1), expect);
        vm.assertEq(market.globalSeeds(g), global);
        beacon.setSalt(bytes32("other"));
        vm.assertEq(market.touchSeed(id, 1), expect); // stored, not recomputed
        vm.assertEq(market.recordSeed(g), global);
        uint256 fresh = _open(4, BETA, 1, 1);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.touchSeed(fresh, 0);
    }

    /// @dev Two deals in the same global epoch share the global seed, not the sample seed.
    function test_seed_sharedPerGlobalEpoch() public {
        uint256 a = _openAccepted(4, BETA, 1, 5);
        vm.warp(block.timestamp + 100);
        uint256 b = _openAccepted(4, BETA, 1, 5);
        _enterEpoch(a, 0);
        vm.assertEq(market.getDeal(a).startEpoch, market.getDeal(b).startEpoch);
        bytes32 sa = market.touchSeed(a, 0);
        bytes32 sb = market.touchSeed(b, 0);
        vm.assertNotEq(sa, sb);
        bytes32 g = market.globalSeeds(market.getDeal(a).startEpoch);
        vm.assertEq(sa, keccak256(abi.encode(g, a, uint256(0))));
        vm.assertEq(sb, keccak256(abi.encode(g, b, uint256(0))));
    }

    function test_seed_devMode() public {
        DporMarket m = new DporMarket(IERC20(address(token)), IRandomnessBeacon(address(0)), _params());
        vm.assertTrue(IDporMarketFull(address(m)).devSeeds());
        vm.expectRevert(IDporMarket.EpochNotStarted.selector);
        IDporMarketFull(address(m)).recordSeed(1);
        vm.warp(block.timestamp + EPOCH);
        vm.roll(block.number + 1);
        vm.setBlockhash(block.number - 1, bytes32(uint256(0xabc)));
        vm.expectEmit(true, true, true, true, address(m));
        emit IDporMarket.SeedRecorded(1, 0, bytes32(uint256(0xabc)), true);
        vm.assertEq(IDporMarketFull(address(m)).recordSeed(1), bytes32(uint256(0xabc)));
        vm.setBlockhash(block.number - 1, bytes32(uint256(0xdef)));
        vm.assertEq(IDporMarketFull(address(m)).recordSeed(1), bytes32(uint256(0xabc)));
    }

    function test_digestInForce_view() public {
        uint256 id = _openAccepted(8, 4096, 8, 5);
        (uint64 v,,) = market.digestInForce(id, 0);
        vm.assertEq(v, 0);
        Digest memory d1 = _postReal(id, 1, 0);
        _enterEpoch(id, 0);
        _postReal(id, 2, 1); // posted during epoch 0: in force from epoch 1
        (uint64 v0, bytes32 h0, uint64 t0) = market.digestInForce(id, 0);
        vm.assertEq(v0, 1);
        vm.assertEq(h0, market.digestHash(d1));
        vm.assertEq(t0, 0);
        (uint64 v1,, uint64 t1) = market.digestInForce(id, 1);
        vm.assertEq(v1, 2);
        vm.assertEq(t1, 1);
    }

    function test_epochSample_inRange() public {
        uint256 id = _openAccepted(8, 4096, 8, 5);
        _enterEpoch(id, 0);
        vm.expectRevert(IDporMarket.NoDigest.selector);
        market.epochSample(id, 0, 0);
        Digest memory d;
        d.dealId = id;
        d.version = 1;
        d.numBlocks = 8;
        d.writeCount = 5;
        d.levelRoots = new bytes32[](2);
        _post(d);
        _enterEpoch(id, 1);
        bool[4] memory seen;
        for (uint256 j; j < 8; ++j) {
            (uint8 tag, uint64 pos) = market.epochSample(id, 1, j);
            vm.assertTrue(tag == 0 || tag == 1 || tag == 3);
            vm.assertLt(pos, tag == 0 ? 16 : (uint256(1) << tag));
            seen[tag == 3 ? 2 : tag] = true;
        }
        // R = 3 runs, K = 8: every run is sampled
        vm.assertTrue(seen[0] && seen[1] && seen[2]);
    }

    // ------------------------------------------------------------ audits

    function test_recordAudit() public {
        uint256 id = _openAccepted(4, BETA, 1, 5);
        vm.expectRevert(IDporMarket.StaleVersion.selector);
        market.recordAudit(id, 0, 1, true, bytes32("t"));
        _postReal(id, 1, 0);
        vm.prank(stranger);
        uint256 a = market.recordAudit(id, 0, 1, true, bytes32("t"));
        IDporMarket.AuditRecord memory r = market.getAudit(a);
        vm.assertEq(r.dealId, id);
        vm.assertEq(r.auditor, stranger);
        vm.assertEq(r.version, 1);
        vm.assertTrue(r.passed);
        vm.assertEq(r.transcriptHash, bytes32("t"));
        vm.assertEq(market.auditCount(), 1);
        vm.expectRevert(IDporMarket.StaleVersion.selector);
        market.recordAudit(id, 0, 0, true, bytes32("t"));
        vm.expectRevert(IDporMarket.EpochOutOfRange.selector);
        market.recordAudit(id, 5, 1, true, bytes32("t"));
        uint256 fresh = _open(4, BETA, 1, 1);
        vm.expectRevert(IDporMarket.WrongDealState.selector);
        market.recordAudit(fresh, 0, 1, true, bytes32("t"));
        vm.expectRevert(IDporMarket.UnknownDeal.selector);
        market.recordAudit(99, 0, 1, true, bytes32("t"));
    }

    // ------------------------------------------------------------ disputes

    function _disputed() internal returns (uint256 id, Digest memory d, uint256 q) {
        id = _openAccepted(4, BETA, 1, 10);
        d = _postReal(id, 1, 3);
        vm.prank(challenger);
        q = market.openDispute(id, 0, 1, bytes32("tx"), 2, 3, 1);
    }

    function test_openDispute_storesAndBonds() public {
        uint256 before = token.balanceOf(challenger);
        (uint256 id,, uint256 q) = _disputed();
        IDporMarket.Dispute memory x = market.getDispute(q);
        vm.assertEq(x.dealId, id);
        vm.assertEq(x.challenger, challenger);
        vm.assertEq(x.runTag, 2);
        vm.assertEq(x.position, 3);
        vm.assertEq(x.chunkIndex, 1);
        vm.assertEq(x.version, 1);
        vm.assertEq(x.bond, BOND);
        vm.assertEq(x.digestHash, market.getDeal(id).digestHash);
        vm.assertEq(x.deadline, block.timestamp + ANSWER);
        vm.assertEq(uint256(x.state), uint256(IDporMarket.DisputeState.Open));
        vm.assertEq(token.balanceOf(challenger), before - BOND);
        vm.assertEq(market.getDeal(id).openDisputes, 1);
        vm.assertFalse(market.getAudit(market.auditCount()).passed);
    }

    function test_openDispute_errors() public {
        uint256 id = _openAccepted(4, BETA, 1, 10);
        vm.startPrank(challenger);
        vm.expectRevert(IDporMarket.NoDigest.selector);
        market.openDispute(id, 0, 1, 0, 0, 0, 0);
        vm.stopPrank();
        _postReal(id, 1, 1);
        _postReal(id, 2, 1);
        vm.startPrank(challenger);
        vm.expectRevert(IDporMarket.StaleVersion.selector);
        market.openDispute(id, 0, 1, 0, 0, 0, 0);
        vm.expectRevert(IDporMarket.EpochOutOfRange.selector);
        market.openDispute(id, 10, 2, 0, 0, 0, 0);
        vm.expectRevert(IDporMarket.WrongSample.selector);
        market.openDispute(id, 0, 2, 0, 2, 0, 0); // level 1 not filled (t = 1)
        vm.expectRevert(IDporMarket.WrongSample.selector);
        market.openDispute(id, 0, 2, 0, 0, 8, 0); // C has 8 positions
        vm.expectRevert(IDporMarket.WrongSample.selector);
        market.openDispute(id, 0, 2, 0, 1, 0, 2); // 2 chunks per coded block
        vm.stopPrank();
        // finding 6: no dispute after the last deadline + grace
        _pastGrace(id);
        vm.warp(block.timestamp - 1);
        vm.prank(challenger);
        market.openDispute(id, 0, 2, 0, 1, 0, 0);
        vm.warp(block.timestamp + 1);
        vm.prank(challenger);
        vm.expectRevert(IDporMarket.DisputePeriodOver.selector);
        market.openDispute(id, 0, 2, 0, 1, 0, 0);
    }

    function test_answerDispute_bondToProvider() public {
        (uint256 id, Digest memory d, uint256 q) = _disputed();
        Digest memory d2 = _postReal(id, 2, 0); // a newer digest does not change the dispute
        d2;
        SampleProof memory p = buildProof(2, 3, 1, 4, BETA);
        market.answerDispute(q, d, p);
        vm.assertEq(uint256(market.getDispute(q).state), uint256(IDporMarket.DisputeState.Answered));
        vm.assertEq(market.owed(provider), BOND);
        vm.assertEq(market.getDeal(id).openDisputes, 0);
        vm.expectRevert(IDporMarket.DisputeNotOpen.selector);
        market.answerDispute(q, d, p);
    }

    function test_answerDispute_errors() public {
        (uint256 id, Digest memory d, uint256 q) = _disputed();
        SampleProof memory p = buildProof(2, 3, 1, 4, BETA);
        vm.expectRevert(IDporMarket.UnknownDispute.selector);
        market.answerDispute(99, d, p);
        Digest memory other = buildDigest(id, 2, 4, 3, 0, BETA);
        vm.expectRevert(IDporMarket.DigestMismatch.selector);
        market.answerDispute(q, other, p);
        SampleProof memory wrong = buildProof(2, 2, 1, 4, BETA);
        vm.expectRevert(IDporMarket.WrongSample.selector);
        market.answerDispute(q, d, wrong);
        p.runPath[0] = bytes32(uint256(p.runPath[0]) ^ 1);
        vm.expectRevert(IDporMarket.InvalidProof.selector);
        market.answerDispute(q, d, p);
        p = buildProof(2, 3, 1, 4, BETA);
        vm.warp(block.timestamp + ANSWER + 1);
        vm.expectRevert(IDporMarket.DeadlinePassed.selector);
        market.answerDispute(q, d, p);
    }

    function test_slash_paysChallengerAndOwner() public {
        (uint256 id,, uint256 q) = _disputed();
        vm.expectRevert(IDporMarket.DeadlineNotPassed.selector);
        market.slash(q);
        _pastGrace(id);
        vm.expectRevert(IDporMarket.DisputesOpen.selector);
        market.closeDeal(id);
        vm.prank(stranger);
        market.slash(q);
        uint256 amount = (4 * uint256(COLLATERAL) + MAX_FAILURES - 1) / MAX_FAILURES;
        uint256 share = amount * SHARE_BPS / 10_000;
        vm.assertEq(market.owed(challenger), share + BOND);
        vm.assertEq(market.owed(owner), amount - share);
        vm.assertEq(market.getDeal(id).failures, 1);
        vm.assertEq(uint256(market.getDispute(q).state), uint256(IDporMarket.DisputeState.Slashed));
        vm.expectRevert(IDporMarket.DisputeNotOpen.selector);
        market.slash(q);
        vm.expectRevert(IDporMarket.UnknownDispute.selector);
        market.slash(99);
        market.closeDeal(id);
    }
}
