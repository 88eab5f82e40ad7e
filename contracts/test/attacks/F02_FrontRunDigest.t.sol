// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest, BlockProof} from "../../src/lib/DporTypes.sol";

/// @notice Finding 2 (high): front-running proofs with new digests. The owner holds both
///         signatures of every state (the node co-signs higher versions of an unchanged
///         state) and posts version bumps ahead of the provider's proof in every block of
///         the window. Before: every proof reverted (DigestMismatch), the epoch was missed
///         and slashed. Now: each epoch is bound to the digest in force at its start.
contract F02_FrontRunDigest is MarketFixture {
    function test_attack_versionBumpsAheadOfEveryProof() public {
        uint256 id = _openAccepted(4, BETA, 2, 4);
        Digest memory d1 = _postReal(id, 1, 3);
        _enterEpoch(id, 0);
        BlockProof[] memory ps = _epochProofs(id, 0, d1);
        // the owner front-runs: a bump (same state, higher version) and a bump with another
        // write count, in the proof's block and in later blocks of the window
        for (uint64 v = 2; v < 6; ++v) {
            _postReal(id, v, v % 2 == 0 ? 3 : 1);
            vm.warp(block.timestamp + 1 hours);
        }
        market.submitEpochProof(id, 0, d1, ps); // still the digest in force at the start
        vm.assertEq(uint256(market.epochStatus(id, 0)), uint256(IDporMarket.EpochStatus.Proven));
        vm.assertEq(market.owed(provider), 4 * PRICE);
        // the latest bump governs the next epoch only; a proof against it works there
        Digest memory latest = buildDigest(id, 5, 4, 1, 0, BETA);
        vm.expectRevert(IDporMarket.DigestNotInForce.selector);
        market.submitEpochProof(id, 0, latest, ps);
        _prove(id, 1, latest);
        // an old digest cannot be used for a later epoch either
        _enterEpoch(id, 2);
        BlockProof[] memory ps2 = _epochProofs(id, 2, latest);
        vm.expectRevert(IDporMarket.DigestNotInForce.selector);
        market.submitEpochProof(id, 2, d1, ps2);
        vm.assertEq(market.getDeal(id).failures, 0);
    }

    /// A bump posted in the same second as the epoch start is not in force for it.
    function test_attack_bumpAtTheStartSecond() public {
        uint256 id = _openAccepted(4, BETA, 1, 3);
        Digest memory d1 = _postReal(id, 1, 0);
        _enterEpoch(id, 0);
        _postReal(id, 2, 1);
        (uint64 v,,) = market.digestInForce(id, 0);
        vm.assertEq(v, 1);
        _prove(id, 0, d1);
    }
}
