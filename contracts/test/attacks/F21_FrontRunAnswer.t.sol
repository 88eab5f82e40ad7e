// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "../utils/CommitFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";

/// @notice Issue 22: a mempool watcher copies the provider's answer to a challenge and
///         sends it first, hoping to collect the bond or the epoch's pay. The answer's
///         effects name the deal's provider, never msg.sender: the copy only does the
///         provider's work (its own transaction then reverts DisputeNotOpen, at no
///         loss). docs/COMMITMENTS.md §3.
contract F21_FrontRunAnswer is CommitFixture {
    function test_attack_copyTheAnswer() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(2, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        bytes32[] memory l = _leaves(ids, ds, g);
        _commit(g, l);
        uint256 cid = _challenge(ids[1], 0);
        _answerFrom(stranger, cid, ds[1], l, 1); // the front-runner's copy lands first
        vm.assertEq(market.owed(stranger), 0, "nothing for the copier");
        vm.assertEq(market.owed(provider), BOND + 4 * PRICE, "all to the provider");
        _answerReverts(cid, ds[1], l, 1, IDporMarket.DisputeNotOpen.selector);
        vm.assertEq(market.getDeal(ids[1]).failures, 0);
    }
}
