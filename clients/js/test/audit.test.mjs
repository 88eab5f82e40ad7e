// The audit's pure parts against their definitions (docs/ENCODING.md §6–7,
// dpor_core::audit) computed here another way: viem's ABI encoder for the positions,
// the spelled-out transcript encoding, and the run names of docs/PROTOCOL.md.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { encodeAbiParameters, keccak256, toBytes } from 'viem'
import {
  auditPlan, auditPositions, checkSample, codedBlockBytes, digestRuns, runBuiltAt, runIds, runLabel, transcriptHash,
  validateDigest, verifyAudit, blockRoot, runLeaf, node, toHex, hexToBytes
} from '../dist/index.js'

const seed = '0x' + '5e'.repeat(32)
const dh = '0x' + 'd1'.repeat(32)

test('positions: a run of at most λ blocks whole, else keccak256(abi.encode(domain, seed, hash, tag, j)) mod size', () => {
  assert.deepEqual(auditPositions(seed, dh, 1, 4n, 4), [0n, 1n, 2n, 3n])
  const domain = keccak256(toBytes('dpor.audit.v1'))
  const got = auditPositions(seed, dh, 0, 1024n, 16)
  assert.equal(got.length, 16)
  got.forEach((p, j) => {
    const h = BigInt(keccak256(encodeAbiParameters(['bytes32', 'bytes32', 'bytes32', 'uint256', 'uint256'].map(type => ({ type })), [domain, seed, dh, 0n, BigInt(j)])))
    assert.equal(p, h % 1024n)
  })
  assert.notDeepEqual(auditPositions(seed, dh, 1, 1024n, 16), got, 'the tag is hashed')
})

const digest = {
  dealId: 1n, version: 2n, numBlocks: 8n, writeCount: 5n, rebuildCount: 2n,
  rootU: '0x' + '11'.repeat(32), rootC: '0x' + '22'.repeat(32), levelRoots: ['0x' + '33'.repeat(32), '0x' + '44'.repeat(32)]
}

test('runs and their names: C, then the filled levels; built_at as docs/PROTOCOL.md defines it', () => {
  validateDigest(digest)
  assert.deepEqual(digestRuns(digest).map(r => [runLabel(r.tag), r.size]), [['C', 16n], ['H0', 2n], ['H2', 8n]])
  // t = 5 = 0b101, two rebuilds of N = 8 (16 writes before): C built at 16; level 0
  // holds write 4 (built at 16 + 5); level 2 holds writes 0..3 (built at 16 + 4).
  assert.deepEqual(runIds(digest).map(r => [r.run.tag, r.run.built_at]), [[0, 16n], [1, 21n], [3, 20n]])
  assert.equal(runBuiltAt(2n, 3, 5n, 2), undefined, 'level 1 is empty')
  assert.throws(() => validateDigest({ ...digest, levelRoots: [] }), /2 filled levels/)
  assert.throws(() => validateDigest({ ...digest, numBlocks: 6n }), /power of two/)
  assert.equal(codedBlockBytes(4096), 4696)
})

test('the empty transcript is keccak256(domain ‖ 64 zero bytes ‖ u64be(0))', () => {
  const zero = '0x' + '00'.repeat(32)
  const want = keccak256(new Uint8Array([...toBytes('dpor.audit-transcript.v1'), ...new Uint8Array(72)]))
  assert.equal(transcriptHash(zero, zero, []), want)
})

test('the transcript binds blocks, paths, positions and run names', () => {
  const s = (position, fill) => ({ position, block: new Uint8Array(4696).fill(fill), path: [hexToBytes('0x' + '0a'.repeat(32))] })
  const runs = () => [{ run: { tag: 0, built_at: 0n }, samples: [s(3n, 1), s(9n, 2)] }, { run: { tag: 3, built_at: 12n }, samples: [s(0n, 3)] }]
  const base = transcriptHash(dh, seed, runs())
  assert.equal(transcriptHash(dh, seed, runs()), base)
  const r1 = runs(); r1[0].samples[1].block[100] ^= 1
  const r2 = runs(); r2[1].run.built_at = 13n
  const r3 = runs(); r3[0].samples.pop()
  const r4 = runs(); r4[0].samples[0].position = 4n
  for (const r of [r1, r2, r3, r4]) assert.notEqual(transcriptHash(dh, seed, r), base)
})

test('verifyAudit passes the right blocks and names each fault as dpor audit does', () => {
  // A level of 2 coded blocks with a real tree: root = node(leaf0, leaf1).
  const coded = codedBlockBytes(4096)
  const blocks = [new Uint8Array(coded).fill(7), new Uint8Array(coded).fill(9)]
  const leaves = blocks.map((b, i) => runLeaf(BigInt(i), blockRoot(b)))
  const root = toHex(node(leaves[0], leaves[1]))
  const d = { ...digest, numBlocks: 2n, writeCount: 1n, rebuildCount: 0n, levelRoots: [root] }
  const good = [0, 1].map(i => ({ position: BigInt(i), block: blocks[i], path: [leaves[1 - i]] }))
  assert.deepEqual(auditPlan(d, dh, seed, 4)[1], { tag: 1, positions: [0n, 1n] })
  const answers = new Map([[1, good]])
  const out = verifyAudit(d, dh, seed, 4, coded, answers)
  // C (4 coded blocks, root 0x22…) has no answer: 4 missing; the level passes.
  assert.equal(out.checked, 6)
  assert.deepEqual(out.failures.map(f => [f.tag, f.fault]), [[0, 'missing'], [0, 'missing'], [0, 'missing'], [0, 'missing']])
  const zeroed = { ...good[1], block: new Uint8Array(coded) }
  assert.equal(checkSample(root, 2n, coded, 1n, zeroed), 'Merkle path: Merkle path does not match the root')
  assert.equal(checkSample(root, 2n, coded, 0n, good[1]), 'returned position 1 instead')
  assert.equal(checkSample(root, 2n, coded, 1n, { ...good[1], block: new Uint8Array(0) }), 'block of 0 bytes, expected 4696')
  assert.equal(checkSample(root, 2n, coded, 1n, { ...good[1], path: [] }), 'Merkle path: path has 0 siblings, the tree has depth 1')
  assert.equal(checkSample(root, 2n, coded, 1n, undefined), 'missing')
  assert.equal(checkSample(root, 2n, coded, 1n, good[1]), undefined)
})
