// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {MarketFixture} from "./utils/MarketFixture.sol";
import {LibHarness} from "./utils/Harness.sol";
import {DporMarket} from "../src/DporMarket.sol";
import {IDporMarket} from "../src/market/IDporMarket.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Digest, SampleProof} from "../src/lib/DporTypes.sol";
import {DporSampling} from "../src/lib/DporSampling.sol";

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
            IERC20(address(token)), EPOCH_BLOCKS, DISPUTE_WINDOW, BOND, SHARE_BPS, MAX_FAILURES, MIN_STAKE
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

    /// Reference implementation of ENCODING §8, written independently of DporSampling.
    function _reference(bytes32 seed, bytes32 dh, uint256 j, uint256 n, uint256 t, uint256 chunks)
        internal
        pure
        returns (uint256 tag, uint256 pos, uint256 ci)
    {
        uint256 total = 2 * n;
        for (uint256 l; l < 64; ++l) {
            if (t & (uint256(1) << l) != 0) total += uint256(2) ** (l + 1);
        }
        uint256 hh = uint256(keccak256(abi.encode(keccak256(bytes("dpor.epoch.v1")), seed, dh, j)));
        uint256 u = (hh % (uint256(1) << 128)) % total;
        ci = (hh >> 128) % chunks;
        if (u < 2 * n) return (0, u, ci);
        u -= 2 * n;
        for (uint256 l; l < 64; ++l) {
            if (t & (uint256(1) << l) == 0) continue;
            uint256 size = uint256(2) ** (l + 1);
            if (u < size) return (l + 1, u, ci);
            u -= size;
        }
        revert("unreachable");
    }

    /// Epoch positions are in range and match the reference.
    function testFuzz_epochSample_matchesReference(bytes32 seed, bytes32 dh, uint8 j, uint8 k, uint64 t, uint32 beta)
        public
        pure
    {
        uint256 n = uint256(1) << (k % 41);
        t = uint64(t % n);
        beta = uint32(1 + beta % (1 << 20));
        uint256 chunks = DporSampling.chunkCount(DporSampling.codedBlockBytes(beta));
        (uint256 tag, uint256 pos, uint256 ci) = DporSampling.epochSample(seed, dh, j, n, t, chunks);
        (uint256 rt, uint256 rp, uint256 rc) = _reference(seed, dh, j, n, t, chunks);
        vm.assertEq(tag, rt);
        vm.assertEq(pos, rp);
        vm.assertEq(ci, rc);
        vm.assertTrue(DporSampling.runExists(tag, t));
        vm.assertLt(pos, DporSampling.runSize(tag, n));
        vm.assertLt(ci, chunks);
    }
}
