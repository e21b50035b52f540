import { copyFileSync, readFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { builtinModules } from 'node:module';
import type { Options } from 'tsup';

/**
 * Scripts run in a worker thread or a child process, loaded by path (`new URL('./x.mjs', import.meta.url)`,
 * `import.meta.dirname`) rather than imported, so the bundler does not see them: each is copied beside a
 * bundle that contains the module that starts it.
 */
const WORKERS: Record<string, string> = {
  'packages/eventstore/src/sqlite.ts': 'eventstore-writer.mjs',
  'packages/readmodel/src/sqlite.ts': 'readmodel-writer.mjs',
  'services/video/src/adapters/ffmpeg-renderer.ts': 'ffmpeg-spawner.mjs',
  'services/chat/src/adapters/tokenizer.ts': 'token-counter.mjs',
};

/** Builtins of later Node versions that bundled packages probe for inside a try block (undici: `node:sqlite`). */
const LATER_BUILTINS = new Set(['sqlite']);

const packageName = (specifier: string) =>
  specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;

/**
 * npm packages left out of bundles: native addons and packages that find files of their own beside them
 * (better-sqlite3, ffmpeg, the KurrentDB bridge, MongoDB's optional natives), `reflect-metadata` (it must run
 * before any decorator, so it is the bundle's first import), the NATS client (Nest loads it by name at
 * run time; bundled as well, there would be two copies), and large adapters loaded only when configured
 * (the OpenTelemetry SDK, S3, Redis).
 */
const EXTERNAL = [
  'better-sqlite3',
  '@nats-io/transport-node',
  '@ffmpeg-installer/ffmpeg',
  '@kurrent/kurrentdb-client',
  'mongodb',
  'reflect-metadata',
  '@opentelemetry/sdk-node',
  '@aws-sdk/client-s3',
  '@aws-sdk/s3-request-presigner',
  'ioredis',
  // Serves its own files (Swagger UI at /docs) from beside its package.json.
  'swagger-ui-dist',
];

/**
 * How every runnable (a service's main, the standalone process, the CLI) is built: one ESM bundle of its
 * own code, the workspace packages and the npm packages it uses, so that a start loads a few files instead
 * of resolving and parsing hundreds (measured: about 0.7 s of a standalone start). The packages in
 * `EXTERNAL` stay imports and must be dependencies of the runnable's package, so that Node resolves them
 * from `dist/` under pnpm's strict layout; the build fails naming any that is not. Optional peers nothing
 * here installs (Nest's transports for other brokers, class-validator …) stay requires that are never made.
 * (tsup runs in the package's directory.)
 */
export function runnable(entry: Record<string, string>): Options {
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { dependencies?: Record<string, string> };
  const declared = new Set(Object.keys(pkg.dependencies ?? {}));
  const absent = new Set<string>();
  return {
    entry,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    outDir: 'dist',
    clean: true,
    sourcemap: true,
    // Code reached only through import() (optional adapters) goes in chunks loaded when needed.
    splitting: true,
    metafile: true,
    external: EXTERNAL,
    noExternal: [new RegExp(`^(?!(${EXTERNAL.map((name) => name.replace('/', '\\/')).join('|')})(/|$))`)],
    banner: {
      // Bundled CommonJS packages call require() for Node's own modules, which ES modules do not have.
      js: [
        ...(declared.has('reflect-metadata') ? ["import 'reflect-metadata';"] : []),
        "import { createRequire as __createRequire } from 'node:module';",
        'const require = __createRequire(import.meta.url);',
      ].join(' '),
    },
    esbuildPlugins: [
      {
        name: 'absent-optional-peers',
        setup(build) {
          build.onResolve({ filter: /^[^./]/ }, async (args) => {
            if (args.pluginData === absent) return undefined;
            const found = await build.resolve(args.path, {
              kind: args.kind,
              resolveDir: args.resolveDir,
              importer: args.importer,
              pluginData: absent,
            });
            if (found.errors.length === 0) return undefined;
            absent.add(packageName(args.path));
            return { path: args.path, external: true };
          });
        },
      },
    ],
    async onSuccess() {
      const metafile = JSON.parse(readFileSync('dist/metafile-esm.json', 'utf8')) as {
        inputs: Record<string, { imports: Array<{ path: string; kind: string; external?: boolean }> }>;
        outputs: Record<string, { imports: Array<{ path: string; external?: boolean }> }>;
      };
      for (const input of Object.keys(metafile.inputs)) {
        const starter = Object.keys(WORKERS).find((path) => resolve(input).endsWith(`/${path}`));
        if (starter) copyFileSync(join(dirname(input), WORKERS[starter]!), join('dist', basename(WORKERS[starter]!)));
      }
      // What a package imports on a path of its own (Nest's transports for other brokers) may be absent; what
      // our code loads, and what any module imports statically, must resolve. Tree-shaking decides what is left.
      const isPackage = (path: string) => /^[^./<]/.test(path) && !path.startsWith('node:') && !builtinModules.includes(path);
      const needed = new Set<string>();
      for (const [input, { imports }] of Object.entries(metafile.inputs)) {
        for (const { path, kind, external } of imports) {
          if (external && isPackage(path) && (!input.includes('/node_modules/') || kind === 'import-statement')) needed.add(packageName(path));
        }
      }
      const missing = new Set<string>();
      for (const { imports } of Object.values(metafile.outputs)) {
        for (const { path, external } of imports) {
          const name = packageName(path);
          if (external && isPackage(path) && needed.has(name) && !LATER_BUILTINS.has(name) && !absent.has(name) && !declared.has(name)) missing.add(name);
        }
      }
      if (missing.size > 0) {
        throw new Error(`Imported by the bundle but not dependencies in package.json (so not resolvable from dist/): ${[...missing].join(', ')}`);
      }
    },
  };
}
