// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "./utils/MarketFixture.sol";
import {LibHarness} from "./utils/Harness.sol";
import {DporMarket} from "../src/DporMarket.sol";
import {IDporMarket} from "../src/market/IDporMarket.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IRandomnessBeacon} from "../src/market/IRandomnessBeacon.sol";
import {Digest, SampleProof} from "../src/lib/DporTypes.sol";
import {DporSampling} from "../src/lib/DporSampling.sol";
import {DporMerkle} from "../src/lib/DporMerkle.sol";

/// @notice Fuzz tests: digest signatures, Merkle proofs, epoch sample derivation.
contract FuzzTest is MarketFixture {
    LibHarness internal h;
    uint256 internal dealId;

    function setUp() public override {
        super.setUp();
        h = new LibHarness();
        dealId = _openAccepted(4, BETA, 1, 10);
    }

    function _base() internal view returns (Digest memory d) {
        d.dealId = dealId;
        d.version = 1;
        d.numBlocks = 4;
        d.writeCount = 3;
        d.rebuildCount = 2;
        d.rootU = keccak256("u");
        d.rootC = keccak256("c");
        d.levelRoots = new bytes32[](2);
        d.levelRoots[0] = keccak256("l0");
        d.levelRoots[1] = keccak256("l1");
    }

    /// Any changed field of a signed digest is rejected.
    function testFuzz_digest_anyChangedFieldRejected(uint8 field, uint256 delta) public {
        delta = delta == 0 ? 1 : delta;
        Digest memory d = _base();
        bytes32 hh = market.digestHash(d);
        bytes memory so = _sig(OWNER_PK, hh);
        bytes memory sp = _sig(PROVIDER_PK, hh);
        field = field % 9;
        if (field == 0) d.dealId = d.dealId + delta;
        else if (field == 1) d.version = uint64(uint256(d.version) + (delta % 1000) + 1);
        else if (field == 2) d.numBlocks = uint64(uint256(d.numBlocks) ^ (delta % type(uint64).max + 1));
        else if (field == 3) d.writeCount = uint64(uint256(d.writeCount) ^ (delta % type(uint64).max + 1));
        else if (field == 4) d.rebuildCount = uint64(uint256(d.rebuildCount) ^ (delta % type(uint64).max + 1));
        else if (field == 5) d.rootU = bytes32(uint256(d.rootU) ^ delta);
        else if (field == 6) d.rootC = bytes32(uint256(d.rootC) ^ delta);
        else if (field == 7) d.levelRoots[delta % 2] = bytes32(uint256(d.levelRoots[delta % 2]) ^ delta);
        else d.levelRoots = new bytes32[](delta % 4 == 2 ? 3 : delta % 2); // wrong count or content
        vm.expectRevert();
        market.postDigest(d, so, sp);
        // the original still posts
        market.postDigest(_base(), so, sp);
    }

    /// A digest signed for another chain id is rejected.
    function testFuzz_digest_otherChainRejected(uint64 chain) public {
        vm.assume(chain != block.chainid && chain != 0);
        uint256 here = block.chainid;
        Digest memory d = _base();
        vm.chainId(chain);
        bytes32 hh = market.digestHash(d);
        vm.chainId(here);
        vm.assertNotEq(hh, market.digestHash(d));
        bytes memory so = _sig(OWNER_PK, hh);
        bytes memory sp = _sig(PROVIDER_PK, hh);
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.postDigest(d, so, sp);
    }

    /// A digest signed for another market contract is rejected.
    function testFuzz_digest_otherContractRejected(uint64 salt) public {
        DporMarket other = new DporMarket{salt: bytes32(uint256(salt))}(
            IERC20(address(token)), IRandomnessBeacon(address(beacon)), _params()
        );
        Digest memory d = _base();
        bytes32 hh = other.digestHash(d);
        bytes memory so = _sig(OWNER_PK, hh);
        bytes memory sp = _sig(PROVIDER_PK, hh);
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.postDigest(d, so, sp);
    }

    /// An old or equal version is rejected, a newer one accepted.
    function testFuzz_digest_versionMonotone(uint64 v1, uint64 v2) public {
        vm.assume(v1 > 0);
        Digest memory d = _base();
        d.version = v1;
        _post(d);
        d.version = v2;
        bytes32 hh = market.digestHash(d);
        bytes memory so = _sig(OWNER_PK, hh);
        bytes memory sp = _sig(PROVIDER_PK, hh);
        if (v2 <= v1) vm.expectRevert(IDporMarket.StaleVersion.selector);
        market.postDigest(d, so, sp);
        vm.assertEq(market.getDeal(dealId).digestVersion, v2 > v1 ? v2 : v1);
    }

    /// A signature by anyone but the owner / provider is rejected.
    function testFuzz_digest_wrongSignerRejected(uint256 pk) public {
        pk = 1 + pk % (115792089237316195423570985008687907852837564279074904382605163141518161494336);
        vm.assume(pk != OWNER_PK && pk != PROVIDER_PK);
        Digest memory d = _base();
        bytes32 hh = market.digestHash(d);
        bytes memory so = _sig(OWNER_PK, hh);
        bytes memory sp = _sig(PROVIDER_PK, hh);
        bytes memory sx = _sig(pk, hh);
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.postDigest(d, sx, sp);
        vm.expectRevert(IDporMarket.BadProviderSignature.selector);
        market.postDigest(d, so, sx);
        vm.expectRevert(IDporMarket.BadOwnerSignature.selector);
        market.postDigest(d, sp, so); // swapped
    }

    /// Any changed byte of a sample proof is rejected.
    function testFuzz_merkle_anyChangedByteRejected(uint256 which, uint256 at, uint8 x) public view {
        vm.assume(x != 0);
        uint64 n = 4;
        Digest memory d = buildDigest(dealId, 1, n, 3, 0, 4096);
        uint256 tag = [uint256(0), 1, 2][which % 3];
        uint256 size = DporSampling.runSize(tag, n);
        uint256 pos = (which >> 8) % size;
        uint256 ci = (which >> 16) % 37;
        SampleProof memory p = buildProof(tag, pos, ci, n, 4096);
        vm.assertTrue(h.verifySample(d, p, 37, 6));
        uint256 kind = (which >> 32) % 6;
        if (kind == 0) {
            p.chunk[at % 128] = bytes1(uint8(p.chunk[at % 128]) ^ x);
        } else if (kind == 1) {
            uint256 i = at % p.chunkPath.length;
            p.chunkPath[i] = bytes32(uint256(p.chunkPath[i]) ^ (uint256(x) << (8 * ((at >> 8) % 32))));
        } else if (kind == 2) {
            uint256 i = at % p.runPath.length;
            p.runPath[i] = bytes32(uint256(p.runPath[i]) ^ (uint256(x) << (8 * ((at >> 8) % 32))));
        } else if (kind == 3) {
            p.position = uint64(p.position ^ (1 + at % 255));
        } else if (kind == 4) {
            p.chunkIndex = uint32(p.chunkIndex ^ (1 + at % 255));
        } else {
            bytes32 m = bytes32(uint256(x) << (8 * (at % 32)));
            if (tag == 0) d.rootC ^= m;
            else d.levelRoots[tag - 1] ^= m; // t = 3: level ℓ is levelRoots[ℓ]
        }
        vm.assertFalse(h.verifySample(d, p, 37, 6));
    }

    /// Reference implementation of ENCODING §8 (dpor.epoch.v2), written independently
    /// of DporSampling: runs listed explicitly, then indexed.
    function _reference(bytes32 seed, bytes32 dh, uint256 j, uint256 n, uint256 t)
        internal
        pure
        returns (uint256 tag, uint256 pos)
    {
        uint256[65] memory tags;
        uint256[65] memory sizes;
        uint256 r = 1;
        tags[0] = 0;
        sizes[0] = 2 * n;
        for (uint256 l; l < 64; ++l) {
            if (t & (uint256(1) << l) != 0) {
                tags[r] = l + 1;
                sizes[r] = uint256(2) ** (l + 1);
                r++;
            }
        }
        bytes32 dom = keccak256(bytes("dpor.epoch.v2"));
        uint256 u = uint256(keccak256(abi.encode(dom, seed, dh))) % r;
        uint256 idx = (u + j) % r;
        tag = tags[idx];
        pos = uint256(keccak256(abi.encode(dom, seed, dh, j))) % sizes[idx];
    }

    /// Epoch samples are in range and match the reference; K consecutive samples cover
    /// min(K, R) distinct runs.
    function testFuzz_epochSample_matchesReference(bytes32 seed, bytes32 dh, uint8 j, uint8 k, uint64 t)
        public
        pure
    {
        uint256 n = uint256(1) << (k % 41);
        t = uint64(t % n);
        (uint256 tag, uint256 pos) = DporSampling.epochSample(seed, dh, j, n, t);
        (uint256 rt, uint256 rp) = _reference(seed, dh, j, n, t);
        vm.assertEq(tag, rt);
        vm.assertEq(pos, rp);
        vm.assertTrue(DporSampling.runExists(tag, t));
        vm.assertLt(pos, DporSampling.runSize(tag, n));
        _checkDistinct(seed, dh, 1 + uint256(j) % 8, n, t);
    }

    /// K consecutive samples land in min(K, R) distinct runs.
    function _checkDistinct(bytes32 seed, bytes32 dh, uint256 kk, uint256 n, uint256 t) internal pure {
        uint256 runs = 1 + DporSampling.popcount(t);
        uint256 seen; // bitmask over tags (≤ 64)
        uint256 distinct;
        for (uint256 i; i < kk; ++i) {
            (uint256 ti,) = DporSampling.epochSample(seed, dh, i, n, t);
            if (seen & (uint256(1) << ti) == 0) {
                seen |= uint256(1) << ti;
                distinct++;
            }
        }
        vm.assertEq(distinct, kk < runs ? kk : runs);
    }

    /// The whole-block root computed from calldata equals the memory reference
    /// (DporMerkle.blockRoot) for any length, including partial last chunks.
    function testFuzz_blockRoot_matchesReference(bytes memory blk) public view {
        vm.assume(blk.length > 0 && blk.length < 3000);
        vm.assertEq(h.blockRootOf(blk), DporMerkle.blockRoot(blk));
    }
}
