// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket, IDporMarketFull} from "../../src/market/IDporMarket.sol";
import {DrandBeacon} from "../../src/beacon/DrandBeacon.sol";
import {IRandomnessBeacon} from "../../src/market/IRandomnessBeacon.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Digest, BlockProof} from "../../src/lib/DporTypes.sol";
import {Vm} from "../utils/Vm.sol";

/// @notice Second review (medium): a beacon outage longer than one proof window faulted
///         every honest provider, although the market could tell that no seed existed.
///         Now the beacon records when each round was first relayed (`recordedAt`), and
///         `markMissed` excuses (settles Missed, escrow back to the owner, no slash, no
///         fault at close) an epoch whose round was not recorded before the middle of its
///         window. First relay wins: a late relay cannot move an on-time one.
///         Runs on the real `DrandBeacon` with real drand evmnet rounds
///         (contracts/test/fixtures/beacon_evmnet.json): the market is deployed one epoch
///         before the emission of round 10 000 000, so deal epoch 0 of a deal accepted at
///         once starts exactly when that round is emitted and is seeded by it.
contract F25_BeaconOutage is MarketFixture {
    DrandBeacon internal drand;
    uint64 internal constant ROUND = 10_000_000;
    bytes internal sig;
    uint128 internal constant SLASH = (4 * COLLATERAL + MAX_FAILURES - 1) / MAX_FAILURES;

    function setUp() public override {
        super.setUp();
        string memory json = vm.readFile("contracts/test/fixtures/beacon_evmnet.json");
        uint256[] memory pk = vm.parseJsonUintArray(json, ".publicKey");
        drand = new DrandBeacon(
            [pk[0], pk[1], pk[2], pk[3]],
            uint64(vm.parseJsonUint(json, ".genesisTime")),
            uint64(vm.parseJsonUint(json, ".period"))
        );
        uint256[] memory rounds = vm.parseJsonUintArray(json, ".rounds");
        for (uint256 i; i < rounds.length; ++i) {
            if (rounds[i] == ROUND) sig = vm.parseJsonBytes(json, string.concat(".signatures[", vm.toString(i), "]"));
        }
        vm.assertEq(sig.length, 64);
        vm.warp(drand.roundTime(ROUND) - EPOCH);
        market = _deployMarket(IERC20(address(token)), IRandomnessBeacon(address(drand)), _params());
        address[4] memory who = [owner, provider, stranger, challenger];
        for (uint256 i; i < who.length; ++i) {
            vm.prank(who[i]);
            token.approve(address(market), type(uint256).max);
        }
        vm.prank(provider);
        market.register(hex"0024080112", _addrs(), PRICE, COLLATERAL, CAPACITY, MIN_STAKE);
    }

    /// @dev A 3-epoch deal with a digest in force from epoch 0, whose start is ROUND's emission.
    function _dealWithDigest() internal returns (uint256 id, Digest memory d, uint256 start) {
        id = _openAccepted(4, BETA, 1, 3);
        d = _postReal(id, 1, 0);
        (start,) = market.epochWindow(id, 0);
        vm.assertEq(start, drand.roundTime(ROUND));
        vm.assertEq(drand.roundAt(start), ROUND);
    }

    function _expectExcused(uint256 id) internal {
        vm.expectEmit(true, true, true, true, address(market));
        emit IDporMarket.EpochMissed(id, 0, 4 * PRICE, 0);
        vm.expectEmit(true, true, true, true, address(market));
        emit IDporMarket.EpochExcused(id, 0, ROUND);
        market.markMissed(id, 0);
        vm.assertEq(market.getDeal(id).failures, 0);
        vm.assertEq(market.getDeal(id).collateral, 4 * COLLATERAL);
        vm.assertEq(market.owed(owner), 4 * PRICE); // the epoch's escrow; no slash
        vm.assertEq(market.owed(provider), 0); // an excused epoch pays the provider nothing
    }

    /// The round is never relayed: no proof is possible; marking the epoch excuses it,
    /// and closeDeal does not fault it later (it is settled).
    function test_attack_roundNeverRelayedIsExcused() public {
        (uint256 id, Digest memory d,) = _dealWithDigest();
        _enterEpoch(id, 0);
        vm.expectRevert(abi.encodeWithSelector(IDporMarket.SeedUnavailable.selector, ROUND));
        market.submitEpochProof(id, 0, d, new BlockProof[](1));
        _pastEpoch(id, 0);
        _expectExcused(id);
        _pastGrace(id);
        market.markMissed(id, 1); // the outage lasts: epochs 1 and 2 are excused as well
        market.markMissed(id, 2);
        market.closeDeal(id);
        vm.assertEq(market.getDeal(id).failures, 0);
        vm.assertEq(market.owed(provider), 4 * COLLATERAL); // all its collateral back, no payment
        vm.assertEq(market.owed(owner), 3 * 4 * PRICE); // the whole escrow back, no slash
    }

    /// The round is relayed exactly at the middle of the window: too late, excused.
    function test_attack_roundRelayedLateIsExcused() public {
        (uint256 id,, uint256 start) = _dealWithDigest();
        vm.warp(start + EPOCH / 2);
        drand.record(ROUND, sig);
        vm.assertEq(drand.recordedAt(ROUND), start + EPOCH / 2);
        _pastEpoch(id, 0);
        _expectExcused(id);
    }

    /// A late relay still lets the provider prove in what is left of the window: a proven
    /// epoch is paid as usual (the excuse only applies to a missed one).
    function test_lateRoundStillProvable() public {
        (uint256 id, Digest memory d, uint256 start) = _dealWithDigest();
        vm.warp(start + EPOCH / 2 + 1 hours);
        drand.record(ROUND, sig);
        market.submitEpochProof(id, 0, d, _epochProofs(id, 0, d));
        vm.assertEq(market.owed(provider), 4 * PRICE);
        _pastEpoch(id, 0);
        vm.expectRevert(IDporMarket.EpochSettled.selector);
        market.markMissed(id, 0);
    }

    /// Relayed one second before the middle of the window: the provider had half a
    /// window to prove; the fault stands.
    function test_attack_roundRelayedInTimeFaultStands() public {
        (uint256 id,, uint256 start) = _dealWithDigest();
        vm.warp(start + EPOCH / 2 - 1);
        drand.record(ROUND, sig);
        _pastEpoch(id, 0);
        vm.recordLogs();
        market.markMissed(id, 0);
        _assertNoExcuse();
        vm.assertEq(market.getDeal(id).failures, 1);
        vm.assertEq(market.owed(owner), 4 * PRICE + SLASH);
    }

    /// The owner's watcher relays the round on time; the provider (or anyone) relaying
    /// it again late cannot make it look late: the beacon refuses a second record and
    /// `recordedAt` keeps the first relay's time. The fault stands.
    function test_attack_lateRelayCannotOverrideOnTimeRelay() public {
        (uint256 id,, uint256 start) = _dealWithDigest();
        vm.warp(start + 10);
        vm.prank(owner);
        drand.record(ROUND, sig);
        vm.warp(start + EPOCH / 2 + 1);
        vm.prank(provider);
        vm.expectRevert(abi.encodeWithSelector(DrandBeacon.AlreadyRecorded.selector, ROUND));
        drand.record(ROUND, sig);
        vm.assertEq(drand.recordedAt(ROUND), start + 10);
        _pastEpoch(id, 0);
        vm.recordLogs();
        market.markMissed(id, 0);
        _assertNoExcuse();
        vm.assertEq(market.getDeal(id).failures, 1);
    }

    /// Nobody marks the excusable epoch: closeDeal cannot see why it was not proven and
    /// counts it as a fault (O(1) close). So the provider's node marks its seedless
    /// epochs itself after their deadline (node/src/chain_tasks/epochs.rs).
    function test_unmarkedOutageEpochIsFaultedAtClose() public {
        (uint256 id,,) = _dealWithDigest();
        _pastGrace(id);
        market.markMissed(id, 1); // epochs 1 and 2: their rounds are not relayed either
        market.markMissed(id, 2);
        market.closeDeal(id);
        vm.assertEq(market.getDeal(id).failures, 1); // epoch 0, never marked
    }

    /// The excuse needs a digest in force: an epoch without one was never a fault and
    /// emits no EpochExcused.
    function test_noDigestNoExcuseEvent() public {
        uint256 id = _openAccepted(4, BETA, 1, 3);
        _pastEpoch(id, 0);
        vm.recordLogs();
        market.markMissed(id, 0);
        _assertNoExcuse();
        vm.assertEq(market.getDeal(id).failures, 0);
    }

    /// Dev mode (no beacon) is unchanged: a missed epoch with a digest in force is a fault.
    function test_devModeUnchanged() public {
        market = _deployMarket(IERC20(address(token)), IRandomnessBeacon(address(0)), _params());
        vm.prank(owner);
        token.approve(address(market), type(uint256).max);
        vm.startPrank(provider);
        token.approve(address(market), type(uint256).max);
        market.register(hex"0024080112", _addrs(), PRICE, COLLATERAL, CAPACITY, MIN_STAKE);
        vm.stopPrank();
        uint256 id = _openAccepted(4, BETA, 1, 3);
        _postReal(id, 1, 0);
        _pastEpoch(id, 0);
        vm.recordLogs();
        market.markMissed(id, 0);
        _assertNoExcuse();
        vm.assertEq(market.getDeal(id).failures, 1);
    }

    // ------------------------------------------------------------ helpers

    function _assertNoExcuse() internal {
        Vm.Log[] memory logs = vm.getRecordedLogs();
        bytes32 excused = keccak256("EpochExcused(uint256,uint64,uint64)");
        for (uint256 i; i < logs.length; ++i) {
            vm.assertTrue(logs[i].topics.length == 0 || logs[i].topics[0] != excused, "unexpected EpochExcused");
        }
    }
}
