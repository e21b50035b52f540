#!/usr/bin/env node
import { run } from './run';

process.exitCode = await run(process.argv.slice(2), {
  fetch: globalThis.fetch,
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
});
