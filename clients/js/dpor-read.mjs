#!/usr/bin/env node
// A second, independent client of the dpor wire protocol, written from docs/PROTOCOL.md
// and docs/ENCODING.md alone (no Rust type definitions): it dials a dpor-node over
// libp2p (TCP + Noise + Yamux), asks `Read { deal, index }` on protocol /dpor/1, and
// verifies the answer against a rootU the caller trusts (ENCODING §2 block root,
// §4 U leaf, path folded with the index bits).
//
//   node clients/js/dpor-read.mjs NODE_MULTIADDR DEAL INDEX ROOT_U_HEX
//   node clients/js/dpor-read.mjs --too-large NODE_MULTIADDR
//
// Prints one JSON line {"index", "block" (hex), "sealed_u", "root_u"} and exits 0 when
// the block verifies; prints the reason on stderr and exits 1 when it does not (or the
// node answers an error), 2 on bad arguments. With --too-large it sends a frame whose
// prefix declares 8 MiB + 1 body bytes (over the limit) with 1 MiB of body, closes its
// write side, and exits 0 after printing {"code", "message"} if the node answers the
// error TooLarge, 1 otherwise. The test verifier-cli/tests/e2e_hygiene.rs runs both against a real
// node.

import { createLibp2p } from 'libp2p'
import { tcp } from '@libp2p/tcp'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { multiaddr } from '@multiformats/multiaddr'
import { Encoder } from 'cbor-x'
import { keccak_256 } from '@noble/hashes/sha3.js'

// js-libp2p 3 calls Promise.withResolvers (Node.js 22+); this is its standard
// definition, for Node.js 20.
if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function withResolvers () {
    let resolve, reject
    const promise = new this((res, rej) => { resolve = res; reject = rej })
    return { promise, resolve, reject }
  }
}

const PROTOCOL = '/dpor/1'
const MAX_FRAME_BYTES = 8 * 1024 * 1024 // docs/PROTOCOL.md, Limits

// CBOR as docs/PROTOCOL.md "CBOR mapping" says: maps with text keys (no cbor-x record
// extension), byte strings for bytes.
const cbor = new Encoder({ useRecords: false, mapsAsObjects: true, tagUint8Array: false })

function fail (msg, code = 1) {
  process.stderr.write(`dpor-read: ${msg}\n`)
  process.exit(code)
}

function hexToBytes (hex) {
  const h = hex.startsWith('0x') ? hex.slice(2) : hex
  if (!/^[0-9a-fA-F]*$/.test(h) || h.length % 2 !== 0) throw new Error(`not hex: ${hex}`)
  return Uint8Array.from(h.match(/../g) ?? [], b => parseInt(b, 16))
}
const toHex = b => '0x' + Buffer.from(b).toString('hex')
const concat = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let o = 0
  for (const p of parts) { out.set(p, o); o += p.length }
  return out
}
const u64be = n => { const b = new Uint8Array(8); new DataView(b.buffer).setBigUint64(0, BigInt(n)); return b }
const equal = (a, b) => a.length === b.length && a.every((x, i) => x === b[i])

// ENCODING §2: a block's root over its 128-byte chunks.
function blockRoot (block) {
  const chunks = Math.max(1, Math.ceil(block.length / 128))
  let width = 1
  while (width < chunks) width *= 2
  let level = []
  for (let c = 0; c < width; c++) {
    if (c < chunks) {
      const chunk = new Uint8Array(128)
      chunk.set(block.subarray(c * 128, Math.min(block.length, (c + 1) * 128)))
      level.push(keccak_256(concat([0x00], chunk)))
    } else {
      level.push(new Uint8Array(32)) // padding leaf bytes32(0)
    }
  }
  while (level.length > 1) {
    const next = []
    for (let i = 0; i < level.length; i += 2) next.push(keccak_256(concat([0x01], level[i], level[i + 1])))
    level = next
  }
  return level[0]
}

// ENCODING §4 + §2: U leaf, then the path from the leaf up, bit h of the index saying
// whether the node at height h is a right child.
function uRoot (index, block, sealedU, path) {
  let node = keccak_256(concat([0x03], u64be(index), blockRoot(block), sealedU))
  let i = BigInt(index)
  for (const sibling of path) {
    node = (i & 1n) ? keccak_256(concat([0x01], sibling, node)) : keccak_256(concat([0x01], node, sibling))
    i >>= 1n
  }
  if (i !== 0n) throw new Error('the path is too short for the index')
  return node
}

// One request/response on a new stream: u32be length + CBOR body each way.
async function request (libp2p, addr, req) {
  const body = cbor.encode(req)
  return exchange(libp2p, addr, concat(u64be(body.length).subarray(4), body))
}

// Sends one whole frame, closes the write side, then reads and decodes the answer.
async function exchange (libp2p, addr, frame) {
  const stream = await libp2p.dialProtocol(addr, PROTOCOL)
  stream.send(frame)
  await stream.close() // our write side: the request is complete
  const chunks = []
  let got = 0
  for await (const chunk of stream) {
    const bytes = chunk.subarray ? chunk.subarray() : chunk
    chunks.push(bytes)
    got += bytes.length
    if (got > 4 + MAX_FRAME_BYTES) throw new Error('response over the frame limit')
  }
  const all = concat(...chunks)
  if (all.length < 4) throw new Error('the stream ended before the length prefix')
  const len = new DataView(all.buffer, all.byteOffset).getUint32(0)
  if (all.length !== 4 + len) throw new Error(`response frame: prefix says ${len} bytes, got ${all.length - 4}`)
  return cbor.decode(all.subarray(4))
}

// A libp2p node as the dpor node speaks: TCP, Noise, Yamux.
function newNode () {
  return createLibp2p({
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()]
  })
}

// --too-large: a frame whose prefix and body are one byte over the limit.
async function tooLarge (addrText) {
  let addr
  try {
    addr = multiaddr(addrText)
  } catch (e) {
    fail(`bad arguments: ${e.message}`, 2)
  }
  const libp2p = await newNode()
  try {
    // The prefix declares one byte over the limit; 1 MiB of the body follows (four
    // Yamux windows: a node that stopped reading would leave us blocked), then our
    // write side closes. (Not the whole 8 MiB: in our runs a js-libp2p request of
    // 4,000,000 bytes or more lost its connection to the node, over the limit or not;
    // 3,000,000 bytes did not. See docs/PROTOCOL.md, Limits.)
    const declared = MAX_FRAME_BYTES + 1
    const resp = await exchange(libp2p, addr, concat(u64be(declared).subarray(4), new Uint8Array(1 << 20)))
    if (resp.Error?.code !== 'TooLarge') fail(`expected the error TooLarge, got ${JSON.stringify(resp)}`)
    process.stdout.write(JSON.stringify(resp.Error) + '\n')
  } finally {
    await libp2p.stop()
  }
}

async function main () {
  if (process.argv[2] === '--too-large') return tooLarge(process.argv[3])
  const [addrText, dealText, indexText, rootHex] = process.argv.slice(2)
  if (!rootHex) fail('usage: dpor-read.mjs NODE_MULTIADDR DEAL INDEX ROOT_U_HEX', 2)
  let addr, deal, index, rootU
  try {
    addr = multiaddr(addrText)
    deal = Number(dealText)
    index = Number(indexText)
    rootU = hexToBytes(rootHex)
    if (!Number.isSafeInteger(deal) || !Number.isSafeInteger(index) || rootU.length !== 32) throw new Error('bad deal, index or rootU')
  } catch (e) {
    fail(`bad arguments: ${e.message}`, 2)
  }
  const libp2p = await newNode()
  try {
    // Request::Read is a struct variant: a one-key map {variant: {field: value}}.
    const resp = await request(libp2p, addr, { Read: { deal, index } })
    if (resp.Error) fail(`the node answered ${resp.Error.code}: ${resp.Error.message}`)
    const b = resp.Block
    if (!b) fail(`unexpected answer: ${JSON.stringify(Object.keys(resp))}`)
    if (Number(b.index) !== index) fail(`answer for index ${b.index}, asked ${index}`)
    const block = new Uint8Array(b.block)
    const sealedU = new Uint8Array(b.sealed_u)
    const path = b.path.map(p => new Uint8Array(p))
    if (sealedU.length !== 32 || path.some(p => p.length !== 32)) fail('hashes must be 32-byte byte strings')
    const got = uRoot(index, block, sealedU, path)
    if (!equal(got, rootU)) fail(`the block does not verify: its path leads to ${toHex(got)}, not rootU ${toHex(rootU)}`)
    process.stdout.write(JSON.stringify({ index, block: toHex(block), sealed_u: toHex(sealedU), root_u: toHex(got) }) + '\n')
  } finally {
    await libp2p.stop()
  }
}

main().then(() => process.exit(0), e => fail(e.stack ?? String(e)))
