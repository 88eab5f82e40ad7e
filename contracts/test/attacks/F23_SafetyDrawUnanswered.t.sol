// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "../utils/CommitFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest} from "../../src/lib/DporTypes.sol";

/// @notice Issue 22: a provider commits (a root over whatever it likes) and then cannot
///         answer the safety draw its own commitment triggered. The market opened the
///         challenge itself (challenger address(0), no bond); anyone faults it after the
///         deadline and the whole slash goes to the owner. It cannot dodge the draw by
///         not committing either: then every deal epoch of g is a fault.
///         docs/COMMITMENTS.md §5.
contract F23_SafetyDrawUnanswered is CommitFixture {
    function test_attack_commitGarbageThenIgnoreTheDraw() public {
        (uint256[] memory ids, Digest[] memory ds) = _deals(3, 4, 4);
        uint64 g = _g(ids[0], 0);
        _enterEpoch(ids[0], 0);
        _setDrawDeal(g, provider, ids[1]);
        bytes32[] memory l = new bytes32[](3);
        for (uint256 i; i < 3; ++i) l[i] = keccak256(abi.encode("nothing", i));
        uint256 sid = _commit(g, l);
        IDporMarket.Challenge memory ch = market.getChallenge(sid);
        vm.assertEq(ch.dealId, ids[1]);
        vm.assertEq(ch.challenger, address(0));
        _noIndexWorks(sid, ds[1], l);
        uint256 ownerBefore = market.owed(owner);
        _faultLater(sid);
        vm.assertEq(market.getDeal(ids[1]).failures, 1);
        vm.assertEq(market.owed(owner) - ownerBefore, _slash(ids[1]) + 4 * PRICE);
        vm.assertEq(market.owed(stranger), 0, "the faulting caller gets nothing");
        // the other entries are garbage too: any watcher challenge faults them as well
        uint256 cid = _challenge(ids[0], 0);
        _noIndexWorks(cid, ds[0], l);
        _faultLater(cid);
        vm.assertEq(market.getDeal(ids[0]).failures, 1);
    }
}
