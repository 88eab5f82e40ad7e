// @dpor/client: the TypeScript client of dpor (see clients/js/README.md).
export { dporMarketAbi, fileManifestAbi, testTokenAbi } from './abi.js'
export * from './audit.js'
export * from './bytes.js'
export * from './chain.js'
export * from './eip712.js'
export * from './merkle.js'
export * from './public-audit.js'
export * from './wire.js'
