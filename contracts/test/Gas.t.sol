// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "./utils/MarketFixture.sol";
import {IDporMarket} from "../src/market/IDporMarket.sol";
import {Digest, SampleProof} from "../src/lib/DporTypes.sol";
import {DporMerkle} from "../src/lib/DporMerkle.sol";
import {DporSampling} from "../src/lib/DporSampling.sol";

/// @notice Gas of the main operations for a 2^20-block file of 4 KiB blocks
///         (docs/PERFORMANCE.md). Run with `npx forge test --match-contract GasTest -vv`.
///         The C tree (2^21 leaves) is real for positions 0..1023 and uses arbitrary
///         sibling hashes above height 10; the epoch seed is ground (vm.setBlockhash)
///         until the sample falls in that part.
contract GasTest is MarketFixture {
    uint64 internal constant N = 1 << 20;
    uint32 internal constant B = 4096;
    uint256 internal constant LOW = 10;

    uint256 internal id;
    bytes internal blk;
    bytes32[] internal chunkLeaves;
    bytes32[] internal lowLeaves;
    bytes32[] internal upper;
    Digest internal dg;

    function setUp() public override {
        super.setUp();
        blk = codedBlock(0, 0, DporSampling.codedBlockBytes(B));
        chunkLeaves = DporMerkle.chunkLeaves(blk);
        bytes32 r = DporMerkle.rootOfLeaves(chunkLeaves);
        bytes32[] memory low = new bytes32[](1 << LOW);
        for (uint256 p; p < low.length; ++p) low[p] = DporMerkle.runLeaf(p, r);
        lowLeaves = low;
        bytes32 root = DporMerkle.rootOfLeaves(low);
        for (uint256 hgt = LOW; hgt < 21; ++hgt) {
            bytes32 s = keccak256(abi.encode("sib", hgt));
            upper.push(s);
            root = DporMerkle.node(root, s);
        }
        dg.dealId = 1;
        dg.numBlocks = N;
        dg.writeCount = 0x3ff; // ten filled levels
        dg.rebuildCount = 1;
        dg.rootU = keccak256("U");
        dg.rootC = root;
        for (uint256 l; l < 10; ++l) dg.levelRoots.push(keccak256(abi.encode("L", l)));
    }

    function _calldataGas(bytes memory data) internal pure returns (uint256 g) {
        for (uint256 i; i < data.length; ++i) g += data[i] == 0 ? 4 : 16;
    }

    function _report(string memory name, uint256 exec, bytes memory data) internal {
        emit log_named_uint(string.concat(name, " execution gas"), exec);
        emit log_named_uint(string.concat(name, " tx gas (21000 + calldata + execution)"), 21000 + _calldataGas(data) + exec);
    }

    function _proof(uint256 pos, uint256 ci) internal view returns (SampleProof memory p) {
        p.runTag = 0;
        p.position = uint64(pos);
        p.chunkIndex = uint32(ci);
        p.chunk = DporMerkle.chunkAt(blk, ci);
        p.chunkPath = DporMerkle.pathOf(chunkLeaves, ci);
        bytes32[] memory lowPath = DporMerkle.pathOf(lowLeaves, pos);
        p.runPath = new bytes32[](21);
        for (uint256 i; i < LOW; ++i) p.runPath[i] = lowPath[i];
        for (uint256 i; i < upper.length; ++i) p.runPath[LOW + i] = upper[i];
    }

    uint256 internal pos;
    uint256 internal ci;
    SampleProof internal sp0;

    function test_gas_mainOperations() public {
        _openAccept();
        Digest memory d = _postTwice();
        _epoch(d);
        _disputes(d);
    }

    function _openAccept() internal {
        bytes memory data = abi.encodeCall(market.openDeal, (provider, N, B, 128, 1, 10, PRICE));
        vm.prank(owner);
        uint256 g = gasleft();
        id = market.openDeal(provider, N, B, 128, 1, 10, PRICE);
        _report("openDeal", g - gasleft(), data);
        data = abi.encodeCall(market.acceptDeal, (id));
        vm.prank(provider);
        g = gasleft();
        market.acceptDeal(id);
        _report("acceptDeal", g - gasleft(), data);
    }

    function _postOne(Digest memory d, string memory name) internal {
        bytes32 h = market.digestHash(d);
        bytes memory so = _sig(OWNER_PK, h);
        bytes memory sp = _sig(PROVIDER_PK, h);
        bytes memory data = abi.encodeCall(market.postDigest, (d, so, sp));
        uint256 g = gasleft();
        market.postDigest(d, so, sp);
        _report(name, g - gasleft(), data);
    }

    /// The first post writes a fresh slot; the next ones are the steady state.
    function _postTwice() internal returns (Digest memory d) {
        d = dg;
        d.version = 1;
        _postOne(d, "postDigest (first, 10 level roots)");
        d.version = 2;
        _postOne(d, "postDigest (next, 10 level roots)");
    }

    /// Epoch 0: grind the seed block's hash until the sample lands in the built subtree.
    function _epoch(Digest memory d) internal {
        bytes32 h = market.digestHash(d);
        (uint256 seedBlock,) = market.epochWindow(id, 0);
        vm.roll(seedBlock + 1);
        uint256 chunks = DporSampling.chunkCount(DporSampling.codedBlockBytes(B));
        for (uint256 i;; ++i) {
            bytes32 bh = keccak256(abi.encode("grind", i));
            bytes32 seed = keccak256(abi.encode(bh, id, uint256(0)));
            (uint256 tag, uint256 p, uint256 c) = DporSampling.epochSample(seed, h, 0, N, d.writeCount, chunks);
            if (tag == 0 && p < (1 << LOW)) {
                vm.setBlockhash(seedBlock, bh);
                (pos, ci) = (p, c);
                break;
            }
        }
        SampleProof[] memory ps = new SampleProof[](1);
        ps[0] = _proof(pos, ci);
        sp0 = ps[0];
        bytes memory data = abi.encodeCall(market.submitEpochProof, (id, 0, d, ps));
        uint256 g = gasleft();
        market.submitEpochProof(id, 0, d, ps);
        _report("submitEpochProof (N=2^20, K=1, first touch of the seed)", g - gasleft(), data);
        vm.assertEq(uint256(market.epochStatus(id, 0)), uint256(IDporMarket.EpochStatus.Proven));
    }

    function _disputes(Digest memory d) internal {
        SampleProof memory p = sp0;
        bytes memory data = abi.encodeCall(market.openDispute, (id, 0, 2, bytes32("t"), 0, uint64(pos), uint32(ci)));
        vm.prank(challenger);
        uint256 g = gasleft();
        uint256 q = market.openDispute(id, 0, 2, bytes32("t"), 0, uint64(pos), uint32(ci));
        _report("openDispute", g - gasleft(), data);
        data = abi.encodeCall(market.answerDispute, (q, d, p));
        g = gasleft();
        market.answerDispute(q, d, p);
        _report("answerDispute (N=2^20)", g - gasleft(), data);

        vm.prank(challenger);
        q = market.openDispute(id, 0, 2, bytes32("t"), 0, 5, 5);
        vm.roll(block.number + DISPUTE_WINDOW + 1);
        data = abi.encodeCall(market.slash, (q));
        g = gasleft();
        market.slash(q);
        _report("slash", g - gasleft(), data);

        data = abi.encodeCall(market.markMissed, (id, 1));
        g = gasleft();
        market.markMissed(id, 1);
        _report("markMissed", g - gasleft(), data);

        data = abi.encodeCall(market.withdraw, ());
        vm.prank(provider);
        g = gasleft();
        market.withdraw();
        _report("withdraw", g - gasleft(), data);
    }
}
