// The TypeScript client against the shared vectors that dpor-core writes
// (contracts/test/fixtures/vectors.json, `cargo run -p dpor-core --example gen_vectors`;
// script/test checks that the committed file is fresh and the Solidity tests read it):
// block roots, run paths, EIP-712 digest and resize hashes.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { privateKeyToAccount } from 'viem/accounts'
import { recoverTypedDataAddress } from 'viem'
import {
  blockRoot, digestFromJson, digestHash, domain, eip712Types, hexToBytes, recoverDigestSigner, recoverResizeSigner, resizeHash, runLeaf,
  signDigest, signResize, toHex, verifyPath, MerkleError
} from '../dist/index.js'
import * as eip712Entry from '@dpor/client/eip712'

const v = JSON.parse(readFileSync(new URL('../../../contracts/test/fixtures/vectors.json', import.meta.url), 'utf8'))
const { chainId, verifyingContract } = v.domain

test('block roots equal dpor-core\'s', () => {
  assert.ok(v.blockRoots.length >= 5)
  for (const { data, root } of v.blockRoots) assert.equal(toHex(blockRoot(hexToBytes(data))), root, `block of ${(data.length - 2) / 2} bytes`)
})

test('run paths verify against the run roots, and a changed sibling, leaf or length does not', () => {
  for (const p of v.runProofs) {
    const depth = Math.log2(p.size)
    const path = p.path.map(hexToBytes)
    const leaf = runLeaf(BigInt(p.position), hexToBytes(p.blockRoot))
    verifyPath(hexToBytes(p.root), depth, BigInt(p.position), leaf, path)
    const bad = path.map(x => x.slice())
    bad[0][5] ^= 1
    assert.throws(() => verifyPath(hexToBytes(p.root), depth, BigInt(p.position), leaf, bad), e => e instanceof MerkleError && e.message === 'Merkle path does not match the root')
    assert.throws(() => verifyPath(hexToBytes(p.root), depth, BigInt(p.position) ^ 1n, leaf, path), /does not match/)
    assert.throws(() => verifyPath(hexToBytes(p.root), depth, BigInt(p.position), leaf, path.slice(1)), /path has \d+ siblings, the tree has depth/)
    assert.throws(() => verifyPath(hexToBytes(p.root), depth, BigInt(p.size), leaf, path), /is outside a tree of/)
  }
})

test('digest hashes equal dpor-core\'s (and so the contract\'s)', () => {
  assert.ok(v.digests.length >= 2)
  for (const d of v.digests) assert.equal(digestHash(digestFromJson(d), chainId, verifyingContract), d.digestHash, `digest v${d.version}`)
  // Another chain or market: another hash (the domain binds them).
  const d0 = digestFromJson(v.digests[0])
  assert.notEqual(digestHash(d0, chainId + 1, verifyingContract), v.digests[0].digestHash)
  assert.notEqual(digestHash({ ...d0, version: d0.version + 1n }, chainId, verifyingContract), v.digests[0].digestHash)
})

test('resize hashes equal dpor-core\'s, uint128 extremes included', () => {
  assert.ok(v.resizes.length >= 2)
  for (const r of v.resizes) {
    const resize = { digest: digestFromJson(v.digests[r.digestIndex]), pricePerEpoch: BigInt(r.pricePerEpoch), collateral: BigInt(r.collateral) }
    assert.equal(resizeHash(resize, chainId, verifyingContract), r.signingHash)
  }
})

test('signatures are r‖s‖v over the EIP-712 hash and recover to the signer', async () => {
  // anvil's first development key (public).
  const account = privateKeyToAccount('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcc5a7f0de3b63a2b1')
  const d = digestFromJson(v.digests[0])
  const sig = await signDigest(account, d, chainId, verifyingContract)
  assert.match(sig, /^0x[0-9a-f]{128}(1b|1c)$/, 'v = 27 or 28')
  const signer = await recoverTypedDataAddress({ domain: domain(chainId, verifyingContract), types: eip712Types, primaryType: 'Digest', message: { ...d, levelRoots: [...d.levelRoots] }, signature: sig })
  assert.equal(signer, account.address)
  assert.equal(await signDigest(account, d, chainId, verifyingContract), sig, 'deterministic (RFC 6979)')
  const r = v.resizes[0]
  const rsig = await signResize(account, { digest: d, pricePerEpoch: BigInt(r.pricePerEpoch), collateral: BigInt(r.collateral) }, chainId, verifyingContract)
  assert.notEqual(rsig, sig)
})

test('recoverDigestSigner / recoverResizeSigner give the signer, and another address for another message or domain', async () => {
  const account = privateKeyToAccount('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcc5a7f0de3b63a2b1')
  const d = digestFromJson(v.digests[0])
  const sig = await signDigest(account, d, chainId, verifyingContract)
  assert.equal(await recoverDigestSigner(d, sig, chainId, verifyingContract), account.address)
  assert.notEqual(await recoverDigestSigner({ ...d, writeCount: d.writeCount + 1n }, sig, chainId, verifyingContract), account.address)
  assert.notEqual(await recoverDigestSigner(d, sig, chainId + 1, verifyingContract), account.address)
  const r = { digest: d, pricePerEpoch: BigInt(v.resizes[0].pricePerEpoch), collateral: BigInt(v.resizes[0].collateral) }
  const rsig = await signResize(account, r, chainId, verifyingContract)
  assert.equal(await recoverResizeSigner(r, rsig, chainId, verifyingContract), account.address)
  assert.notEqual(await recoverDigestSigner(d, rsig, chainId, verifyingContract), account.address, 'a resize signature is not a digest signature')
  await assert.rejects(recoverDigestSigner(d, '0x1234', chainId, verifyingContract))
})

test('the browser-safe entry @dpor/client/eip712 exports the EIP-712 functions (the dashboard imports it)', () => {
  for (const f of ['digestHash', 'resizeHash', 'recoverDigestSigner', 'recoverResizeSigner', 'digestFromJson']) assert.equal(typeof eip712Entry[f], 'function', f)
  assert.equal(eip712Entry.digestHash(digestFromJson(v.digests[0]), chainId, verifyingContract), v.digests[0].digestHash)
  assert.equal(eip712Entry.NodeClient, undefined, 'no libp2p in this entry')
})

test('digest JSON is checked', () => {
  assert.throws(() => digestFromJson({ ...v.digests[0], rootU: '0x12' }), /rootU/)
  assert.throws(() => digestFromJson({ ...v.digests[0], levelRoots: ['0x12'] }), /levelRoots/)
  assert.throws(() => digestFromJson({ ...v.digests[0], version: undefined }), /version/)
})
