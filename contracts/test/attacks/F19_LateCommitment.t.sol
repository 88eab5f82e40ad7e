// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "../utils/CommitFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";
import {DporMerkle} from "../../src/lib/DporMerkle.sol";

/// @notice Issue 22: a provider that missed the window (or wants to see later seeds, or
///         to rebuild data first) commits late, or commits early for a future epoch. A
///         commitment is accepted only inside its own epoch's window; without it every
///         deal epoch of g is a fault (markMissed, closeDeal). docs/COMMITMENTS.md §2.
contract F19_LateCommitment is CommitFixture {
    function test_attack_commitAfterTheWindow() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(2, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        bytes32 root = DporMerkle.rootOfLeaves(_leaves(ids, ds, g));
        // too early for the next epoch
        vm.prank(provider);
        vm.expectRevert(IDporMarket.EpochNotStarted.selector);
        market.commitEpoch(g + 1, root, 2);
        _pastEpoch(ids[0], 0);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.EpochClosed.selector);
        market.commitEpoch(g, root, 2);
        (, bool committed) = market.getCommitment(provider, g);
        vm.assertFalse(committed);
        // every deal epoch of g is a fault
        for (uint256 i; i < 2; ++i) {
            market.markMissed(ids[i], 0);
            vm.assertEq(market.getDeal(ids[i]).failures, 1);
        }
        // nothing committed afterwards either: closeDeal faults every remaining epoch
        _pastGrace(ids[0]);
        market.closeDeal(ids[0]);
        IDporMarket.Deal memory deal = market.getDeal(ids[0]);
        vm.assertEq(deal.failures, 4);
        vm.assertEq(uint256(deal.state), uint256(IDporMarket.DealState.Terminated));
        vm.assertEq(market.owed(provider), 0, "nothing paid, no collateral back");
    }
}
