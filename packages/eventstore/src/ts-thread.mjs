// Starts a TypeScript thread entry from the sources (tests, tsx): the thread registers tsx for itself, then
// imports the entry (`startThread`). A bundle starts its built entry directly and never loads this file.
import { workerData } from 'node:worker_threads';

const { register } = await import('tsx/esm/api');
register();
await import(workerData.entry);
