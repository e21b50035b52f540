import { defineConfig } from 'vitest/config';

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
          fileParallelism: false,
        },
      },
    ],
  },
});
