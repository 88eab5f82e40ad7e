// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "../utils/CommitFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";

/// @notice Issue 22: a provider commits a root but withholds the response (from
///         watchers over libp2p and from the chain). A watcher that cannot fetch it
///         challenges; an unanswered challenge is a fault like a missed epoch, with the
///         challenger's share and bond paid from the collateral. docs/COMMITMENTS.md §3.
contract F17_WithheldResponse is CommitFixture {
    function test_attack_commitThenWithhold() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(2, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _noDraw(g);
        _commit(g, _leaves(ids, ds, g)); // a plausible root (even an honest one)
        uint256 cid = _challenge(ids[0], 0);
        // the provider stays silent; the challenge cannot be faulted early
        vm.expectRevert(IDporMarket.DeadlineNotPassed.selector);
        market.faultChallenge(cid);
        uint256 slash = _slash(ids[0]);
        uint256 ownerBefore = market.owed(owner);
        _faultLater(cid);
        vm.assertEq(market.getDeal(ids[0]).failures, 1);
        vm.assertEq(market.owed(challenger), slash * SHARE_BPS / 10_000 + BOND, "the watcher is paid");
        vm.assertEq(market.owed(owner) - ownerBefore, slash - slash * SHARE_BPS / 10_000 + 4 * PRICE);
        vm.assertEq(market.owed(provider), 0, "no pay for the epoch");
    }
}
