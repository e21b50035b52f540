import type { z } from 'zod';

/** One line naming each variable at fault and why, for an operator's terminal or log. */
export function configurationProblems(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join('.') || '(environment)'}: ${issue.message}`).join('; ');
}

/**
 * A process's environment, parsed once at boot. A missing or malformed variable ends the process with one
 * line naming each (exit code 78, "configuration error"), not a validation library's stack trace.
 */
export function configFromEnv<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.output<S> {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data;
  process.stderr.write(`Invalid configuration: ${configurationProblems(parsed.error)}\n`);
  return process.exit(78);
}
