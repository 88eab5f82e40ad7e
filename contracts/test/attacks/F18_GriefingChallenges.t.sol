// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "../utils/CommitFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";

/// @notice Issue 22: a griefer challenges every entry of an honest provider to make it
///         pay for on-chain proofs. Each challenge locks {disputeBond}, and each answer
///         credits that bond to the provider (it pays the answer's gas); the griefer
///         loses every bond and the provider is never faulted. docs/COMMITMENTS.md §3.
contract F18_GriefingChallenges is CommitFixture {
    function test_attack_challengeEverything() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(3, 4, 4);
        uint256 before = token.balanceOf(challenger);
        uint256 n;
        for (uint64 e; e < 2; ++e) {
            _enterEpoch(ids[0], e);
            uint64 g = _g(ids[0], e);
            _noDraw(g);
            bytes32[] memory l = _leaves(ids, ds, g);
            _commit(g, l);
            for (uint256 i; i < 3; ++i) {
                uint256 cid = _challenge(ids[i], e);
                _answer(cid, ds[i], l, i);
                ++n;
            }
        }
        vm.assertEq(before - token.balanceOf(challenger), n * BOND, "every bond lost");
        vm.assertEq(market.owed(challenger), 0);
        vm.assertEq(market.owed(provider), n * (BOND + 4 * PRICE), "bonds and pay to the provider");
        for (uint256 i; i < 3; ++i) vm.assertEq(market.getDeal(ids[i]).failures, 0);
    }
}
