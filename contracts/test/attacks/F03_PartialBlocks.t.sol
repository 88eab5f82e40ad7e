// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "../utils/MarketFixture.sol";
import {IDporMarket} from "../../src/market/IDporMarket.sol";
import {Digest, BlockProof} from "../../src/lib/DporTypes.sol";
import {DporSampling} from "../../src/lib/DporSampling.sol";

/// @notice Finding 3 (high): epoch proofs must prove whole coded blocks. A provider that
///         drops one 128-byte chunk index from its blocks made those columns
///         unrecoverable yet passed chunk samples w.p. ≈ 73/74. Now a proof carries the
///         whole coded block: any missing chunk fails it. And samples rotate over the
///         runs, so small levels are sampled as often as C.
contract F03_PartialBlocks is MarketFixture {
    uint32 internal constant BIG = 1000; // coded block 1152 bytes, 9 chunks

    /// The provider keeps every chunk but index 3 of each block and fills it with
    /// anything (zeros, or a guess): every epoch proof fails.
    function test_attack_dropOneChunkIndex() public {
        uint256 id = _openAccepted(4, BIG, 2, 8);
        Digest memory d = _postReal(id, 1, 3);
        for (uint64 e; e < 8; ++e) {
            _enterEpoch(id, e);
            BlockProof[] memory ps = _epochProofs(id, e, d);
            for (uint256 j; j < ps.length; ++j) {
                for (uint256 k = 384; k < 512; ++k) ps[j].codedBlock[k] = 0x00; // chunk 3 lost
            }
            vm.expectRevert(IDporMarket.InvalidProof.selector);
            market.submitEpochProof(id, e, d, ps);
        }
        _pastGrace(id);
        market.closeDeal(id);
        vm.assertEq(uint256(market.getDeal(id).state), uint256(IDporMarket.DealState.Terminated));
    }

    /// A provider cannot shorten the block to the chunks it has.
    function test_attack_truncatedBlock() public {
        uint256 id = _openAccepted(4, BIG, 1, 2);
        Digest memory d = _postReal(id, 1, 0);
        _enterEpoch(id, 0);
        BlockProof[] memory ps = _epochProofs(id, 0, d);
        bytes memory b = ps[0].codedBlock;
        assembly ("memory-safe") {
            mstore(b, 1024) // drop the last chunk
        }
        vm.expectRevert(IDporMarket.WrongBlockLength.selector);
        market.submitEpochProof(id, 0, d, ps);
    }

    /// At N = 2^20 with ten filled levels (R = 11 runs), K = 1: over 330 seeds every run
    /// is sampled about 30 times (each w.p. 1/R). Under the old rule (proportional to
    /// size) all ten levels together were hit w.p. 2046/2^21 ≈ 0.1 % per sample.
    function test_attack_smallLevelsAreSampled() public pure {
        uint256 n = 1 << 20;
        uint256 t = 0x3ff;
        uint256[11] memory hits;
        for (uint256 i; i < 330; ++i) {
            bytes32 seed = keccak256(abi.encode("seed", i));
            (uint256 tag,) = DporSampling.epochSample(seed, keccak256("D"), 0, n, t);
            hits[tag]++;
        }
        for (uint256 r; r < 11; ++r) vm.assertGe(hits[r], 10);
    }

    /// A provider missing more than half of one run (level 1, 4 blocks: it lost 3) fails
    /// every epoch whose sample lands there: with R = 3 runs and K = 1, about a third of
    /// the epochs; it keeps failing until the deal terminates.
    function test_attack_missingHalfOfARun() public {
        uint256 id = _openAccepted(4, BETA, 1, 30);
        Digest memory d = _postReal(id, 1, 3); // runs: C (8), level 0 (2), level 1 (4)
        uint256 failed;
        uint64 e;
        for (; e < 30 && market.getDeal(id).state == IDporMarket.DealState.Active; ++e) {
            _enterEpoch(id, e);
            BlockProof[] memory ps = _epochProofs(id, e, d);
            if (ps[0].runTag == 2 && ps[0].position != 0) {
                failed++;
                ps[0].codedBlock[0] ^= 0x01; // it does not have the block
                vm.expectRevert(IDporMarket.InvalidProof.selector);
                market.submitEpochProof(id, e, d, ps);
                _pastEpoch(id, e);
                market.markMissed(id, e);
            } else {
                market.submitEpochProof(id, e, d, ps);
            }
        }
        vm.assertEq(failed, MAX_FAILURES);
        vm.assertEq(uint256(market.getDeal(id).state), uint256(IDporMarket.DealState.Terminated));
    }
}
