// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "./utils/CommitFixture.sol";
import {IDporMarket} from "../src/market/IDporMarket.sol";
import {Digest} from "../src/lib/DporTypes.sol";

/// @notice Unit tests of the safety draw weighted by size (docs/COMMITMENTS.md §5): the
///         per-provider Fenwick tree over the deal list kept by acceptDeal, the
///         swap-and-pop of a release and resizeDeal, checked through the public API
///         ({safetyDrawTarget}, {safetyDrawWeight}) against a linear scan of the prefix
///         sums of {providerDeals}' numBlocks; W at the epoch's start; the draw's escape
///         past the current total. Attacks: attacks/F22, attacks/F27.
contract WeightedDrawTest is CommitFixture {
    uint32 internal constant LONG = 1000;

    /// @dev The deal at weight offset x by a linear scan of the list (0 past the total).
    function _scan(uint256 x) internal view returns (uint256) {
        uint256[] memory list = market.providerDeals(provider);
        uint256 acc;
        for (uint256 i; i < list.length; ++i) {
            acc += market.getDeal(list[i]).numBlocks;
            if (x < acc) return list[i];
        }
        return 0;
    }

    /// @dev Checks the tree against the linear scan at both ends of every deal's interval
    ///      (the descent is monotone in x, so that covers every x), just past the total,
    ///      and the total against usedBlocks.
    function _checkTree() internal view {
        uint256[] memory list = market.providerDeals(provider);
        uint256 acc;
        for (uint256 i; i < list.length; ++i) {
            IDporMarket.Deal memory d = market.getDeal(list[i]);
            vm.assertEq(d.listIndex, i, "listIndex");
            vm.assertEq(market.safetyDrawTarget(provider, acc), list[i], "interval start");
            acc += d.numBlocks;
            vm.assertEq(market.safetyDrawTarget(provider, acc - 1), list[i], "interval end");
        }
        vm.assertEq(market.getProvider(provider).usedBlocks, acc, "total = usedBlocks");
        vm.assertEq(market.safetyDrawTarget(provider, acc), 0, "past the total");
        vm.assertEq(market.safetyDrawTarget(provider, type(uint256).max), 0);
    }

    function _now() internal view returns (uint64) {
        return uint64((block.timestamp - market.genesis()) / EPOCH);
    }

    function _release(uint256 id) internal {
        IDporMarket.Deal memory d = market.getDeal(id);
        if (block.timestamp < uint256(d.acceptedAt) + UPLOAD) vm.warp(uint256(d.acceptedAt) + UPLOAD);
        vm.prank(owner);
        market.exitBeforeUpload(id);
    }

    function _resizeTo(uint256 id, uint64 n) internal {
        _resize(_resizeDigest(id, market.getDeal(id).digestVersion + 1, n), uint128(PRICE) * n, uint128(COLLATERAL) * n);
    }

    function test_noDeals() public view {
        vm.assertEq(market.safetyDrawTarget(provider, 0), 0);
        vm.assertEq(market.safetyDrawWeight(provider, _now()), 0);
        vm.assertEq(market.safetyDrawTarget(stranger, 0), 0);
    }

    /// Five deals of 4, 1, 16, 2, 8 blocks: each x in [0, 31) names the deal whose
    /// interval of the cumulative sums holds it.
    function test_accept_intervals() public {
        uint64[5] memory sizes = [uint64(4), 1, 16, 2, 8];
        uint256[5] memory ids;
        for (uint256 i; i < 5; ++i) ids[i] = _openAccepted(sizes[i], BETA, 1, LONG);
        uint256 x;
        for (uint256 i; i < 5; ++i) {
            for (uint256 j; j < sizes[i]; ++j) vm.assertEq(market.safetyDrawTarget(provider, x++), ids[i]);
        }
        vm.assertEq(x, 31);
        vm.assertEq(market.safetyDrawTarget(provider, 31), 0);
        _checkTree();
        // all accepted in the deployment epoch: W at its start was 0; the next epoch's is 31
        vm.assertEq(market.safetyDrawWeight(provider, _now()), 0);
        vm.assertEq(market.safetyDrawWeight(provider, _now() + 1), 31);
    }

    /// Releasing from the middle: the last deal takes the released one's position, in the
    /// list and in the tree; releasing the last, the first, then all.
    function test_release_middleFirstLastAll() public {
        uint64[6] memory sizes = [uint64(4), 1, 16, 2, 8, 32];
        uint256[6] memory ids;
        for (uint256 i; i < 6; ++i) ids[i] = _openAccepted(sizes[i], BETA, 1, LONG);
        _release(ids[2]); // 16 out: [4, 1, 32, 2, 8]
        uint256[] memory list = market.providerDeals(provider);
        vm.assertEq(list[2], ids[5]);
        vm.assertEq(market.safetyDrawTarget(provider, 5), ids[5]);
        vm.assertEq(market.safetyDrawTarget(provider, 36), ids[5]);
        vm.assertEq(market.safetyDrawTarget(provider, 37), ids[3]);
        _checkTree();
        _release(ids[4]); // the last: [4, 1, 32, 2]
        _checkTree();
        _release(ids[0]); // the first: [2, 1, 32]
        vm.assertEq(market.safetyDrawTarget(provider, 0), ids[3]);
        _checkTree();
        _release(ids[1]);
        _release(ids[3]);
        _release(ids[5]);
        _checkTree();
        vm.assertEq(market.providerDeals(provider).length, 0);
        // the tree is empty again: new deals start from clean nodes
        uint256 a = _openAccepted(8, BETA, 1, LONG);
        uint256 b = _openAccepted(2, BETA, 1, LONG);
        vm.assertEq(market.safetyDrawTarget(provider, 7), a);
        vm.assertEq(market.safetyDrawTarget(provider, 8), b);
        _checkTree();
    }

    /// A resize moves the deal's weight; during g the draw keeps W = the total at g's start.
    function test_resize_movesWeight_snapshotKept() public {
        uint256 a = _openAccepted(4, BETA, 1, LONG);
        uint256 b = _openAccepted(8, BETA, 1, LONG);
        uint256 c = _openAccepted(2, BETA, 1, LONG);
        vm.warp(block.timestamp + EPOCH); // a later epoch with no change yet
        uint64 g = _now();
        vm.assertEq(market.safetyDrawWeight(provider, g), 14);
        _resizeTo(b, 32); // [4, 32, 2]
        vm.assertEq(market.safetyDrawWeight(provider, g), 14, "W of g: its start");
        vm.assertEq(market.getProvider(provider).usedBlocks, 38);
        vm.assertEq(market.safetyDrawTarget(provider, 35), b);
        vm.assertEq(market.safetyDrawTarget(provider, 36), c);
        _checkTree();
        _resizeTo(a, 1); // [1, 32, 2], same epoch: W unchanged
        vm.assertEq(market.safetyDrawWeight(provider, g), 14);
        vm.assertEq(market.safetyDrawTarget(provider, 1), b);
        _checkTree();
        vm.assertEq(market.safetyDrawWeight(provider, g + 1), 35, "next epoch: the current total");
    }

    /// The draw: x = (r >> 128) % W with W at g's start; after releases during g an x at
    /// or past the current total draws nothing (an escape, as docs/COMMITMENTS.md §5 says).
    function test_safetyDraw_pastCurrentTotal_escapes() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(1, 4, 4);
        uint256 spare = _openAccepted(4, BETA, 1, 4); // no digest: the provider may exit it
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _setDraw(g, provider, true, 8, 4, 8); // x in [4, 8): the spare deal's blocks
        _release(spare);
        vm.assertEq(market.safetyDrawWeight(provider, g), 8);
        vm.assertEq(market.safetyDrawTarget(provider, 4), 0);
        vm.assertEq(_commit(g, _leaves(ids, ds, g)), 0, "x >= the current total: no draw");
    }

    /// Same, x below the current total: the remaining deal is drawn.
    function test_safetyDraw_belowCurrentTotal_draws() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(1, 4, 4);
        uint256 spare = _openAccepted(4, BETA, 1, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _setDraw(g, provider, true, 8, 0, 4);
        _release(spare);
        uint256 sid = _commit(g, _leaves(ids, ds, g));
        vm.assertEq(market.getChallenge(sid).dealId, ids[0]);
    }

    /// The draw picks the deal {safetyDrawTarget} names, among deals of different sizes.
    function test_safetyDraw_weightedTarget() public {
        uint256[] memory ids = new uint256[](3);
        Digest[] memory ds = new Digest[](3);
        uint64[3] memory sizes = [uint64(2), 16, 4];
        for (uint256 i; i < 3; ++i) {
            ids[i] = _openAccepted(sizes[i], BETA, 1, 4);
            ds[i] = _postReal(ids[i], 1, 0);
        }
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        for (uint256 i; i < 3; ++i) {
            // each deal in turn, one global epoch each
            uint64 gi = g + uint64(i);
            _enterEpoch(ids[0], uint64(i));
            _setDrawDeal(gi, provider, ids[i]);
            uint256 sid = _commit(gi, _leaves(ids, ds, gi));
            vm.assertEq(market.getChallenge(sid).dealId, ids[i]);
            _answer(sid, ds[i], _leaves(ids, ds, gi), i);
        }
    }

    /// Random accepts (1..64 blocks), releases (of deals with no digest) and resizes,
    /// some in the same epoch, some across epochs: after each, the tree equals a linear
    /// scan at every interval's ends, the total equals usedBlocks, and W of the current
    /// epoch is the total before its first change.
    /// forge-config: default.fuzz.runs = 64
    function testFuzz_fenwickMatchesLinearScan(uint256 seed) public {
        uint64 lastEpoch = type(uint64).max;
        uint256 snap;
        for (uint256 step; step < 14; ++step) {
            uint256 r = uint256(keccak256(abi.encode(seed, step)));
            if ((r >> 8) % 3 == 0) vm.warp(block.timestamp + ((r >> 16) % 2) * EPOCH + 60);
            uint256[] memory list = market.providerDeals(provider);
            uint256 op = list.length == 0 ? 0 : r % 4; // 0, 1: accept; 2: release; 3: resize
            uint256 before = market.getProvider(provider).usedBlocks;
            uint64 g = _now();
            if (op == 2) {
                uint256 id = _releasable(list, r >> 24);
                if (id == 0) continue;
                _release(id);
                g = _now(); // _release may have warped
            } else if (op == 3) {
                uint256 id = list[(r >> 24) % list.length];
                uint64 n = uint64(uint256(1) << ((r >> 32) % 7));
                if (n == market.getDeal(id).numBlocks) n = n == 64 ? 1 : n * 2;
                _resizeTo(id, n);
            } else {
                _openAccepted(uint64(uint256(1) << ((r >> 32) % 7)), BETA, 1, LONG);
            }
            if (g != lastEpoch) {
                lastEpoch = g;
                snap = before;
            }
            vm.assertEq(market.safetyDrawWeight(provider, g), snap, "W = total at the epoch's start");
            _checkTree();
        }
    }

    /// @dev A listed deal with no digest (exitBeforeUpload can release it), searched from
    ///      a random start; 0 if none.
    function _releasable(uint256[] memory list, uint256 r) internal view returns (uint256) {
        for (uint256 k; k < list.length; ++k) {
            uint256 id = list[(r + k) % list.length];
            if (market.getDeal(id).digestVersion == 0) return id;
        }
        return 0;
    }
}
