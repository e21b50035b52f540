import { defineConfig } from 'vitest/config';

/** End-to-end suites with a latency bound. */
const TIMED = ['services/standalone/test/fairness.e2e.spec.ts'];
/** End-to-end suites run the services' bundles; this builds those older than their sources. */
const BUILD_STALE_BUNDLES = 'services/standalone/test/global-setup.ts';

export default defineConfig({
  test: {
    // Generous because e2e scenarios restart whole process groups on two-core machines.
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
    // Every read-model query the services make in any test must be served by an index (EXPLAIN QUERY PLAN).
    env: { OC_ASSERT_INDEXED_QUERIES: '1' },
    // The JSON report lets .ci/run print the plain "N passed, N failed" line CI reads.
    reporters: ['default', 'json'],
    outputFile: { json: '.vitest-results.json' },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit+int',
          include: ['packages/*/test/**/*.spec.ts', 'services/*/test/**/*.spec.ts'],
          exclude: ['**/*.e2e.spec.ts', '**/node_modules/**'],
        },
      },
      {
        // End-to-end suites start real services that share NATS subjects: one file at a time.
        extends: true,
        test: {
          name: 'e2e',
          include: ['services/*/test/**/*.e2e.spec.ts'],
          exclude: [...TIMED, '**/node_modules/**'],
          globalSetup: [BUILD_STALE_BUNDLES],
          fileParallelism: false,
        },
      },
      {
        // Suites that bound another client's latency measure this machine, so they run alone. Group 1 runs after
        // `unit+int` (group 0) and before `e2e`, which vitest runs last, file by file, as a project with one worker
        // at the default group order: so no other suite, nor what it started and is still stopping, runs beside them.
        extends: true,
        test: {
          name: 'timed',
          include: TIMED,
          globalSetup: [BUILD_STALE_BUNDLES],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
