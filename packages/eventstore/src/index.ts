export * from './port';
export * from './decider';
export * from './snapshots';
export { EXIT_CORRUPT_LOG, EventLogCorruptError, isCorruptionError, openRebuildable } from './sqlite-files';
export * from './sqlite';
export * from './kurrentdb';
export { startThread, startWorker, type WorkerCalls } from './worker-calls';
export { ensurePrivateDir, privateFiles } from './data-dir';
export { traceEventStore, type TracedEventStoreOptions } from './traced';
