// The public audit's pure part (docs/SCHEME.md §9, docs/ENCODING.md §6–7;
// `dpor_core::audit` and the transcript of `dpor audit` in Rust): the runs a digest
// commits to and their names, the positions an audit asks, the check of each returned
// sample, and the transcript hash. Everything here is deterministic.
import type { Hex } from 'viem'
import { concat, hexToBytes, keccak, toHex, u32be, u64be, word, wordToBigInt } from './bytes.js'
import type { Digest } from './eip712.js'
import { blockRoot, MerkleError, runLeaf, verifyPath } from './merkle.js'
import type { WireRun, WireSample } from './wire.js'

/** keccak256("dpor.audit.v1"), the domain of the audit positions. */
export const AUDIT_DOMAIN: Uint8Array = keccak(new TextEncoder().encode('dpor.audit.v1'))
/** Domain of the audit transcript hash. */
export const TRANSCRIPT_DOMAIN = 'dpor.audit-transcript.v1'

/** A run's label as `dpor audit` prints it: `C` for tag 0, `H<ℓ>` for tag ℓ + 1. */
export function runLabel (tag: number): string {
  return tag === 0 ? 'C' : `H${tag - 1}`
}

/** One run of a digest: its tag, size in coded blocks (a power of two) and root. */
export interface DigestRun {
  /** 0 for C, ℓ + 1 for level ℓ. */
  tag: number
  /** Coded blocks in the run: 2N for C, 2^(ℓ+1) for level ℓ. */
  size: bigint
  /** The run's Merkle root. */
  root: Hex
}

/** The runs `d` commits to in run order (C, then the filled levels ascending): `Digest::runs`. */
export function digestRuns (d: Digest): DigestRun[] {
  const out: DigestRun[] = [{ tag: 0, size: 2n * d.numBlocks, root: d.rootC }]
  let i = 0
  for (let level = 0; level < 64; level++) {
    if ((d.writeCount >> BigInt(level)) & 1n) {
      const root = d.levelRoots[i++]
      if (root !== undefined) out.push({ tag: level + 1, size: 2n << BigInt(level), root })
    }
  }
  return out
}

/** Checks the digest's shape as `Digest::validate` does (N a power of two, t < N, one root per filled level); throws otherwise. */
export function validateDigest (d: Digest): void {
  const n = d.numBlocks
  if (n === 0n || (n & (n - 1n)) !== 0n) throw new Error(`numBlocks ${n} is not a power of two`)
  if (d.writeCount >= n) throw new Error(`writeCount ${d.writeCount} is not below numBlocks ${n}`)
  const filled = d.writeCount.toString(2).split('').filter(c => c === '1').length
  if (d.levelRoots.length !== filled) throw new Error(`${d.levelRoots.length} level roots for ${filled} filled levels`)
}

const U64_MAX = (1n << 64n) - 1n

/** The build time of run `tag` (`dpor_core::state::run_built_at`): rebuilds·N for C, rebuilds·N + levelStart(t, ℓ) + 2^ℓ for a filled level; `undefined` for an empty level or on u64 overflow. */
export function runBuiltAt (rebuildCount: bigint, logBlocks: number, writeCount: bigint, tag: number): bigint | undefined {
  if (logBlocks >= 64) return undefined
  const base = rebuildCount * (1n << BigInt(logBlocks))
  if (base > U64_MAX) return undefined
  if (tag === 0) return base
  const level = tag - 1
  if (level >= 64 || ((writeCount >> BigInt(level)) & 1n) === 0n) return undefined
  const mask = (1n << BigInt(level + 1)) - 1n
  const v = base + (writeCount & ~mask & U64_MAX) + (1n << BigInt(level))
  return v > U64_MAX ? undefined : v
}

/** The runs of `d` with their wire names (`Digest::run_ids`), in run order. */
export function runIds (d: Digest): Array<DigestRun & { run: WireRun }> {
  const logBlocks = d.numBlocks.toString(2).length - 1
  return digestRuns(d).flatMap(r => {
    const builtAt = runBuiltAt(d.rebuildCount, logBlocks, d.writeCount, r.tag)
    return builtAt === undefined ? [] : [{ ...r, run: { tag: r.tag, built_at: builtAt } }]
  })
}

/**
 * The positions a public audit asks in a run of `size` coded blocks: all of them if
 * size ≤ λ, else λ positions `keccak256(abi.encode(AUDIT_DOMAIN, seed, digestHash, tag, j)) mod size`
 * (with replacement; `audit_positions`).
 */
export function auditPositions (seed: Hex, digestHash: Hex, tag: number, size: bigint, lambda: number): bigint[] {
  if (size <= BigInt(lambda)) return Array.from({ length: Number(size) }, (_, i) => BigInt(i))
  const mask = size - 1n
  const prefix = concat(AUDIT_DOMAIN, hexToBytes(seed), hexToBytes(digestHash), word(tag))
  return Array.from({ length: lambda }, (_, j) => wordToBigInt(keccak(concat(prefix, word(j)))) & mask)
}

/** The positions an audit of `d` asks, per run in run order (`audit_plan`). */
export function auditPlan (d: Digest, digestHash: Hex, seed: Hex, lambda: number): Array<{ tag: number, positions: bigint[] }> {
  return digestRuns(d).map(r => ({ tag: r.tag, positions: auditPositions(seed, digestHash, r.tag, r.size, lambda) }))
}

/** Bytes of a coded block for blocks of β bytes: 8·s, s = 1 + ⌈β/7⌉ (4696 for β = 4096). */
export function codedBlockBytes (blockBytes: number): number {
  return 8 * (1 + Math.ceil(blockBytes / 7))
}

/** A failed sample (`SampleFailure`), its fault as `dpor audit` prints it. */
export interface SampleFailure {
  /** The run tag. */
  tag: number
  /** The position asked. */
  position: bigint
  /** What was wrong: `missing`, `returned position P instead`, `block of G bytes, expected E`, `Merkle path: …`. */
  fault: string
}

/** Checks one returned sample against its run's root (`check_sample`): returns the fault, or `undefined` if it verifies. */
export function checkSample (root: Hex, size: bigint, expectedBytes: number, position: bigint, sample: WireSample | undefined): string | undefined {
  if (sample === undefined) return 'missing'
  if (sample.position !== position) return `returned position ${sample.position} instead`
  if (sample.block.length !== expectedBytes) return `block of ${sample.block.length} bytes, expected ${expectedBytes}`
  const depth = size.toString(2).length - 1
  try {
    verifyPath(hexToBytes(root), depth, position, runLeaf(position, blockRoot(sample.block)), sample.path)
  } catch (e) {
    if (e instanceof MerkleError) return `Merkle path: ${e.message}`
    throw e
  }
  return undefined
}

/** The verdict on an audit's answers (`AuditOutcome`). */
export interface AuditOutcome {
  /** Samples checked (every position of every run). */
  checked: number
  /** Failed samples, in run order. */
  failures: SampleFailure[]
}

/** Verifies the answers (per run tag, the samples in the order asked) against `d` (`verify_audit`). */
export function verifyAudit (d: Digest, digestHash: Hex, seed: Hex, lambda: number, codedBytes: number, answers: ReadonlyMap<number, readonly WireSample[]>): AuditOutcome {
  const out: AuditOutcome = { checked: 0, failures: [] }
  const runs = digestRuns(d)
  auditPlan(d, digestHash, seed, lambda).forEach(({ tag, positions }, i) => {
    const run = runs[i]!
    const answer = answers.get(tag)
    positions.forEach((p, j) => {
      out.checked += 1
      const fault = checkSample(run.root, run.size, codedBytes, p, answer?.[j])
      if (fault !== undefined) out.failures.push({ tag, position: p, fault })
    })
  })
  return out
}

/**
 * The transcript hash of an audit (`transcript_hash` of `dpor audit`): keccak256 of
 * `"dpor.audit-transcript.v1" ‖ digest hash ‖ seed ‖ u64be(runs)` then per run
 * `u32be(tag) ‖ u64be(built_at) ‖ u64be(samples)` and per returned sample
 * `u64be(position) ‖ keccak256(block) ‖ keccak256(path[0] ‖ … ‖ path[d−1])`.
 */
export function transcriptHash (digestHash: Hex, seed: Hex, runs: ReadonlyArray<{ run: WireRun, samples: readonly WireSample[] }>): Hex {
  const parts: Uint8Array[] = [new TextEncoder().encode(TRANSCRIPT_DOMAIN), hexToBytes(digestHash), hexToBytes(seed), u64be(runs.length)]
  for (const { run, samples } of runs) {
    parts.push(u32be(run.tag), u64be(run.built_at), u64be(samples.length))
    for (const s of samples) parts.push(u64be(s.position), keccak(s.block), keccak(concat(...s.path)))
  }
  return toHex(keccak(concat(...parts)))
}
