#!/usr/bin/env node
// `dpor-js`: the command line of @dpor/client. Every command prints one JSON line on
// stdout; errors go to stderr. Exit status: 0 success, 1 failure (a block that does
// not verify, a node error, a failed audit), 2 bad arguments.
//
//   dpor-js read NODE_MULTIADDR DEAL INDEX ROOT_U_HEX
//       a block of U, verified against ROOT_U: {"index","block","sealed_u","root_u"}
//   dpor-js too-large NODE_MULTIADDR
//       sends a frame whose prefix declares 8 MiB + 1 bytes (1 MiB of body, then the
//       write side closes); exit 0 if the node answers the error TooLarge: {"code","message"}
//   dpor-js audit --rpc-url URL --market ADDR --deal D --epoch E [--seed HEX] [--node MULTIADDR]
//       the public audit, the report of `dpor audit --json`; exit 1 if it fails
//   dpor-js digest-hash --chain-id ID --market ADDR --digest JSON [--price WEI --collateral WEI]
//   dpor-js sign --key-file F --chain-id ID --market ADDR --digest JSON [--price WEI --collateral WEI]
//       the EIP-712 hash of a digest (or, with --price and --collateral, of a resize)
//       and its signature by the key in F (hex, as `dpor` key files): {"hash","signature","signer"}
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { createPublicClient, http, isAddress, isHex, type Address, type Hex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { concat, hexToBytes, toHex, u32be } from './bytes.js'
import { digestFromJson, digestHash, resizeHash, signDigest, signResize, type Resize } from './eip712.js'
import { publicAudit } from './public-audit.js'
import { MAX_FRAME_BYTES, NodeClient, NodeError } from './wire.js'

class Usage extends Error {}

function out (v: unknown): void {
  process.stdout.write(JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x)) + '\n')
}

function uint (s: string | undefined, what: string): bigint {
  if (s === undefined || !/^[0-9]+$/.test(s)) throw new Usage(`${what} must be an unsigned integer`)
  return BigInt(s)
}

function address (s: string | undefined, what: string): Address {
  if (s === undefined || !isAddress(s)) throw new Usage(`${what} must be an address`)
  return s
}

async function read (args: string[]): Promise<number> {
  const [addr, dealText, indexText, rootHex] = args
  if (rootHex === undefined) throw new Usage('usage: dpor-js read NODE_MULTIADDR DEAL INDEX ROOT_U_HEX')
  const deal = uint(dealText, 'DEAL')
  const index = uint(indexText, 'INDEX')
  let rootU: Uint8Array
  try {
    rootU = hexToBytes(rootHex)
  } catch {
    throw new Usage('ROOT_U_HEX must be hex')
  }
  if (rootU.length !== 32) throw new Usage('ROOT_U_HEX must be 32 bytes')
  const node = await NodeClient.connect(addr!)
  try {
    const r = await node.read(deal, index, rootU)
    out({ index: Number(r.index), block: toHex(r.block), sealed_u: toHex(r.sealedU), root_u: toHex(r.rootU) })
    return 0
  } finally {
    await node.stop()
  }
}

async function tooLarge (args: string[]): Promise<number> {
  if (args[0] === undefined) throw new Usage('usage: dpor-js too-large NODE_MULTIADDR')
  const node = await NodeClient.connect(args[0])
  try {
    // The prefix declares one byte over the limit; 1 MiB of the body follows (four
    // Yamux windows: a node that stopped reading would leave us blocked). Not the
    // whole 8 MiB: see docs/PROTOCOL.md, Limits (js-libp2p and requests of 4 MB).
    const resp = await node.exchange(concat(u32be(MAX_FRAME_BYTES + 1), new Uint8Array(1 << 20))) as { Error?: { code?: string } }
    if (resp.Error?.code !== 'TooLarge') throw new Error(`expected the error TooLarge, got ${JSON.stringify(resp)}`)
    out(resp.Error)
    return 0
  } finally {
    await node.stop()
  }
}

async function audit (args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { 'rpc-url': { type: 'string' }, market: { type: 'string' }, deal: { type: 'string' }, epoch: { type: 'string' }, seed: { type: 'string' }, node: { type: 'string' } }
  })
  const rpc = values['rpc-url']
  if (rpc === undefined) throw new Usage('--rpc-url is required')
  const seed = values.seed
  if (seed !== undefined && !(isHex(seed) && seed.length === 66)) throw new Usage('--seed must be 32 bytes of 0x hex')
  const report = await publicAudit({
    client: createPublicClient({ transport: http(rpc) }),
    market: address(values.market, '--market'),
    deal: uint(values.deal, '--deal'),
    epoch: uint(values.epoch, '--epoch'),
    ...(seed !== undefined ? { seed: seed as Hex } : {}),
    ...(values.node !== undefined ? { node: values.node } : {})
  })
  out(report)
  if (!report.passed) {
    process.stderr.write(`dpor-js: audit FAILED: ${report.failures_total} of ${report.samples_checked} samples\n`)
    return 1
  }
  return 0
}

async function eip712 (args: string[], sign: boolean): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { 'key-file': { type: 'string' }, 'chain-id': { type: 'string' }, market: { type: 'string' }, digest: { type: 'string' }, price: { type: 'string' }, collateral: { type: 'string' } }
  })
  const chainId = uint(values['chain-id'], '--chain-id')
  const market = address(values.market, '--market')
  if (values.digest === undefined) throw new Usage('--digest JSON is required')
  let digest
  try {
    digest = digestFromJson(JSON.parse(values.digest) as Record<string, unknown>)
  } catch (e) {
    throw new Usage(`--digest: ${e instanceof Error ? e.message : String(e)}`)
  }
  const isResize = values.price !== undefined || values.collateral !== undefined
  const resize: Resize | undefined = isResize ? { digest, pricePerEpoch: uint(values.price, '--price'), collateral: uint(values.collateral, '--collateral') } : undefined
  const hash = resize ? resizeHash(resize, chainId, market) : digestHash(digest, chainId, market)
  if (!sign) {
    out({ hash })
    return 0
  }
  if (values['key-file'] === undefined) throw new Usage('--key-file is required')
  const key = readFileSync(values['key-file'], 'utf8').trim()
  const account = privateKeyToAccount((key.startsWith('0x') ? key : `0x${key}`) as Hex)
  const signature = resize ? await signResize(account, resize, chainId, market) : await signDigest(account, digest, chainId, market)
  out({ hash, signature, signer: account.address })
  return 0
}

async function main (argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv
  switch (cmd) {
    case 'read': return read(rest)
    case 'too-large': return tooLarge(rest)
    case 'audit': return audit(rest)
    case 'digest-hash': return eip712(rest, false)
    case 'sign': return eip712(rest, true)
    default: throw new Usage('usage: dpor-js read|too-large|audit|digest-hash|sign … (see the header of src/cli.ts or clients/js/README.md)')
  }
}

main(process.argv.slice(2)).then(
  code => process.exit(code),
  e => {
    if (e instanceof Usage) {
      process.stderr.write(`dpor-js: ${e.message}\n`)
      process.exit(2)
    }
    process.stderr.write(`dpor-js: ${e instanceof NodeError ? e.message : e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`)
    process.exit(1)
  }
)
