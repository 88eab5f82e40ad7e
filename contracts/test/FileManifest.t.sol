// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "./utils/MarketFixture.sol";
import {IDporMarket} from "../src/market/IDporMarket.sol";
import {FileManifest} from "../src/manifest/FileManifest.sol";
import {Vm} from "./utils/Vm.sol";

/// @notice FileManifest against the real market: who may record and repair, what deals
///         qualify, the events a fresh machine rebuilds from, and gas for 4-of-6
///         (`npx forge test --match-path 'contracts/test/FileManifest*' --gas-report`).
contract FileManifestTest is MarketFixture {
    FileManifest internal fm;
    /// @dev Providers 0..7 (provider 0 is the fixture's).
    address[] internal providers;

    uint64 internal constant N = 16; // blocks per shard deal
    uint64 internal constant L = 4 * 16 * BETA; // fills 4 data shards of 16 blocks

    event FileRecorded(
        uint256 indexed fileId,
        address indexed owner,
        uint16 k,
        uint16 n,
        uint32 blockBytes,
        uint64 fileBytes,
        uint64[] dealIds
    );
    event ShardReplaced(
        uint256 indexed fileId, address indexed owner, uint16 indexed shard, uint64 oldDealId, uint64 newDealId
    );
    event FileDeleted(uint256 indexed fileId, address indexed owner);

    function setUp() public override {
        super.setUp();
        fm = new FileManifest(market);
        providers.push(provider);
        for (uint256 i = 1; i < 8; ++i) {
            address p = vm.addr(0xF00 + i);
            token.mint(p, 1e30);
            vm.startPrank(p);
            token.approve(address(market), type(uint256).max);
            market.register(abi.encodePacked(hex"0024080112", bytes32(i)), _addrs(), PRICE, COLLATERAL, CAPACITY, MIN_STAKE);
            vm.stopPrank();
            providers.push(p);
        }
    }

    function _deal(address who, uint256 p, uint64 n, uint32 beta) internal returns (uint64) {
        vm.prank(who);
        return uint64(market.openDeal(providers[p], n, beta, 16, 1, 10, PRICE, COLLATERAL));
    }

    /// @dev Six deals of `owner`, with providers 0..5.
    function _six() internal returns (uint64[] memory ids) {
        ids = new uint64[](6);
        for (uint256 i; i < 6; ++i) {
            ids[i] = _deal(owner, i, N, BETA);
        }
    }

    function test_RecordAndRead() public {
        uint64[] memory ids = _six();
        vm.prank(providers[2]);
        market.acceptDeal(ids[2]); // Open and Active deals both qualify
        vm.expectEmit(true, true, true, true, address(fm));
        emit FileRecorded(1, owner, 4, 6, BETA, L, ids);
        vm.prank(owner);
        uint256 id = fm.recordFile(4, 6, BETA, L, ids);
        vm.assertEq(id, 1);
        vm.assertEq(fm.fileCount(), 1);
        FileManifest.FileInfo memory f = fm.getFile(id);
        vm.assertEq(f.owner, owner);
        vm.assertEq(f.k, 4);
        vm.assertEq(f.n, 6);
        vm.assertEq(f.blockBytes, BETA);
        vm.assertEq(f.fileBytes, L);
        vm.assertEq(f.shards.length, 6);
        for (uint256 i; i < 6; ++i) {
            vm.assertEq(f.shards[i].dealId, ids[i]);
            vm.assertEq(f.shards[i].provider, providers[i]);
        }
    }

    function test_OnlyTheOwnerOfEveryDeal() public {
        uint64[] memory ids = _six();
        ids[3] = _deal(stranger, 6, N, BETA); // one deal of someone else
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.NotOwner.selector, ids[3]));
        fm.recordFile(4, 6, BETA, L, ids);
        // The stranger cannot list the owner's deals either.
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.NotOwner.selector, ids[0]));
        fm.recordFile(4, 6, BETA, L, ids);
        // A deal that does not exist has no owner.
        ids[3] = 999;
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.NotOwner.selector, uint256(999)));
        fm.recordFile(4, 6, BETA, L, ids);
    }

    function test_DistinctProviders() public {
        uint64[] memory ids = _six();
        ids[5] = _deal(owner, 1, N, BETA); // second deal with provider 1
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.SameProvider.selector, providers[1], ids[1], ids[5]));
        fm.recordFile(4, 6, BETA, L, ids);
        ids[5] = ids[1]; // the same deal twice
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.SameProvider.selector, providers[1], ids[1], ids[1]));
        fm.recordFile(4, 6, BETA, L, ids);
    }

    function test_ShapeAndDealFit() public {
        uint64[] memory ids = _six();
        vm.startPrank(owner);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.BadShape.selector, 6, 6, 6));
        fm.recordFile(6, 6, BETA, L, ids);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.BadShape.selector, 0, 6, 6));
        fm.recordFile(0, 6, BETA, L, ids);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.BadShape.selector, 4, 5, 6));
        fm.recordFile(4, 5, BETA, L, ids);
        vm.expectRevert(FileManifest.EmptyFile.selector);
        fm.recordFile(4, 6, BETA, 0, ids);
        // One byte more than 4 shards of N blocks hold: each shard needs N + 1 blocks.
        vm.expectRevert(abi.encodeWithSelector(FileManifest.DealTooSmall.selector, ids[0], BETA, N, N + 1));
        fm.recordFile(4, 6, BETA, L + 1, ids);
        // Block size must match the deals'.
        vm.expectRevert(abi.encodeWithSelector(FileManifest.DealTooSmall.selector, ids[0], BETA, N, uint64(8)));
        fm.recordFile(4, 6, BETA * 2, L, ids);
        // A cancelled deal is not live.
        market.cancelDeal(ids[4]);
        vm.expectRevert(
            abi.encodeWithSelector(FileManifest.DealNotLive.selector, ids[4], IDporMarket.DealState.Cancelled)
        );
        fm.recordFile(4, 6, BETA, L, ids);
        vm.stopPrank();
    }

    function test_ReplaceShard() public {
        uint64[] memory ids = _six();
        vm.prank(owner);
        uint256 id = fm.recordFile(4, 6, BETA, L, ids);
        uint64 fresh = _deal(owner, 6, N, BETA);
        vm.expectEmit(true, true, true, true, address(fm));
        emit ShardReplaced(id, owner, 2, ids[2], fresh);
        vm.prank(owner);
        fm.replaceShard(id, 2, fresh);
        FileManifest.FileInfo memory f = fm.getFile(id);
        vm.assertEq(f.shards[2].dealId, fresh);
        vm.assertEq(f.shards[2].provider, providers[6]);
        // The replaced shard's own provider may take it again (a new deal), others not.
        uint64 again = _deal(owner, 2, N, BETA);
        vm.prank(owner);
        fm.replaceShard(id, 2, again);
        uint64 dup = _deal(owner, 3, N, BETA);
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.SameProvider.selector, providers[3], ids[3], dup));
        fm.replaceShard(id, 2, dup);
    }

    function test_ReplaceShardRefusals() public {
        uint64[] memory ids = _six();
        vm.prank(owner);
        uint256 id = fm.recordFile(4, 6, BETA, L, ids);
        // A stranger cannot move the owner's shard to a deal of its own.
        uint64 theirs = _deal(stranger, 7, N, BETA);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.NotOwner.selector, theirs));
        fm.replaceShard(id, 0, theirs);
        // The owner cannot list a stranger's deal.
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.NotOwner.selector, theirs));
        fm.replaceShard(id, 0, theirs);
        uint64 small = _deal(owner, 7, N / 2, BETA);
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.DealTooSmall.selector, small, BETA, N / 2, N));
        fm.replaceShard(id, 0, small);
        uint64 fresh = _deal(owner, 7, N, BETA);
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.NoSuchShard.selector, id, uint16(6)));
        fm.replaceShard(id, 6, fresh);
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.NoSuchFile.selector, uint256(7)));
        fm.replaceShard(7, 0, fresh);
    }

    function test_Delete() public {
        uint64[] memory ids = _six();
        vm.prank(owner);
        uint256 id = fm.recordFile(4, 6, BETA, L, ids);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.NotOwner.selector, 0));
        fm.deleteFile(id);
        vm.expectEmit(true, true, true, true, address(fm));
        emit FileDeleted(id, owner);
        vm.prank(owner);
        fm.deleteFile(id);
        vm.expectRevert(abi.encodeWithSelector(FileManifest.NoSuchFile.selector, id));
        fm.getFile(id);
        // Ids are never reused.
        vm.prank(owner);
        vm.assertEq(fm.recordFile(4, 6, BETA, L, ids), 2);
    }

    /// @notice A fresh machine rebuilds the file list from the logs alone: replaying
    ///         FileRecorded and ShardReplaced gives the stored record.
    function test_EventsRebuildTheRecord() public {
        uint64[] memory ids = _six();
        vm.recordLogs();
        vm.prank(owner);
        uint256 id = fm.recordFile(4, 6, BETA, L, ids);
        uint64 fresh = _deal(owner, 6, N, BETA);
        vm.prank(owner);
        fm.replaceShard(id, 5, fresh);
        uint64 fresh2 = _deal(owner, 7, N, BETA);
        vm.prank(owner);
        fm.replaceShard(id, 0, fresh2);
        Vm.Log[] memory logs = vm.getRecordedLogs();
        uint64[] memory rebuilt;
        for (uint256 i; i < logs.length; ++i) {
            if (logs[i].emitter != address(fm)) continue;
            if (logs[i].topics[0] == FileRecorded.selector) {
                vm.assertEq(uint256(logs[i].topics[1]), id);
                vm.assertEq(address(uint160(uint256(logs[i].topics[2]))), owner);
                (,,,, rebuilt) = abi.decode(logs[i].data, (uint16, uint16, uint32, uint64, uint64[]));
            } else if (logs[i].topics[0] == ShardReplaced.selector) {
                uint16 shard = uint16(uint256(logs[i].topics[3]));
                (uint64 oldDeal, uint64 newDeal) = abi.decode(logs[i].data, (uint64, uint64));
                vm.assertEq(rebuilt[shard], oldDeal);
                rebuilt[shard] = newDeal;
            }
        }
        FileManifest.FileInfo memory f = fm.getFile(id);
        for (uint256 i; i < 6; ++i) {
            vm.assertEq(rebuilt[i], f.shards[i].dealId);
        }
        vm.assertEq(rebuilt[5], fresh);
        vm.assertEq(rebuilt[0], fresh2);
    }

    /// @notice Gas of recording a 4-of-6 file and of one repair, with the market's and
    ///         the manifest's storage cold (vm.cool) as in a lone transaction; execution
    ///         gas of the call, without the 21000 base and calldata (docs/PERFORMANCE.md).
    function test_Gas_4of6() public {
        uint64[] memory ids = _six();
        uint64 fresh = _deal(owner, 6, N, BETA);
        vm.cool(address(market));
        vm.cool(address(fm));
        vm.prank(owner);
        uint256 g = gasleft();
        uint256 id = fm.recordFile(4, 6, BETA, L, ids);
        uint256 recordGas = g - gasleft();
        emit log_named_uint("recordFile 4-of-6 (cold)", recordGas);
        vm.cool(address(market));
        vm.cool(address(fm));
        vm.prank(owner);
        g = gasleft();
        fm.replaceShard(id, 3, fresh);
        uint256 replaceGas = g - gasleft();
        emit log_named_uint("replaceShard of 6 (cold)", replaceGas);
        // Guards against an accidental quadratic blow-up or extra storage.
        vm.assertLt(recordGas, 400_000);
        vm.assertLt(replaceGas, 80_000);
    }
}
