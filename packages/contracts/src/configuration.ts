import { z } from 'zod';

/** How a process stops on SIGTERM or SIGINT (README's table); every process's configuration takes this shape. */
export const ShutdownConfigSchema = z.object({
  /**
   * From the signal on, the process is not ready and takes no new work; what is in flight (requests, chat streams)
   * may finish for this long, and what is still running then is cut (a stream ends with an error event, charged
   * only for what it delivered). Deployments give a process longer than this before they kill it.
   */
  SHUTDOWN_GRACE_MS: z.coerce.number().int().nonnegative().default(30_000).describe('milliseconds, 0 or more'),
});

/** One variable at fault: the line an operator reads is `<variable>: <message>`. */
export interface ConfigurationProblem {
  variable: string;
  message: string;
}

/**
 * A rule across variables, read from the raw environment so that it is checked even when other variables
 * are malformed (every problem is reported at once), e.g. "WEBHOOK_SECRET_KEY is required in production
 * mode". The schema checks each variable's own form.
 */
export type ConfigurationCheck = (env: NodeJS.ProcessEnv) => ConfigurationProblem[];

/**
 * The schema's issues as problems naming their variable. A variable's `.describe()` text (what it expects)
 * follows zod's message in parentheses, except after a refinement's own message, which is written to be read
 * alone.
 */
export function configurationProblems(error: z.ZodError, schema?: z.ZodType): ConfigurationProblem[] {
  const shape = (schema as { shape?: Record<string, z.ZodType> } | undefined)?.shape ?? {};
  return error.issues.map((issue) => {
    const variable = issue.path.length > 0 ? String(issue.path[0]) : '(environment)';
    const missing = issue.code === 'invalid_type' && issue.input === undefined;
    const message = missing ? 'required' : issue.code === 'custom' ? issue.message : issue.message.replace(/^Invalid input: /, '');
    const expects = issue.code === 'custom' ? undefined : shape[variable]?.description;
    const inner = issue.path.slice(1);
    const where =
      inner.length === 0 ? '' : inner.length === 1 && typeof inner[0] === 'number' ? ` in entry ${inner[0] + 1}` : ` at ${inner.join('.')}`;
    return { variable, message: `${message}${where}${expects ? ` (${expects})` : ''}` };
  });
}

/** `VARIABLE: message`, one line per problem. */
export const formatConfigurationProblem = (problem: ConfigurationProblem) => `${problem.variable}: ${problem.message}`;

/** Parses the environment with `schema`, then applies `checks`; every problem found, or the parsed settings. */
export function parseConfiguration<S extends z.ZodType>(
  schema: S,
  env: NodeJS.ProcessEnv = process.env,
  checks: readonly ConfigurationCheck[] = [],
): { success: true; data: z.output<S> } | { success: false; problems: ConfigurationProblem[] } {
  // `reportInput` tells a missing variable from a malformed one; values are never printed.
  const parsed = schema.safeParse(env, { reportInput: true });
  const problems = parsed.success ? [] : configurationProblems(parsed.error, schema);
  for (const check of checks) {
    for (const problem of check(env)) if (!problems.some((p) => p.variable === problem.variable)) problems.push(problem);
  }
  if (parsed.success && problems.length === 0) return { success: true, data: parsed.data };
  return { success: false, problems };
}

/**
 * A process's environment, parsed once at boot. A missing or malformed variable ends the process before it
 * does anything, with one line per problem naming the variable and what it expects (exit code 78,
 * "configuration error"), not a validation library's stack trace.
 */
export function configFromEnv<S extends z.ZodType>(
  schema: S,
  env: NodeJS.ProcessEnv = process.env,
  checks: readonly ConfigurationCheck[] = [],
): z.output<S> {
  const parsed = parseConfiguration(schema, env, checks);
  // `OC_CHECK_CONFIG=1`: say whether this environment would start the process, and start nothing (as `nginx -t`).
  if (parsed.success && env.OC_CHECK_CONFIG === '1') {
    process.stdout.write('Configuration OK\n');
    return process.exit(0);
  }
  if (parsed.success) return parsed.data;
  process.stderr.write(parsed.problems.map((problem) => `Invalid configuration: ${formatConfigurationProblem(problem)}\n`).join(''));
  return process.exit(78);
}

/**
 * What every process answers to a prober (Kubernetes, docker compose): `liveness` while the process runs,
 * `readiness` once it can serve (its transport, event store and read models answer). The gateway serves them on
 * its HTTP port, each service on HEALTH_PORT; the deployment files are checked against these paths.
 */
export const PROBE_PATHS = { liveness: '/healthz', readiness: '/readyz' } as const;

/** The port a service process answers probes on (HEALTH_PORT); unset, it opens no port. */
export const DEFAULT_HEALTH_PORT = 8081;
