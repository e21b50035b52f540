import { ACCOUNT_COMMANDS } from './account';
import { ADMIN_COMMANDS } from './admin';
import { CHAT_COMMANDS } from './chat';
import { type Client, client } from './client';
import { CliError, type Command, type Io, parse, type Print, UsageError } from './command';
import { DEFAULT_URL, type Profile, profilePath, readProfile } from './profile';
import { MEMBER_COMMANDS } from './members';
import { VIDEO_COMMANDS } from './videos';
import { WEBHOOK_COMMANDS } from './webhooks';

export type { Io } from './command';

const API_COMMANDS = [...ACCOUNT_COMMANDS, ...VIDEO_COMMANDS, ...CHAT_COMMANDS, ...WEBHOOK_COMMANDS];
const OPERATOR_COMMANDS = [...ADMIN_COMMANDS, ...MEMBER_COMMANDS];
const COMMANDS = [...API_COMMANDS, ...OPERATOR_COMMANDS];

const GLOBAL_OPTIONS = ['url', 'token', 'json', 'help'] as const;

const USAGE = `Usage: oc <command> [options]

With an API key (oc login --key, or OC_API_KEY):
${API_COMMANDS.map((c) => `  ${c.usage}`).join('\n')}

Operating the service, with the admin token (oc login --token, or OC_ADMIN_TOKEN):
${OPERATOR_COMMANDS.map((c) => `  ${c.usage}`).join('\n')}

  oc help

Options:
  --url URL      the service's base URL (env OC_BASE_URL; admin calls: OC_ADMIN_URL first; then oc login's; default ${DEFAULT_URL})
  --token TOKEN  admin token, sent as a Bearer token (env OC_ADMIN_TOKEN, then oc login's)
  --json         print the raw JSON response, alone on stdout
The API key comes from OC_API_KEY, then from oc login (its file: OC_CONFIG, default ~/.config/oc/config.json).
`;

export async function run(argv: string[], io: Partial<Io> = {}): Promise<number> {
  const full: Io = {
    fetch: io.fetch ?? globalThis.fetch,
    stdin: io.stdin ?? process.stdin,
    stdout: io.stdout ?? process.stdout,
    stderr: io.stderr ?? process.stderr,
    env: io.env ?? process.env,
    cwd: io.cwd ?? process.cwd(),
    pollIntervalMs: io.pollIntervalMs ?? 5_000,
    reconnectDelayMs: io.reconnectDelayMs ?? 1_000,
    ...(io.interrupt ? { interrupt: io.interrupt } : {}),
  };
  try {
    await dispatch(argv, full);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      full.stderr.write(`error: ${error.message}\n\n${USAGE}`);
      return 2;
    }
    if (error instanceof CliError) {
      full.stderr.write(`error: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

async function dispatch(argv: string[], io: Io): Promise<void> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    // parseArgs reports unknown options and missing option values as TypeErrors.
    throw new UsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help || positionals[0] === 'help') {
    io.stdout.write(USAGE);
    return;
  }
  if (positionals.length === 0) throw new UsageError('no command given');

  // `oc balance` (the key's organization) and `oc balance ORG_ID` (admin) differ only in their arguments.
  const named = COMMANDS.filter((c) => c.words.every((w, i) => positionals[i] === w));
  if (named.length === 0) throw new UsageError(`unknown command "${positionals.slice(0, 2).join(' ')}"`);
  const longest = Math.max(...named.map((c) => c.words.length));
  const args = positionals.slice(longest);
  const command: Command | undefined = named.find((c) => c.words.length === longest && c.args === args.length);
  if (!command) throw new UsageError(`wrong arguments, expected: ${named.map((c) => c.usage).join(' or ')}`);
  const allowed: string[] = [...GLOBAL_OPTIONS, ...(command.options ?? [])];
  const stray = Object.keys(values).find((o) => !allowed.includes(o));
  if (stray) throw new UsageError(`option --${stray} does not apply to "oc ${command.words.join(' ')}"`);

  const json = values.json ?? false;
  const print: Print = (body, human) => {
    if (!json) io.stdout.write(`${human()}\n`);
    else if (body !== undefined) io.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
  };
  // Read only when a command needs it, so `oc login` can replace a profile that no longer parses.
  let profile: Promise<Profile> | undefined;
  const saved = () => (profile ??= readProfile(profilePath(io.env)));
  const { env } = io;
  const admin = lazy(async () => {
    const p = await saved();
    const url = values.url ?? env.OC_ADMIN_URL ?? env.OC_BASE_URL ?? p.base_url ?? DEFAULT_URL;
    return client('the admin API', url.replace(/\/+$/, ''), values.token ?? env.OC_ADMIN_TOKEN ?? p.admin_token, io.fetch);
  });
  const api = lazy(async () => {
    const p = await saved();
    const url = values.url ?? env.OC_BASE_URL ?? p.base_url ?? DEFAULT_URL;
    const key = env.OC_API_KEY ?? p.api_key;
    if (!key) throw new CliError('no API key: run oc login --key oc_live_… or set OC_API_KEY');
    return client('the API', url.replace(/\/+$/, ''), key, io.fetch);
  });
  await command.exec({ io, json, print, admin, api }, args, values);
}

/** A client made on its first call, so that commands that need no profile never read it. */
function lazy(make: () => Promise<Client>): Client {
  let made: Promise<Client> | undefined;
  const get = () => (made ??= make());
  return {
    json: async (method, path, body) => (await get()).json(method, path, body),
    open: async (method, path, body, accept, options) => (await get()).open(method, path, body, accept, options),
  };
}
