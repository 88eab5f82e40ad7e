// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {CommitFixture} from "../utils/CommitFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest, BlockProof} from "../../src/lib/DporTypes.sol";
import {DporMerkle} from "../../src/lib/DporMerkle.sol";
import {DporCommitment} from "../../src/lib/DporCommitment.sol";

/// @notice Issue 22: a provider commits a wrong entry for a deal it no longer fully
///         holds: a response over wrong blocks (it kept only hashes), over a stale
///         digest version (it dropped the newer writes), or an older epoch's response
///         replayed. The leaf binds (dealId, e, v, keccak(S ‖ blocks)) and the answer is
///         checked against the digest in force and the whole-block proofs, so every such
///         entry is unanswerable and a challenge faults it. docs/COMMITMENTS.md §1, §3.
contract F15_WrongEntry is CommitFixture {
    uint256[] internal ids;
    Digest[] internal ds;

    function _setUp2(uint32 epochs) internal {
        (uint256[] memory i_, Digest[] memory d_) = _deals(2, 4, epochs);
        for (uint256 i; i < 2; ++i) {
            ids.push(i_[i]);
            ds.push(d_[i]);
        }
    }

    function _commitWith(uint64 e, bytes32 wrongLeaf) internal returns (bytes32[] memory l, uint256 cid) {
        _enterEpoch(ids[0], e);
        uint64 g = _g(ids[0], e);
        l = new bytes32[](2);
        l[0] = _leaf(ids[0], e, ds[0]);
        l[1] = wrongLeaf;
        _commit(g, l);
        cid = _challenge(ids[1], e);
    }

    function test_attack_wrongBlocks() public {
        _setUp2(4);
        _enterEpoch(ids[0], 0);
        _noDraw(_g(ids[0], 0));
        // the provider lost the blocks: it answers the seed with made-up bytes
        BlockProof[] memory ps = _epochProofs(ids[1], 0, ds[1]);
        ps[0].codedBlock[5] ^= 0x01;
        bytes[] memory fake = new bytes[](1);
        fake[0] = ps[0].codedBlock;
        bytes32 rh = DporCommitment.responseHash(market.peekSeed(ids[1], 0), fake);
        (bytes32[] memory l, uint256 cid) = _commitWith(0, DporCommitment.leaf(ids[1], 0, 1, rh));
        // the committed bytes do not verify against the digest...
        bytes32[] memory path = DporMerkle.pathOf(l, 1);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.InvalidProof.selector);
        market.answerChallenge(cid, ds[1], ps, 1, path);
        // ...and the real bytes are not what was committed
        _answerReverts(cid, ds[1], l, 1, IDporMarket.NotInCommitment.selector);
        _faultLater(cid);
        vm.assertEq(market.getDeal(ids[1]).failures, 1);
    }

    function test_attack_staleDigestVersion() public {
        _setUp2(4);
        Digest memory v1 = ds[1];
        Digest memory v2 = _postReal(ids[1], 2, 1); // in force from epoch 0 on
        _enterEpoch(ids[0], 0);
        _noDraw(_g(ids[0], 0));
        // the provider answers with the old state (version 1)
        bytes32 rh = DporCommitment.responseHash(market.peekSeed(ids[1], 0), _blocks(_epochProofs(ids[1], 0, v2)));
        (bytes32[] memory l, uint256 cid) = _commitWith(0, DporCommitment.leaf(ids[1], 0, 1, rh));
        // version 1 is not in force; version 2's leaf is not the committed one
        (BlockProof[] memory ps, bytes32[] memory path) = _answerArgs(cid, v2, l, 1);
        vm.prank(provider);
        vm.expectRevert(IDporMarket.DigestNotInForce.selector);
        market.answerChallenge(cid, v1, ps, 1, path);
        _answerReverts(cid, v2, l, 1, IDporMarket.NotInCommitment.selector);
        _faultLater(cid);
        vm.assertEq(market.getDeal(ids[1]).failures, 1);
    }

    function test_attack_replayOlderEpoch() public {
        _setUp2(4);
        _enterEpoch(ids[0], 0);
        _noDraw(_g(ids[0], 0));
        _noDraw(_g(ids[0], 1));
        bytes32 old = _leaf(ids[1], 0, ds[1]); // the honest leaf of epoch 0
        // epoch 1: the same entry again (the provider lost the data after epoch 0)
        (bytes32[] memory l, uint256 cid) = _commitWith(1, old);
        _answerReverts(cid, ds[1], l, 1, IDporMarket.NotInCommitment.selector);
        _noIndexWorks(cid, ds[1], l);
        _faultLater(cid);
        vm.assertEq(market.getDeal(ids[1]).failures, 1);
    }
}
