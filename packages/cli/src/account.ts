import type { Balance } from '@oc/contracts';
import { balanceText } from './admin';
import { client } from './client';
import { CliError, type Command, fields, UsageError } from './command';
import { DEFAULT_URL, masked, type Profile, profilePath, readProfile, removeProfile, saveProfile } from './profile';

export const ACCOUNT_COMMANDS: Command[] = [
  {
    usage:
      'oc login [--url URL] [--key API_KEY|-] [--token ADMIN_TOKEN|-]  (checks them, then saves them for later commands; - reads one from stdin)',
    words: ['login'],
    args: 0,
    options: ['key'],
    async exec({ io, print }, _, values) {
      if (!values.key && !values.token) throw new UsageError('give --key API_KEY, --token ADMIN_TOKEN or both');
      if (values.key === '-' && values.token === '-') throw new UsageError('only one of --key and --token can be read from stdin');
      // `-` keeps the secret out of the shell's history and the process list (`… | oc login --key -`).
      const key = values.key === '-' ? await firstLine(io.stdin) : values.key;
      const token = values.token === '-' ? await firstLine(io.stdin) : values.token;
      const path = profilePath(io.env);
      const saved = await readProfile(path);
      const baseUrl = (values.url ?? io.env.OC_BASE_URL ?? saved.base_url ?? DEFAULT_URL).replace(/\/+$/, '');
      const profile: Profile = { ...saved, base_url: baseUrl };
      const rows: [string, string][] = [['url', baseUrl]];
      // Each secret is tried before it is kept, so a typo fails here rather than at the next command.
      if (key) {
        const balance = await client('the API', baseUrl, key, io.fetch).json<Balance>('GET', '/v1/account/balance');
        profile.api_key = key;
        rows.push(['API key', `${masked(key, 'key')} (organization ${balance.organization_id})`]);
      }
      if (token) {
        await client('the admin API', baseUrl, token, io.fetch).json('GET', '/admin/v1/organizations?limit=1');
        profile.admin_token = token;
        rows.push(['admin token', masked(token, 'token')]);
      }
      try {
        await saveProfile(path, profile);
      } catch (error) {
        throw new CliError(`cannot save ${path}: ${(error as Error).message}`);
      }
      rows.push(['saved to', `${path} (readable only by you)`]);
      print({ base_url: baseUrl, config: path }, () => fields(rows));
    },
  },
  {
    usage: 'oc logout  (forgets what oc login saved)',
    words: ['logout'],
    args: 0,
    async exec({ io, print }) {
      const path = profilePath(io.env);
      const removed = await removeProfile(path);
      print({ config: path, removed }, () => (removed ? `Removed ${path}` : `Nothing to remove: ${path} does not exist`));
    },
  },
  {
    usage: 'oc balance  (the API key\'s organization)',
    words: ['balance'],
    args: 0,
    async exec({ api, print }) {
      const balance = await api.json<Balance>('GET', '/v1/account/balance');
      print(balance, () => balanceText(balance));
    },
  },
];

async function firstLine(stdin: AsyncIterable<string | Uint8Array>): Promise<string> {
  let text = '';
  const decoder = new TextDecoder();
  for await (const chunk of stdin) text += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
  const line = text.split('\n')[0]!.trim();
  if (!line) throw new UsageError('nothing on stdin to read the secret from');
  return line;
}
