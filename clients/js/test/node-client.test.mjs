// NodeClient against fake nodes in this process (js-libp2p servers on loopback that
// speak /dpor/1 wrongly on purpose): an answer that does not verify is refused, a
// Samples answer for another run or with a missing sample is refused, and a node that
// never answers fails the request at the timeout instead of blocking.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createLibp2p } from 'libp2p'
import { tcp } from '@libp2p/tcp'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { NodeClient, NodeError, PROTOCOL, blockRoot, uLeaf, node, toHex, encodeBody, decodeBody, u32be, concat } from '../dist/index.js'

/** A fake node: `answer(request)` returns the body to send, or undefined to stay silent. */
async function fakeNode (answer) {
  const server = await createLibp2p({ addresses: { listen: ['/ip4/127.0.0.1/tcp/0'] }, transports: [tcp()], connectionEncrypters: [noise()], streamMuxers: [yamux()] })
  await server.handle(PROTOCOL, async stream => {
    const chunks = []
    for await (const c of stream) chunks.push(c instanceof Uint8Array ? c : c.subarray())
    const all = concat(...chunks)
    const body = answer(decodeBody(all.subarray(4)))
    if (body === undefined) return // never answer (the stream stays open)
    const bytes = encodeBody(body)
    stream.send(concat(u32be(bytes.length), bytes))
    await stream.close()
  })
  return server
}

// U of two blocks: block 0 and 1, sealed checksums all zero.
const blocks = [new Uint8Array(4096).fill(1), new Uint8Array(4096).fill(2)]
const sealed = new Uint8Array(32)
const leaves = blocks.map((b, i) => uLeaf(BigInt(i), blockRoot(b), sealed))
const rootU = node(leaves[0], leaves[1])

test('a verified read, and a tampered block or a wrong root refused', async () => {
  let tamper = false
  const server = await fakeNode(req => {
    const i = req.Read.index
    const block = blocks[i].slice()
    if (tamper) block[10] ^= 1
    return { Block: { index: i, block, sealed_u: sealed, path: [leaves[1 - i]] } }
  })
  const client = await NodeClient.connect(server.getMultiaddrs()[0])
  try {
    const r = await client.read(1, 1, rootU)
    assert.deepEqual([...r.block], [...blocks[1]])
    assert.equal(toHex(r.rootU), toHex(rootU))
    const wrong = rootU.slice()
    wrong[0] ^= 1
    await assert.rejects(client.read(1, 0, wrong), /does not verify/)
    tamper = true
    await assert.rejects(client.read(1, 0, rootU), /does not verify/)
  } finally {
    await client.stop()
    await server.stop()
  }
})

test('node errors come back as NodeError with their code', async () => {
  const server = await fakeNode(() => ({ Error: { code: 'UnknownDeal', message: 'no deal 9' } }))
  const client = await NodeClient.connect(server.getMultiaddrs()[0])
  try {
    await assert.rejects(client.read(9, 0, rootU), e => e instanceof NodeError && e.code === 'UnknownDeal')
  } finally {
    await client.stop()
    await server.stop()
  }
})

test('Samples answers for another run, or with fewer samples than asked, are refused', async () => {
  let mode = 'run'
  const server = await fakeNode(req => {
    const { run, positions } = req.Samples
    const samples = positions.map(p => ({ position: p, block: new Uint8Array(8), path: [] }))
    if (mode === 'run') return { Samples: { run: { tag: run.tag, built_at: run.built_at + 1 }, samples } }
    if (mode === 'short') return { Samples: { run, samples: samples.slice(1) } }
    return { Samples: { run, samples } }
  })
  const client = await NodeClient.connect(server.getMultiaddrs()[0])
  try {
    const run = { tag: 1, built_at: 5n }
    await assert.rejects(client.samples(1, run, [0n, 1n]), /answered for run 1@6, asked 1@5/)
    mode = 'short'
    await assert.rejects(client.samples(1, run, [0n, 1n]), /1 samples answered, 2 asked/)
    mode = 'ok'
    const got = await client.samples(1, run, [0n, 1n])
    assert.deepEqual(got.map(s => s.position), [0n, 1n])
  } finally {
    await client.stop()
    await server.stop()
  }
})

test('a node that never answers fails the request at the timeout', async () => {
  const server = await fakeNode(() => undefined)
  const client = await NodeClient.connect(server.getMultiaddrs()[0])
  client.timeoutMs = 500
  try {
    await assert.rejects(client.status(1), /no answer from the node within 500 ms/)
  } finally {
    await client.stop()
    await server.stop()
  }
})
