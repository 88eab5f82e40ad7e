// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "./MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest, BlockProof} from "../../src/lib/DporTypes.sol";
import {DporMerkle} from "../../src/lib/DporMerkle.sol";
import {DporCommitment} from "../../src/lib/DporCommitment.sol";

/// @notice Helpers for epoch commitments (docs/COMMITMENTS.md): real responses over the
///         real run trees of {TreeKit}, trees over several deals' leaves, commits,
///         challenges, answers, and control of the safety draw through the mock beacon's salt.
abstract contract CommitFixture is MarketFixture {
    /// @dev Global epoch of deal epoch `e`.
    function _g(uint256 id, uint64 e) internal view returns (uint64) {
        return market.getDeal(id).startEpoch + e;
    }

    /// @dev The seed the beacon gives global epoch `g` now (before it is stored).
    function _beaconSeed(uint64 g) internal view returns (bytes32) {
        return beacon.randomness(beacon.roundAt(uint256(market.genesis()) + uint256(g) * EPOCH));
    }

    /// @dev r of the safety draw of `who` at g for `seed` (docs/COMMITMENTS.md §5).
    function _drawR(bytes32 seed, address who) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(seed, who, "dpor.safety")));
    }

    /// @dev Sets the beacon's salt so that `who`'s safety draw at g hits (`hit`) or misses,
    ///      and, for a hit with a total weight w > 0 (blocks), draws the weight offset
    ///      x = (r >> 128) % w in [lo, hi). Only before seed(g) is stored.
    function _setDraw(uint64 g, address who, bool hit, uint256 w, uint256 lo, uint256 hi) internal {
        vm.assertEq(market.globalSeeds(g), bytes32(0), "seed already stored");
        for (uint256 s = 1; s < 100_000; ++s) {
            beacon.setSalt(bytes32(s));
            uint256 r = _drawR(_beaconSeed(g), who);
            bool h = r % 16 == 0;
            if (h != hit) continue;
            if (hit && w > 0) {
                uint256 x = (r >> 128) % w;
                if (x < lo || x >= hi) continue;
            }
            return;
        }
        revert("no salt");
    }

    /// @dev Sets the beacon's salt so that `who`'s safety draw at g, committed now (during
    ///      g, with no change to its deals before), draws deal `dealId`: the market's W
    ///      ({safetyDrawWeight}) and Fenwick descent ({safetyDrawTarget}).
    function _setDrawDeal(uint64 g, address who, uint256 dealId) internal {
        vm.assertEq(market.globalSeeds(g), bytes32(0), "seed already stored");
        uint256 w = market.safetyDrawWeight(who, g);
        vm.assertTrue(w > 0, "no weight");
        for (uint256 s = 1; s < 200_000; ++s) {
            beacon.setSalt(bytes32(s));
            uint256 r = _drawR(_beaconSeed(g), who);
            if (r % 16 != 0) continue;
            if (market.safetyDrawTarget(who, (r >> 128) % w) == dealId) return;
        }
        revert("no salt");
    }

    function _noDraw(uint64 g) internal {
        _setDraw(g, provider, false, 0, 0, 0);
    }

    /// @dev The K coded blocks of a proof list.
    function _blocks(BlockProof[] memory ps) internal pure returns (bytes[] memory b) {
        b = new bytes[](ps.length);
        for (uint256 j; j < ps.length; ++j) b[j] = ps[j].codedBlock;
    }

    /// @dev The honest leaf of deal `id` at deal epoch `e` against digest `d` (in force).
    function _leaf(uint256 id, uint64 e, Digest memory d) internal view returns (bytes32) {
        bytes32 rh = DporCommitment.responseHash(market.peekSeed(id, e), _blocks(_epochProofs(id, e, d)));
        return DporCommitment.leaf(id, e, d.version, rh);
    }

    /// @dev Honest leaves at global epoch g of deals `ids` (sorted ascending), digests `ds`.
    function _leaves(uint256[] memory ids, Digest[] memory ds, uint64 g) internal view returns (bytes32[] memory l) {
        l = new bytes32[](ids.length);
        for (uint256 i; i < ids.length; ++i) l[i] = _leaf(ids[i], g - market.getDeal(ids[i]).startEpoch, ds[i]);
    }

    /// @dev Commits `leaves` for g as `who`; returns the safety challenge id (0 if none).
    function _commitAs(address who, uint64 g, bytes32[] memory leaves) internal returns (uint256 safetyId) {
        uint256 before = market.challengeCount();
        vm.prank(who);
        market.commitEpoch(g, DporMerkle.rootOfLeaves(leaves), uint32(leaves.length));
        if (market.challengeCount() > before) safetyId = before + 1;
    }

    function _commit(uint64 g, bytes32[] memory leaves) internal returns (uint256) {
        return _commitAs(provider, g, leaves);
    }

    function _challenge(uint256 id, uint64 e) internal returns (uint256) {
        vm.prank(challenger);
        return market.challengeEntry(id, e);
    }

    /// @dev Answers challenge `cid` with the honest response against `d` and the path of
    ///      leaf `idx` in `leaves`, sent by `from`.
    function _answerFrom(address from, uint256 cid, Digest memory d, bytes32[] memory leaves, uint256 idx) internal {
        IDporMarket.Challenge memory c = market.getChallenge(cid);
        BlockProof[] memory ps = _epochProofs(c.dealId, c.epoch, d);
        bytes32[] memory path = DporMerkle.pathOf(leaves, idx);
        vm.prank(from);
        market.answerChallenge(cid, d, ps, idx, path);
    }

    /// @dev The proofs and path of {_answerFrom}, to call answerChallenge after expectRevert.
    function _answerArgs(uint256 cid, Digest memory d, bytes32[] memory leaves, uint256 idx)
        internal
        view
        returns (BlockProof[] memory ps, bytes32[] memory path)
    {
        IDporMarket.Challenge memory c = market.getChallenge(cid);
        ps = _epochProofs(c.dealId, c.epoch, d);
        path = DporMerkle.pathOf(leaves, idx);
    }

    /// @dev Expects answerChallenge(cid, d, honest proofs, idx, path of idx) to revert with `err`.
    function _answerReverts(uint256 cid, Digest memory d, bytes32[] memory leaves, uint256 idx, bytes4 err) internal {
        (BlockProof[] memory ps, bytes32[] memory path) = _answerArgs(cid, d, leaves, idx);
        vm.prank(provider);
        vm.expectRevert(err);
        market.answerChallenge(cid, d, ps, idx, path);
    }

    /// @dev The honest response of the challenged epoch verifies at no index of `leaves`.
    function _noIndexWorks(uint256 cid, Digest memory d, bytes32[] memory leaves) internal {
        for (uint256 i; i < leaves.length; ++i) {
            _answerReverts(cid, d, leaves, i, IDporMarket.NotInCommitment.selector);
        }
    }

    /// @dev Warps past challenge `cid`'s deadline and faults it (anyone may).
    function _faultLater(uint256 cid) internal {
        uint64 dl = market.getChallenge(cid).deadline;
        if (block.timestamp <= dl) vm.warp(uint256(dl) + 1);
        vm.prank(stranger);
        market.faultChallenge(cid);
    }

    function _answer(uint256 cid, Digest memory d, bytes32[] memory leaves, uint256 idx) internal {
        _answerFrom(provider, cid, d, leaves, idx);
    }

    /// @dev `n` accepted deals of `nb` blocks (K = 1, `epochs` epochs) with a real digest v1
    ///      posted now; returns ids and digests.
    function _deals(uint256 n, uint64 nb, uint32 epochs)
        internal
        returns (uint256[] memory ids, Digest[] memory ds)
    {
        ids = new uint256[](n);
        ds = new Digest[](n);
        for (uint256 i; i < n; ++i) {
            ids[i] = _openAccepted(nb, BETA, 1, epochs);
            ds[i] = _postReal(ids[i], 1, 0);
        }
    }

    function _one(uint256 x) internal pure returns (uint256[] memory a) {
        a = new uint256[](1);
        a[0] = x;
    }

    function _oneD(Digest memory x) internal pure returns (Digest[] memory a) {
        a = new Digest[](1);
        a[0] = x;
    }

    function _slash(uint256 id) internal view returns (uint256) {
        IDporMarket.Deal memory d = market.getDeal(id);
        uint256 col = uint256(COLLATERAL) * d.numBlocks;
        return (col + MAX_FAILURES - 1) / MAX_FAILURES;
    }
}
