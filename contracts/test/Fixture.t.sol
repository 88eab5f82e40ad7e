// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {TestBase} from "./utils/Vm.sol";
import {LibHarness} from "./utils/Harness.sol";
import {TestToken} from "../src/token/TestToken.sol";
import {DporMarket} from "../src/DporMarket.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IRandomnessBeacon} from "../src/market/IRandomnessBeacon.sol";
import {MarketParams} from "../src/lib/DporTypes.sol";
import {Digest, SampleProof} from "../src/lib/DporTypes.sol";
import {DporMerkle} from "../src/lib/DporMerkle.sol";
import {DporDigest} from "../src/lib/DporDigest.sol";
import {DporSampling} from "../src/lib/DporSampling.sol";

/// @notice Checks the contracts against the vectors that dpor-core (Rust) generates:
///         contracts/test/fixtures/vectors.json (docs/ENCODING.md).
contract FixtureTest is TestBase {
    string internal json;
    LibHarness internal h;
    DporMarket internal market;

    function setUp() public {
        json = vm.readFile("contracts/test/fixtures/vectors.json");
        h = new LibHarness();
        // The market's runtime code at the fixture's verifying contract (OZ EIP712
        // rebuilds its domain separator for the new address).
        TestToken token = new TestToken();
        DporMarket m = new DporMarket(
            IERC20(address(token)),
            IRandomnessBeacon(address(0)),
            MarketParams(6 hours, 15 hours, 1 days, 1 days, 1, 0, 0, 3, 0)
        );
        address at = vm.parseJsonAddress(json, ".domain.verifyingContract");
        vm.etch(at, address(m).code);
        market = DporMarket(at);
    }

    function _key(string memory list, uint256 i, string memory field) internal pure returns (string memory) {
        return string.concat(".", list, "[", vm.toString(i), "].", field);
    }

    function _has(string memory list, uint256 i) internal view returns (bool) {
        return vm.keyExistsJson(json, string.concat(".", list, "[", vm.toString(i), "]"));
    }

    function _count(string memory list) internal view returns (uint256 n) {
        while (_has(list, n)) ++n;
    }

    function test_fixture_domain() public view {
        vm.assertEq(vm.parseJsonUint(json, ".domain.chainId"), block.chainid);
        bytes32 expected = keccak256(
            abi.encode(
                keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
                keccak256("dpor"),
                keccak256("1"),
                vm.parseJsonUint(json, ".domain.chainId"),
                address(market)
            )
        );
        vm.assertEq(market.domainSeparator(), expected);
    }

    function test_fixture_blockRoots() public view {
        uint256 n = _count("blockRoots");
        vm.assertGe(n, 1);
        for (uint256 i; i < n; ++i) {
            bytes memory data = vm.parseJsonBytes(json, _key("blockRoots", i, "data"));
            bytes32 root = vm.parseJsonBytes32(json, _key("blockRoots", i, "root"));
            vm.assertEq(DporMerkle.blockRoot(data), root);
            vm.assertEq(h.blockRootOf(data), root, "whole-block root from calldata (epoch proofs)");
        }
    }

    function test_fixture_chunkProofs() public view {
        uint256 n = _count("chunkProofs");
        vm.assertGe(n, 1);
        for (uint256 i; i < n; ++i) {
            bytes memory blk = vm.parseJsonBytes(json, _key("chunkProofs", i, "block"));
            uint256 ci = vm.parseJsonUint(json, _key("chunkProofs", i, "chunkIndex"));
            bytes memory chunk = vm.parseJsonBytes(json, _key("chunkProofs", i, "chunk"));
            bytes32[] memory path = vm.parseJsonBytes32Array(json, _key("chunkProofs", i, "path"));
            bytes32 root = vm.parseJsonBytes32(json, _key("chunkProofs", i, "blockRoot"));
            vm.assertEq(chunk, DporMerkle.chunkAt(blk, ci));
            vm.assertEq(DporMerkle.blockRoot(blk), root);
            vm.assertEq(h.chunkRoot(chunk, ci, path), root);
            bytes32[] memory mine = DporMerkle.pathOf(DporMerkle.chunkLeaves(blk), ci);
            vm.assertEq(keccak256(abi.encode(mine)), keccak256(abi.encode(path)));
        }
    }

    function test_fixture_runProofs() public view {
        uint256 n = _count("runProofs");
        vm.assertGe(n, 1);
        for (uint256 i; i < n; ++i) {
            uint256 size = vm.parseJsonUint(json, _key("runProofs", i, "size"));
            uint256 pos = vm.parseJsonUint(json, _key("runProofs", i, "position"));
            bytes32[] memory path = vm.parseJsonBytes32Array(json, _key("runProofs", i, "path"));
            vm.assertEq(path.length, DporSampling.ceilLog2(size));
            vm.assertLt(pos, size);
            vm.assertEq(
                h.runRoot(pos, vm.parseJsonBytes32(json, _key("runProofs", i, "blockRoot")), path),
                vm.parseJsonBytes32(json, _key("runProofs", i, "root"))
            );
        }
    }

    function _digest(uint256 i) internal view returns (Digest memory d) {
        d.dealId = vm.parseJsonUint(json, _key("digests", i, "dealId"));
        d.version = uint64(vm.parseJsonUint(json, _key("digests", i, "version")));
        d.numBlocks = uint64(vm.parseJsonUint(json, _key("digests", i, "numBlocks")));
        d.writeCount = uint64(vm.parseJsonUint(json, _key("digests", i, "writeCount")));
        d.rebuildCount = uint64(vm.parseJsonUint(json, _key("digests", i, "rebuildCount")));
        d.rootU = vm.parseJsonBytes32(json, _key("digests", i, "rootU"));
        d.rootC = vm.parseJsonBytes32(json, _key("digests", i, "rootC"));
        if (DporSampling.popcount(d.writeCount) > 0) {
            d.levelRoots = vm.parseJsonBytes32Array(json, _key("digests", i, "levelRoots"));
        }
    }

    function test_fixture_digests() public view {
        uint256 n = _count("digests");
        vm.assertGe(n, 1);
        for (uint256 i; i < n; ++i) {
            Digest memory d = _digest(i);
            vm.assertEq(d.levelRoots.length, DporSampling.popcount(d.writeCount));
            bytes32 sh = vm.parseJsonBytes32(json, _key("digests", i, "structHash"));
            vm.assertEq(DporDigest.structHashMemory(d), sh, "structHash (memory)");
            vm.assertEq(h.structHash(d), sh, "structHash (calldata)");
            bytes32 dh = vm.parseJsonBytes32(json, _key("digests", i, "digestHash"));
            vm.assertEq(DporDigest.typedHash(market.domainSeparator(), sh), dh, "digestHash (library)");
            vm.assertEq(market.digestHash(d), dh, "digestHash (market)");
        }
    }

    /// @dev The EIP-712 Resize (docs/CONTRACTS.md §4.1): dpor-core's signing hash of a
    ///      digest with a price and a collateral equals the market's resizeHash.
    function test_fixture_resizes() public view {
        uint256 n = _count("resizes");
        vm.assertGe(n, 1);
        for (uint256 i; i < n; ++i) {
            Digest memory d = _digest(vm.parseJsonUint(json, _key("resizes", i, "digestIndex")));
            uint128 price = uint128(vm.parseJsonUint(json, _key("resizes", i, "pricePerEpoch")));
            uint128 collateral = uint128(vm.parseJsonUint(json, _key("resizes", i, "collateral")));
            vm.assertEq(market.resizeHash(d, price, collateral), vm.parseJsonBytes32(json, _key("resizes", i, "signingHash")));
        }
    }

    /// @dev ENCODING §8 "dpor.epoch.v2": dpor-core's samples (run tags, positions) for
    ///      given (S, D, N, t) must equal the contract's.
    function test_fixture_epochSamples() public view {
        uint256 n = _count("epochSamples");
        vm.assertGe(n, 1);
        for (uint256 i; i < n; ++i) {
            bytes32 seed = vm.parseJsonBytes32(json, _key("epochSamples", i, "seed"));
            bytes32 dh = vm.parseJsonBytes32(json, _key("epochSamples", i, "digestHash"));
            uint256 nb = vm.parseJsonUint(json, _key("epochSamples", i, "numBlocks"));
            uint256 t = vm.parseJsonUint(json, _key("epochSamples", i, "writeCount"));
            uint256 count = vm.parseJsonUint(json, _key("epochSamples", i, "count"));
            uint256[] memory tags = vm.parseJsonUintArray(json, _key("epochSamples", i, "runTags"));
            uint256[] memory poss = vm.parseJsonUintArray(json, _key("epochSamples", i, "positions"));
            vm.assertEq(tags.length, count);
            for (uint256 j; j < count; ++j) {
                (uint256 tag, uint256 pos) = DporSampling.epochSample(seed, dh, j, nb, t);
                vm.assertEq(tag, tags[j], "runTag");
                vm.assertEq(pos, poss[j], "position");
            }
        }
    }

    function test_fixture_codedBlockBytes() public view {
        vm.assertEq(
            DporSampling.codedBlockBytes(vm.parseJsonUint(json, ".blockSize")),
            vm.parseJsonUint(json, ".codedBlockBytes")
        );
    }

    function test_fixture_sampleProofs() public view {
        uint256 n = _count("sampleProofs");
        vm.assertGe(n, 1);
        uint256 chunks = DporSampling.chunkCount(vm.parseJsonUint(json, ".codedBlockBytes"));
        uint256 depth = DporSampling.ceilLog2(chunks);
        for (uint256 i; i < n; ++i) {
            Digest memory d = _digest(vm.parseJsonUint(json, _key("sampleProofs", i, "digestIndex")));
            SampleProof memory p;
            p.runTag = uint8(vm.parseJsonUint(json, _key("sampleProofs", i, "runTag")));
            p.position = uint64(vm.parseJsonUint(json, _key("sampleProofs", i, "position")));
            p.chunkIndex = uint32(vm.parseJsonUint(json, _key("sampleProofs", i, "chunkIndex")));
            p.chunk = vm.parseJsonBytes(json, _key("sampleProofs", i, "chunk"));
            p.chunkPath = vm.parseJsonBytes32Array(json, _key("sampleProofs", i, "chunkPath"));
            p.runPath = vm.parseJsonBytes32Array(json, _key("sampleProofs", i, "runPath"));
            vm.assertTrue(h.verifySample(d, p, chunks, depth), "sample proof");
            p.chunk[0] ^= 0x01;
            vm.assertFalse(h.verifySample(d, p, chunks, depth), "tampered sample proof");
        }
    }
}
