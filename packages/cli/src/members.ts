import { randomBytes } from 'node:crypto';
import type { Member } from '@oc/contracts';
import { type Command, fields, type List, listText, required, time, UsageError } from './command';

const membersPath = (orgId: string) => `/admin/v1/organizations/${encodeURIComponent(orgId)}/members`;

/** The first line of stdin as typed: only the line break is dropped, since spaces may belong to a password. */
async function passwordLine(stdin: AsyncIterable<string | Uint8Array>): Promise<string> {
  let text = '';
  const decoder = new TextDecoder();
  for await (const chunk of stdin) text += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
  const line = text.split('\n')[0]!.replace(/\r$/, '');
  if (!line) throw new UsageError('nothing on stdin to read the password from');
  return line;
}

/** People who sign in to the web console (/dashboard) with an email and a password, each for one organization. */
export const MEMBER_COMMANDS: Command[] = [
  {
    usage: 'oc members list ORG_ID',
    words: ['members', 'list'],
    args: 1,
    async exec({ admin, print }, [orgId]) {
      const list = await admin.json<List<Member>>('GET', membersPath(orgId!));
      print(list, () => listText(list, 'no members', ['ID', 'EMAIL', 'NAME', 'CREATED'], (m) => [m.id, m.email, m.name ?? '-', time(m.created)]));
    },
  },
  {
    usage: 'oc members create ORG_ID --email EMAIL [--name NAME] [--password -]  (- reads it from stdin; without it one is generated and shown once)',
    words: ['members', 'create'],
    args: 1,
    options: ['email', 'name', 'password'],
    async exec({ admin, print, io, json }, [orgId], values) {
      const email = required(values.email, '--email');
      if (values.password !== undefined && values.password !== '-') {
        throw new UsageError('--password takes only - (the password on stdin), so that it stays out of shell history and the process list');
      }
      const generated = values.password === undefined ? randomBytes(18).toString('base64url') : undefined;
      const password = generated ?? (await passwordLine(io.stdin));
      const member = await admin.json<Member>('POST', membersPath(orgId!), { email, name: values.name, password });
      if (generated && json) io.stderr.write(`Password (shown only now): ${generated}\n`);
      print(member, () =>
        [
          `Added ${member.email} (${member.id}) to ${member.organization_id}; they sign in at /dashboard`,
          fields([
            ['name', member.name ?? '-'],
            ['created', time(member.created)],
          ]),
          ...(generated ? ['', `    ${generated}`, '', 'This password is shown only now: pass it on to them privately.'] : []),
        ].join('\n'),
      );
    },
  },
  {
    usage: 'oc members remove ORG_ID MEMBER_ID  (their console sessions end at once)',
    words: ['members', 'remove'],
    args: 2,
    async exec({ admin, print }, [orgId, memberId]) {
      const member = await admin.json<Member>('DELETE', `${membersPath(orgId!)}/${encodeURIComponent(memberId!)}`);
      print(member, () => `Removed ${member.email} (${member.id})`);
    },
  },
];
