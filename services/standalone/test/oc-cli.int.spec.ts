import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { type Io, run } from '@oc/cli';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { ensureBuilt } from './system';

const ROOT = resolve(import.meta.dirname, '../../..');
const ADMIN_TOKEN = 'cli-admin-token-0123456789';
const PROMPT = 'A paper boat drifting down a rainy street';

/** Every command line `oc` ran in this file, to show at the end that every command and option was run. */
const ran: string[][] = [];

/** Options that take no value; every other option is followed by its value. */
const FLAGS = new Set(['json', 'help', 'wait', 'test', 'print-secret']);

/**
 * The commands `oc help` lists, each with the options its usage names (`oc balance` and `oc balance ORG_ID`
 * are two), and the global options.
 */
function commandsOf(help: string) {
  const commands = help
    .split('\n')
    .filter((line) => line.startsWith('  oc '))
    .map((line) => {
      // What follows two spaces and a parenthesis explains; it names no option of its own.
      const tokens = line.trim().replace(/\s{2,}\(.*$/, '').split(/\s+/).slice(1);
      const words: string[] = [];
      const args: string[] = [];
      const options = new Set<string>();
      let depth = 0;
      let valueNext = false;
      for (const token of tokens) {
        const option = /^\[?--([a-z-]+)/.exec(token)?.[1];
        if (option) options.add(option);
        else if (depth === 0 && !valueNext && /^[A-Z][A-Z_]*$/.test(token)) args.push(token);
        else if (depth === 0 && !valueNext && args.length === 0 && options.size === 0 && /^[a-z-]+$/.test(token)) words.push(token);
        valueNext = option !== undefined && !FLAGS.has(option) && !token.endsWith(']');
        depth += (token.match(/\[/g) ?? []).length - (token.match(/\]/g) ?? []).length;
      }
      return { name: [...words, ...args].join(' '), words, args: args.length, options };
    });
  const global = [...help.matchAll(/^ {2}--([a-z-]+)/gm)].map((m) => m[1]!);
  return { commands, global };
}

/** A command line's positional words and the options it used. */
function invocation(argv: string[]) {
  const positionals: string[] = [];
  const options = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    const option = token === '-o' ? 'output' : token === '-h' ? 'help' : /^--([a-z-]+)/.exec(token)?.[1];
    if (option === undefined) positionals.push(token);
    else {
      options.add(option);
      if (!FLAGS.has(option) && !token.includes('=')) i++;
    }
  }
  return { positionals, options };
}

/** The `oc` an API user runs, against a running service: everything it printed, and its exit code. */
async function oc(env: Io['env'], argv: string[], io: Partial<Io> = {}) {
  ran.push(argv);
  let stdout = '';
  let stderr = '';
  const writes: string[] = [];
  const code = await run(argv, {
    stdout: { write: (s: string) => ((stdout += s), writes.push(s)) },
    stderr: { write: (s: string) => (stderr += s), isTTY: io.stderr?.isTTY },
    env,
    // The spec's 5 s between looks at a video would make these tests slow; the simulator is fast here.
    pollIntervalMs: 100,
    ...(io.cwd ? { cwd: io.cwd } : {}),
    ...(io.fetch ? { fetch: io.fetch } : {}),
    ...(io.stdin ? { stdin: io.stdin } : {}),
  });
  return { code, stdout, stderr, writes };
}

describe('oc, run by an API user against a running service', () => {
  let app: Standalone;
  let dir: string;
  let key: string;
  let orgId: string;
  let env: Io['env'];
  /** The admin token and the service, for the operator's commands. */
  let operator: Io['env'];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-cli-'));
    const config = loadStandaloneConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: join(dir, 'data'),
      ADMIN_TOKEN,
      LOG_LEVEL: 'silent',
      SIM_VIDEO_DURATION_MS: '1500',
      SIM_VIDEO_POLL_MS: '100',
      CHAT_SIMULATOR_WORD_DELAY_MS: '1',
    });
    app = await startStandalone({ config });
    const admin = { OC_ADMIN_URL: app.url, OC_ADMIN_TOKEN: ADMIN_TOKEN, OC_CONFIG: join(dir, 'none.json') };
    operator = admin;
    orgId = JSON.parse((await oc(admin, ['orgs', 'create', '--name', 'CLI users', '--tier', 'enterprise', '--json'])).stdout).id;
    await oc(admin, ['credit', orgId, '20']);
    const scopes = ['video:read', 'video:write', 'video:delete', 'chat:read', 'chat:write'].flatMap((s) => ['--scope', s]);
    key = JSON.parse((await oc(admin, ['keys', 'create', orgId, '--name', 'cli', ...scopes, '--rate-limit', '2000', '--json'])).stdout).key;
    env = { OC_BASE_URL: app.url, OC_API_KEY: key, OC_CONFIG: join(dir, 'none.json') };
  });
  afterAll(async () => {
    await app.close();
    await rm(dir, { recursive: true, force: true });
  });

  describe('oc login', () => {
    it('checks the key and the admin token, saves them readable only by the user, and never prints them whole', async () => {
      const config = join(dir, 'home', 'oc', 'config.json');
      const profile = { OC_CONFIG: config };
      const login = await oc(profile, ['login', '--url', `${app.url}/`, '--key', key, '--token', ADMIN_TOKEN]);

      expect(login.code).toBe(0);
      expect(login.stdout).toContain(`${key.slice(0, 12)}… (organization ${orgId})`);
      expect(login.stdout).not.toContain(key);
      expect(login.stdout).not.toContain(ADMIN_TOKEN);
      expect((await stat(config)).mode & 0o777).toBe(0o600);
      expect((await stat(join(dir, 'home', 'oc'))).mode & 0o777).toBe(0o700);
      expect(JSON.parse(await readFile(config, 'utf8'))).toEqual({ base_url: app.url, api_key: key, admin_token: ADMIN_TOKEN });

      // Later commands need nothing else: the API key for /v1, the admin token for /admin/v1.
      expect(JSON.parse((await oc(profile, ['balance', '--json'])).stdout)).toMatchObject({ organization_id: orgId });
      expect(JSON.parse((await oc(profile, ['balance', orgId, '--json'])).stdout)).toMatchObject({ organization_id: orgId });
      // The environment overrides the profile.
      const wrongKey = await oc({ ...profile, OC_API_KEY: 'oc_live_not_a_real_key_000000000000000000000000' }, ['balance']);
      expect(wrongKey).toMatchObject({ code: 1, stdout: '' });
      expect(wrongKey.stderr).toMatch(/^error: .+ \(invalid_api_key\)\n$/);
      const closed = createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
      const { port } = closed.address() as AddressInfo;
      await new Promise((r) => closed.close(r));
      const elsewhere = await oc({ ...profile, OC_BASE_URL: `http://127.0.0.1:${port}` }, ['balance']);
      expect(elsewhere.stderr).toMatch(new RegExp(`^error: cannot reach the API at http://127.0.0.1:${port}: .*ECONNREFUSED`));

      const typo = await oc(profile, ['login', '--key', `${key}x`]);
      expect(typo.code).toBe(1);
      expect(typo.stderr).toContain('(invalid_api_key)');
      expect(JSON.parse(await readFile(config, 'utf8')).api_key).toBe(key);

      // A secret can come on stdin instead, out of the shell's history and the process list.
      const piped = await oc(profile, ['login', '--token', '-'], { stdin: Readable.from([`${ADMIN_TOKEN}\n`]) });
      expect(piped.code).toBe(0);
      expect(piped.stdout).toContain(`admin token  …${ADMIN_TOKEN.slice(-4)}\n`);
      const nothing = await oc(profile, ['login', '--key', '-'], { stdin: Readable.from([]) });
      expect(nothing).toMatchObject({ code: 2, stdout: '' });
      expect(nothing.stderr).toMatch(/^error: nothing on stdin to read the secret from\n/);

      expect((await oc(profile, ['logout'])).stdout).toBe(`Removed ${config}\n`);
      const none = await oc(profile, ['balance']);
      expect(none).toMatchObject({ code: 1, stderr: 'error: no API key: run oc login --key oc_live_… or set OC_API_KEY\n' });
    });
  });

  it('oc balance shows the key\'s organization', async () => {
    const { code, stdout } = await oc(env, ['balance']);
    expect(code).toBe(0);
    expect(stdout).toMatch(new RegExp(`organization\\s+${orgId}\\n`));
    expect(stdout).toMatch(/available\s+\$\d+\.\d{2}/);
  });

  describe('oc videos', () => {
    it('create --wait follows the progress, then saves the MP4 under the video id', async () => {
      const cwd = await mkdtemp(join(dir, 'videos-'));
      const { code, stdout, stderr } = await oc(env, ['videos', 'create', '--prompt', PROMPT, '--seconds', '8', '--wait'], { cwd });

      expect(code).toBe(0);
      const id = /^(video_\S+) completed, charged \$0\.80\nSaved \1\.mp4 \(\d+\.\d KiB\)\n$/.exec(stdout)?.[1];
      expect(id, stdout).toBeDefined();
      // Not a terminal: one plain line per change, from queued to completed.
      const lines = stderr.trim().split('\n');
      expect(lines[0]).toBe(`Created ${id} ($0.80 reserved); Ctrl-C stops waiting, not the video`);
      expect(lines[1]).toBe(`${id} queued 0%`);
      expect(lines.at(-1)).toBe(`${id} completed 100%`);
      expect(lines.some((l) => / in_progress \d+%$/.test(l))).toBe(true);
      expect(stderr).not.toContain('\r');
      expect(await readdir(cwd)).toEqual([`${id}.mp4`]);
      expect((await readFile(join(cwd, `${id}.mp4`))).subarray(4, 8).toString()).toBe('ftyp');
    });

    it("says a test key's video is not charged, when created, finished and read", async () => {
      const scopes = ['video:read', 'video:write'].flatMap((s) => ['--scope', s]);
      const testKey = JSON.parse((await oc(operator, ['keys', 'create', orgId, '--name', 'cli-test', ...scopes, '--test', '--json'])).stdout).key;
      const testEnv = { ...env, OC_API_KEY: testKey };
      const cwd = await mkdtemp(join(dir, 'test-videos-'));
      const { code, stdout, stderr } = await oc(testEnv, ['videos', 'create', '--prompt', PROMPT, '--wait'], { cwd });
      expect(code).toBe(0);
      const id = /^(video_\S+) completed, not charged \(test key\)\n/.exec(stdout)?.[1];
      expect(id, stdout).toBeDefined();
      expect(stderr.split('\n')[0]).toBe(`Created ${id} (not charged (test key)); Ctrl-C stops waiting, not the video`);
      expect((await oc(testEnv, ['videos', 'get', id!])).stdout).toMatch(/cost\s+\$0\.40, not charged \(test key\)/);
    });

    it('create --wait draws a bar on a terminal, and with --json prints the finished video alone', async () => {
      const output = join(dir, 'bar.mp4');
      const tty = await oc(env, ['videos', 'create', '--prompt', PROMPT, '--wait', '--output', output], { stderr: { write: () => true, isTTY: true } });
      expect(tty.code).toBe(0);
      expect(tty.stderr).toMatch(/\r░{30}\s+0%\s+queued\x1b\[K/);
      expect(tty.stderr).toMatch(/\r█{30}\s+100%\s+completed\x1b\[K\n$/);
      expect(tty.stdout).toContain(`Saved ${output}`);

      const json = await oc(env, ['videos', 'create', '--prompt', PROMPT, '--wait', '--output', join(dir, 'json.mp4'), '--json']);
      expect(json.code).toBe(0);
      expect(json.stderr).toBe('');
      expect(JSON.parse(json.stdout)).toMatchObject({ object: 'video', status: 'completed', progress: 100, seconds: '4', model: 'video-2' });
      expect((await stat(join(dir, 'json.mp4'))).size).toBeGreaterThan(1000);
    });

    it('create --wait outlasts a service that is briefly unavailable', async () => {
      let looks = 0;
      // The second look at the video meets a gateway that cannot reach the video service.
      const flaky: typeof fetch = async (input, init) => {
        if (init?.method === 'GET' && /\/v1\/videos\/video_[^/]+$/.test(String(input)) && ++looks === 2) {
          const body = { error: { type: 'service_unavailable_error', message: 'The video service did not answer in time.', code: 'service_unavailable' } };
          return new Response(JSON.stringify(body), { status: 503, headers: { 'content-type': 'application/json' } });
        }
        return fetch(input, init);
      };
      const { code, stderr } = await oc(env, ['videos', 'create', '--prompt', PROMPT, '--wait', '--output', join(dir, 'flaky.mp4')], { fetch: flaky });
      expect(code).toBe(0);
      expect(stderr).toContain('\nThe video service did not answer in time. (service_unavailable); trying again\n');
      expect(stderr).toMatch(/ completed 100%\n$/);
    });

    it('create --wait reports a failed video with its error code and exits 1, downloading nothing', async () => {
      const cwd = await mkdtemp(join(dir, 'failed-'));
      const { code, stdout, stderr } = await oc(env, ['videos', 'create', '--prompt', `${PROMPT} [sim:fail=generation_failed]`, '--wait'], { cwd });
      expect(code).toBe(1);
      expect(stdout).toMatch(/status\s+failed/);
      expect(stderr).toMatch(/\nerror: video_\S+ failed: .+ \(generation_failed\)\n$/);
      expect(await readdir(cwd)).toEqual([]);
    });

    it('create without --wait answers at once; an invalid request prints the API\'s message and code', async () => {
      const created = await oc(env, ['videos', 'create', '--prompt', PROMPT, '--json']);
      expect(JSON.parse(created.stdout)).toMatchObject({ status: 'queued', progress: 0 });
      const pro = await oc(env, ['videos', 'create', '--prompt', PROMPT, '--model', 'video-2-pro', '--size', '720x1280', '--seconds', '4', '--json']);
      expect(JSON.parse(pro.stdout)).toMatchObject({ status: 'queued', model: 'video-2-pro', size: '720x1280', seconds: '4' });

      const invalid = await oc(env, ['videos', 'create', '--prompt', PROMPT, '--seconds', '5']);
      expect(invalid).toMatchObject({ code: 1, stdout: '' });
      expect(invalid.stderr).toMatch(/^error: .*seconds must be '4', '8' or '12'.* \(invalid_seconds\)\n$/);
    });

    it('list, get, download and delete', async () => {
      const video = JSON.parse((await oc(env, ['videos', 'create', '--prompt', PROMPT, '--wait', '--output', join(dir, 'first.mp4'), '--json'])).stdout);

      const list = await oc(env, ['videos', 'list', '--limit', '2']);
      expect(list.stdout).toMatch(/^ID\s+STATUS\s+PROGRESS\s+MODEL\s+SECONDS\s+SIZE\s+COST\s+CREATED\s+PROMPT\n/);
      expect(list.stdout).toMatch(new RegExp(`${video.id}\\s+completed\\s+100%\\s+video-2\\s+4\\s+1280x720\\s+\\$0\\.40\\s+\\S+\\s+A paper boat`));
      const after = /\(more: --after (video_\S+)\)\n$/.exec(list.stdout)?.[1];
      const older = JSON.parse((await oc(env, ['videos', 'list', '--after', after!, '--limit', '100', '--json'])).stdout);
      expect(older.data.length).toBeGreaterThan(0);
      expect(older.data.map((v: { id: string }) => v.id)).not.toContain(video.id);

      expect((await oc(env, ['videos', 'get', video.id])).stdout).toMatch(new RegExp(`id\\s+${video.id}\\nstatus\\s+completed \\(100%\\)\\n`));

      const cwd = await mkdtemp(join(dir, 'download-'));
      const download = await oc(env, ['videos', 'download', video.id], { cwd });
      expect(download.stdout).toMatch(new RegExp(`^Saved ${video.id}\\.mp4 \\(\\d+\\.\\d KiB\\)\\n$`));
      expect(await readFile(join(cwd, `${video.id}.mp4`))).toEqual(await readFile(join(dir, 'first.mp4')));

      expect(await oc(env, ['videos', 'delete', video.id])).toMatchObject({ code: 0, stdout: `Deleted ${video.id}\n` });
      const gone = await oc(env, ['videos', 'get', video.id]);
      expect(gone).toMatchObject({ code: 1, stdout: '' });
      expect(gone.stderr).toContain('(video_not_found)');
      const missing = await oc(env, ['videos', 'download', video.id, '--output', join(dir, 'missing.mp4')]);
      expect(missing.code).toBe(1);
      await expect(stat(join(dir, 'missing.mp4'))).rejects.toThrow();
    });
  });

  describe('oc chat and oc sessions', () => {
    it('streams the answer as it comes, continues a session, and shows it', async () => {
      const first = await oc(env, ['chat', 'How do I start a community garden?', '--max-tokens', '30']);
      expect(first.code).toBe(0);
      expect(first.writes.length).toBeGreaterThan(5);
      expect(first.stdout).toMatch(/^\S.+\n$/);
      const session = /^\[(chat_\S+), (\d+) tokens; continue with --session \1\]\n$/.exec(first.stderr)?.[1];
      expect(session, first.stderr).toBeDefined();

      const second = await oc(env, ['chat', 'And in winter?', '--session', session!, '--json']);
      const completion = JSON.parse(second.stdout);
      expect(completion).toMatchObject({ object: 'chat.completion', session_id: session });

      const list = await oc(env, ['sessions', 'list']);
      expect(list.stdout).toMatch(new RegExp(`^ID\\s+CREATED\\n${session}\\s+\\d{4}-`));
      const show = await oc(env, ['sessions', 'show', session!]);
      expect(show.stdout).toContain('\nuser (');
      expect(show.stdout).toContain('How do I start a community garden?');
      expect(show.stdout).toContain(first.stdout.trim());
      expect(show.stdout).toContain('And in winter?');
      expect(show.stdout).toContain(completion.choices[0].message.content);
    });

    it('--model names the model, and a model the API does not serve is refused with its code', async () => {
      const named = await oc(env, ['chat', 'Name three spring vegetables', '--model', 'chat-2', '--json']);
      expect(named.code).toBe(0);
      expect(JSON.parse(named.stdout)).toMatchObject({ object: 'chat.completion', model: 'chat-2' });
      const streamed = await oc(env, ['chat', 'And three for autumn?', '--model', 'chat-2', '--max-tokens', '20']);
      expect(streamed.code).toBe(0);
      expect(streamed.stderr).toMatch(/^\[chat_\S+, \d+ tokens; continue with --session chat_\S+\]\n$/);
      const unknown = await oc(env, ['chat', 'Hello', '--model', 'video-2']);
      expect(unknown).toMatchObject({ code: 1, stdout: '' });
      expect(unknown.stderr).toMatch(/^error: .+ \(invalid_model\)\n$/);

      // Three sessions by now: a page of one, then the rest after it.
      const first = await oc(env, ['sessions', 'list', '--limit', '1']);
      const after = /\(more: --after (chat_\S+)\)\n$/.exec(first.stdout)?.[1];
      expect(after, first.stdout).toBeDefined();
      const rest = JSON.parse((await oc(env, ['sessions', 'list', '--after', after!, '--json'])).stdout);
      expect(rest.data.length).toBeGreaterThanOrEqual(2);
      expect(rest.data.map((s: { id: string }) => s.id)).not.toContain(after);
    });

    it('reports what the API refuses with its message and code', async () => {
      const tooMany = await oc(env, ['chat', 'Hello', '--max-tokens', '2000000']);
      expect(tooMany).toMatchObject({ code: 1, stdout: '' });
      expect(tooMany.stderr).toMatch(/^error: .+ \(\w+\)\n$/);
      const missing = await oc(env, ['sessions', 'show', 'chat_nope']);
      expect(missing.stderr).toContain('(resource_not_found)');
    });
  });

  it('the ledger shows what each capture charged, and oc usage adds it up', async () => {
    const admin = { OC_ADMIN_URL: app.url, OC_ADMIN_TOKEN: ADMIN_TOKEN, OC_CONFIG: join(dir, 'none.json') };
    const ledger = await oc(admin, ['ledger', orgId, '--limit', '100', '--json']);
    const captures = (JSON.parse(ledger.stdout).data as { type: string; charged: number; reference: string }[]).filter((e) => e.type === 'capture');
    const charged = (video: boolean) =>
      captures.filter((e) => e.reference.startsWith('video_') === video).reduce((total, e) => total + e.charged, 0);
    // The 8-second video above, and 4-second ones (the one left to finish on its own may still be running).
    expect(charged(true)).toBeGreaterThanOrEqual(0.8 + 0.4 * 4 - 1e-9);
    expect(charged(false)).toBeGreaterThan(0);
    expect((await oc(admin, ['ledger', orgId, '--limit', '100'])).stdout).toMatch(/\scapture\s+\$0\.00\s+\$0\.80\s/);
    const newest = await oc(admin, ['ledger', orgId, '--limit', '1']);
    const after = /\(more: --after (\S+)\)\n$/.exec(newest.stdout)?.[1];
    const older = JSON.parse((await oc(admin, ['ledger', orgId, '--after', after!, '--limit', '1', '--json'])).stdout);
    expect(older.data).toHaveLength(1);
    expect(older.data[0].id).not.toBe(after);

    const usage = JSON.parse((await oc(admin, ['usage', orgId, '--json'])).stdout);
    expect(usage.charged.days).toBe(30);
    expect(usage.charged.videos).toBeCloseTo(charged(true), 6);
    expect(usage.charged.chat).toBeCloseTo(charged(false), 6);
    expect((await oc(admin, ['usage', orgId])).stdout).toMatch(/charged, 30 days\s+\$\d\.\d+ \(videos \$\d\.\d+, chat and text \$0\.\d+\)/);
    // Everything above happened within the last day (and the video left running may have been charged since).
    const today = JSON.parse((await oc(admin, ['usage', orgId, '--days', '1', '--json'])).stdout);
    expect(today.charged.days).toBe(1);
    expect(today.charged.total).toBeGreaterThanOrEqual(usage.charged.total - 1e-9);
  });

  describe('operating the service with the admin token', () => {
    it('oc orgs: lists them a page at a time, gets one, changes its tier and sets each custom limit', async () => {
      const created = JSON.parse((await oc(operator, ['orgs', 'create', '--name', 'Operators Co', '--json'])).stdout);
      const first = await oc(operator, ['orgs', 'list', '--limit', '1']);
      expect(first.stdout).toMatch(/^ID\s+NAME\s+TIER\s+CREATED\norg_\S+\s+\S/);
      const after = /\(more: --after (org_\S+)\)\n$/.exec(first.stdout)?.[1];
      const rest = JSON.parse((await oc(operator, ['orgs', 'list', '--after', after!, '--limit', '100', '--json'])).stdout);
      const ids = [after, ...rest.data.map((o: { id: string }) => o.id)];
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids).toEqual(expect.arrayContaining([orgId, created.id]));

      const got = await oc(operator, ['orgs', 'get', created.id]);
      expect(got.stdout).toMatch(new RegExp(`^id\\s+${created.id}\\nname\\s+Operators Co\\ntier\\s+${created.tier}\\n`));
      const enterprise = await oc(operator, ['orgs', 'set-tier', created.id, 'enterprise']);
      expect(enterprise.stdout).toMatch(/tier\s+enterprise\n[^]*requests\s+2000\/minute, 1000000\/day\nchat\s+1000 requests\/minute, 100000000 tokens\/day\n$/);
      const custom = await oc(operator, [
        'orgs', 'set-limits', created.id,
        '--requests-per-minute', '30', '--requests-per-day', '5000', '--chat-requests-per-minute', '7', '--chat-tokens-per-day', '90000',
      ]);
      expect(custom.stdout).toMatch(/requests\s+30\/minute, 5000\/day\nchat\s+7 requests\/minute, 90000 tokens\/day\n$/);
      // The organization as the API holds it from now on, and `default` gives a figure back to the tier.
      expect(JSON.parse((await oc(operator, ['orgs', 'get', created.id, '--json'])).stdout).limits).toEqual({
        requests_per_minute: 30,
        requests_per_day: 5000,
        chat_requests_per_minute: 7,
        chat_tokens_per_day: 90_000,
      });
      const reset = await oc(operator, ['orgs', 'set-limits', created.id, '--chat-tokens-per-day', 'default']);
      expect(reset.stdout).toMatch(/chat\s+7 requests\/minute, 100000000 tokens\/day\n$/);

      const credited = await oc(operator, ['credit', created.id, '1.5', '--description', 'Pilot credit']);
      expect(credited.stdout).toMatch(/available\s+\$1\.50\n/);
      expect((await oc(operator, ['ledger', created.id])).stdout).toMatch(/\scredit\s+\$1\.50\s.*Pilot credit/);
    });

    it('oc keys: a test-mode key that expires, listed, working, then revoked and refused', async () => {
      const created = JSON.parse(
        (await oc(operator, ['keys', 'create', orgId, '--name', 'short-lived', '--scope', 'chat:read', '--expires-in-days', '7', '--test', '--json'])).stdout,
      );
      expect(created).toMatchObject({ mode: 'test', key: expect.stringMatching(/^oc_test_/), scopes: ['chat:read'] });
      expect(created.expires_at - created.created).toBe(7 * 86_400);
      const listed = await oc(operator, ['keys', 'list', orgId]);
      expect(listed.stdout).toMatch(new RegExp(`\\n${created.id}\\s+short-lived\\s+test\\s+\\S+\\s+chat:read\\s.*\\sactive\\n`));
      const withKey = { ...env, OC_API_KEY: created.key };
      expect((await oc(withKey, ['balance'])).code).toBe(0);

      expect((await oc(operator, ['keys', 'revoke', orgId, created.id])).stdout).toMatch(new RegExp(`^Revoked key ${created.id} at \\d{4}-`));
      const refused = await oc(withKey, ['balance']);
      expect(refused).toMatchObject({ code: 1, stdout: '' });
      expect(refused.stderr).toContain('(invalid_api_key)');
      expect((await oc(operator, ['keys', 'list', orgId])).stdout).toMatch(new RegExp(`\\n${created.id}\\s.*\\srevoked\\n`));
    });

    it('oc members: the people it adds sign in to the console with their password, until removed', async () => {
      const signIn = async (email: string, password: string) => {
        const res = await fetch(`${app.url}/console/v1/sessions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email, password }),
        });
        return { status: res.status, cookie: res.headers.get('set-cookie')?.split(';')[0], body: (await res.json()) as any };
      };
      const password = 'a long passphrase, typed once';
      const piped = await oc(operator, ['members', 'create', orgId, '--email', 'ada@cli.test', '--name', 'Ada', '--password', '-'], {
        stdin: Readable.from([`${password}\n`]),
      });
      expect(piped.code).toBe(0);
      const ada = /^Added ada@cli\.test \((mem_\S+)\) to (org_\S+); they sign in at \/dashboard\n/.exec(piped.stdout);
      expect(ada?.[2]).toBe(orgId);
      expect(piped.stdout + piped.stderr).not.toContain(password);
      const session = await signIn('ada@cli.test', password);
      expect(session).toMatchObject({ status: 200, body: { kind: 'member', organization: { id: orgId }, member: { email: 'ada@cli.test', name: 'Ada' } } });

      // Without --password one is generated and shown once: on stderr with --json, so stdout stays the member.
      const generated = await oc(operator, ['members', 'create', orgId, '--email', 'bob@cli.test', '--json']);
      expect(JSON.parse(generated.stdout)).toMatchObject({ object: 'member', email: 'bob@cli.test', organization_id: orgId });
      const shown = /^Password \(shown only now\): (\S+)\n$/.exec(generated.stderr)?.[1];
      expect((await signIn('bob@cli.test', shown!)).status).toBe(200);

      const list = await oc(operator, ['members', 'list', orgId]);
      expect(list.stdout).toMatch(/^ID\s+EMAIL\s+NAME\s+CREATED\n/);
      expect(list.stdout).toMatch(new RegExp(`${ada![1]}\\s+ada@cli\\.test\\s+Ada\\s`));
      expect(list.stdout).toMatch(/\sbob@cli\.test\s+-\s/);

      expect((await oc(operator, ['members', 'remove', orgId, ada![1]!])).stdout).toBe(`Removed ada@cli.test (${ada![1]})\n`);
      // Their session ended with them, and the password no longer signs in.
      const after = await fetch(`${app.url}/console/v1/session`, { headers: { cookie: session.cookie! } });
      expect(((await after.json()) as any).error.code).toBe('invalid_session');
      expect((await signIn('ada@cli.test', password)).status).toBe(401);
      expect((await oc(operator, ['members', 'list', orgId])).stdout).not.toContain('ada@cli.test');
    });
  });

  it('that is every command `oc help` lists, each with every option its usage names (oc webhooks listen: oc-listen.int.spec.ts)', async () => {
    const { commands, global } = commandsOf((await oc(env, ['help'])).stdout);
    expect(commands.length).toBeGreaterThanOrEqual(25);
    const used = ran.map(invocation);
    const missing: string[] = [];
    for (const command of commands) {
      // Forwarding needs a receiver and an `oc` left running: oc-listen.int.spec.ts runs it against a service.
      if (command.name === 'webhooks listen') continue;
      const runs = used.filter(({ positionals }) => positionals.length === command.words.length + command.args && command.words.every((w, i) => positionals[i] === w));
      if (runs.length === 0) missing.push(`oc ${command.name}`);
      for (const option of command.options) if (!runs.some((r) => r.options.has(option))) missing.push(`oc ${command.name} --${option}`);
    }
    for (const option of global) if (!used.some((r) => r.options.has(option))) missing.push(`--${option}`);
    expect(missing).toEqual([]);
  });

  describe('the installed executable', () => {
    const exec = promisify(execFile);
    const bin = join(ROOT, 'node_modules/.bin/oc');

    beforeAll(() => {
      ensureBuilt('packages/cli');
    });

    it('prints only the JSON on stdout with --json', async () => {
      const { stdout, stderr } = await exec(bin, ['balance', '--json'], { env: { ...process.env, ...env } });
      expect(JSON.parse(stdout)).toMatchObject({ object: 'balance', organization_id: orgId });
      expect(stderr).toBe('');
    });

    it('writes errors to stderr and exits non-zero', async () => {
      const failed = await exec(bin, ['videos', 'get', 'video_nope', '--json'], { env: { ...process.env, ...env } }).catch((e: unknown) => e);
      expect(failed).toMatchObject({ code: 1, stdout: '', stderr: expect.stringMatching(/^error: .+ \(video_not_found\)\n$/) });
      const usage = await exec(bin, ['videos', 'create'], { env: { ...process.env, ...env } }).catch((e: unknown) => e);
      expect(usage).toMatchObject({ code: 2, stdout: '', stderr: expect.stringMatching(/^error: --prompt is required\n/) });
    });
  });
});
