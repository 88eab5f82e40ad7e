// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "../utils/CommitFixture.sol";
import {Digest} from "../../src/lib/DporTypes.sol";

/// @notice A provider holds one big deal (64 blocks) among 16 small ones (4 blocks each):
///         half of its data is the big deal. It drops the big deal's data and commits a
///         wrong entry for it every epoch, betting nobody watches. With a uniform safety
///         draw (one deal of the D = 17 at g's start) it would be drawn w.p. 1/(16·17) =
///         1/272 per epoch and escape 120 epochs w.p. 0.64; with the draw weighted by size
///         (docs/COMMITMENTS.md §5) it is drawn w.p. (64/128)/16 = 1/32 per epoch and
///         escapes 120 epochs w.p. (1 − 1/32)^120 = 0.022: caught in proportion to the
///         data lost. When drawn, the market challenges it itself and the unanswered
///         challenge faults (whole slash to the owner).
contract F27_BigDealDroppedAmongSmall is CommitFixture {
    uint256 internal constant SMALL = 16;
    /// @dev The big deal's position in the list (8 small deals before it, 8 after).
    uint256 internal constant BIG = 8;

    function _setUpDeals() internal returns (uint256[] memory ids, Digest[] memory ds) {
        ids = new uint256[](SMALL + 1);
        ds = new Digest[](SMALL + 1);
        for (uint256 i; i <= SMALL; ++i) {
            ids[i] = _openAccepted(i == BIG ? 64 : 4, BETA, 1, 8);
            ds[i] = _postReal(ids[i], 1, 0);
        }
    }

    function test_attack_safetyDrawCatchesTheBigDeal() public {
        (uint256[] memory ids, Digest[] memory ds) = _setUpDeals();
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        vm.assertEq(market.safetyDrawWeight(provider, g), 128);
        _setDrawDeal(g, provider, ids[BIG]);
        bytes32[] memory l = _leaves(ids, ds, g);
        l[BIG] = keccak256(abi.encode("lost", g)); // no response behind it
        uint256 sid = _commit(g, l);
        vm.assertEq(market.getChallenge(sid).dealId, ids[BIG], "drawn");
        vm.assertEq(market.getChallenge(sid).challenger, address(0));
        _noIndexWorks(sid, ds[BIG], l);
        uint256 ownerBefore = market.owed(owner);
        _faultLater(sid);
        vm.assertEq(market.getDeal(ids[BIG]).failures, 1, "caught without any watcher");
        vm.assertEq(market.owed(owner) - ownerBefore, _slash(ids[BIG]) + 64 * PRICE, "whole slash + refund");
    }

    /// The big deal's weight share is exactly its blocks: x in [32, 96) of W = 128.
    function test_bigDealIntervalIsItsBlocks() public {
        (uint256[] memory ids,) = _setUpDeals();
        vm.assertEq(market.safetyDrawTarget(provider, 31), ids[BIG - 1]);
        vm.assertEq(market.safetyDrawTarget(provider, 32), ids[BIG]);
        vm.assertEq(market.safetyDrawTarget(provider, 95), ids[BIG]);
        vm.assertEq(market.safetyDrawTarget(provider, 96), ids[BIG + 1]);
        vm.assertEq(market.safetyDrawTarget(provider, 128), 0);
    }

    /// Over 4096 deterministic seeds, the draw hits the big deal in about half of its
    /// hits (its share of the blocks); the old uniform draw, (r >> 128) % 17, in 1/17.
    function test_drawFrequencyFollowsBlocks() public {
        (uint256[] memory ids,) = _setUpDeals();
        uint256 w = 128;
        uint256 hits;
        uint256 big;
        uint256 uniformBig;
        for (uint256 i; i < 4096; ++i) {
            uint256 r = _drawR(keccak256(abi.encode("F27 seed", i)), provider);
            if (r % 16 != 0) continue;
            ++hits;
            if (market.safetyDrawTarget(provider, (r >> 128) % w) == ids[BIG]) ++big;
            if ((r >> 128) % (SMALL + 1) == BIG) ++uniformBig;
        }
        emit log_named_uint("draws (of 4096 epochs)", hits);
        emit log_named_uint("draws on the big deal, weighted", big);
        emit log_named_uint("draws on the big deal, uniform", uniformBig);
        // hits ~ Binomial(4096, 1/16): 256 ± 15.5; outside [192, 320] w.p. < 1e-4
        vm.assertGe(hits, 192);
        vm.assertLe(hits, 320);
        // weighted: big ~ Binomial(hits, 1/2): within hits/2 ± 4 sd (sd ≤ 9)
        vm.assertGe(big * 2 + 72, hits);
        vm.assertLe(big * 2, hits + 72);
        // uniform: Binomial(hits, 1/17) ≈ 15 ± 4: far below the big deal's share
        vm.assertLe(uniformBig * 17, hits + 17 * 16);
        vm.assertGe(big, 4 * uniformBig);
    }
}
