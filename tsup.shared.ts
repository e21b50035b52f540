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
};

const packageName = (specifier: string) =>
  specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;

/**
 * How every runnable (a service's main, the standalone process, the CLI) is built: one ESM bundle of its
 * own code and the workspace packages it uses, with npm packages left as imports. Each of those must be a
 * declared dependency of the runnable's package, so that Node resolves it from `dist/` under pnpm's strict
 * layout; the build fails naming any that is not. (tsup runs in the package's directory.)
 */
export function runnable(entry: Record<string, string>): Options {
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
    noExternal: [/^@oc\//],
    skipNodeModulesBundle: true,
    async onSuccess() {
      const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { dependencies?: Record<string, string> };
      const declared = new Set(Object.keys(pkg.dependencies ?? {}));
      const metafile = JSON.parse(readFileSync('dist/metafile-esm.json', 'utf8')) as {
        inputs: Record<string, unknown>;
        outputs: Record<string, { imports: Array<{ path: string; external?: boolean }> }>;
      };
      for (const input of Object.keys(metafile.inputs)) {
        const starter = Object.keys(WORKERS).find((path) => resolve(input).endsWith(`/${path}`));
        if (starter) copyFileSync(join(dirname(input), WORKERS[starter]!), join('dist', basename(WORKERS[starter]!)));
      }
      const missing = new Set<string>();
      for (const output of Object.values(metafile.outputs)) {
        for (const { path, external } of output.imports) {
          if (!external || path.startsWith('node:') || builtinModules.includes(path)) continue;
          if (!declared.has(packageName(path))) missing.add(packageName(path));
        }
      }
      if (missing.size > 0) {
        throw new Error(`Imported by the bundle but not dependencies in package.json (so not resolvable from dist/): ${[...missing].join(', ')}`);
      }
    },
  };
}
