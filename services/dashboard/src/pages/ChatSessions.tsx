import { type ChatSession, contentText, type StoredChatMessage } from '@oc/contracts';
import { Link } from 'wouter';
import { api } from '../api';
import { when } from '../format';
import { Empty, ErrorNote, Loading, PageHeader, useLoad } from '../ui';

type SessionItem = Pick<ChatSession, 'id' | 'object' | 'created_at'>;

export function ChatSessions({ open }: { open?: string }) {
  const sessions = useLoad(() => api<{ data: SessionItem[]; has_more: boolean }>('GET', '/chat/sessions?limit=100'));
  return (
    <>
      <PageHeader title="Chat sessions" />
      <div className="split">
        <section className="panel" aria-labelledby="sessions-title">
          <h2 id="sessions-title">Sessions</h2>
          <ErrorNote error={sessions.error} retry={sessions.reload} />
          {sessions.loading && <Loading what="sessions" />}
          {sessions.data?.data.length === 0 && <Empty>No chat sessions yet.</Empty>}
          <ul className="plain">
            {sessions.data?.data.map((s) => (
              <li key={s.id}>
                <Link href={`/chat/${encodeURIComponent(s.id)}`} aria-current={open === s.id ? 'true' : undefined}>
                  <span className="mono">{s.id}</span> <span className="muted">{when(s.created_at)}</span>
                </Link>
              </li>
            ))}
          </ul>
        </section>
        {open && <Transcript id={open} />}
      </div>
    </>
  );
}

function Transcript({ id }: { id: string }) {
  const session = useLoad(() => api<ChatSession>('GET', `/chat/sessions/${encodeURIComponent(id)}`), [id]);
  return (
    <section className="panel" aria-labelledby="transcript-title">
      <h2 id="transcript-title">
        Transcript <span className="mono">{id}</span>
      </h2>
      <ErrorNote error={session.error} retry={session.reload} />
      {session.loading && <Loading what="the transcript" />}
      <ol className="transcript">
        {session.data?.messages.map((m, i) => (
          <li key={i} className={`message ${m.role}`}>
            <p className="role">
              {m.role} <span className="muted">{when(m.created_at)}</span>
            </p>
            <p className="content">{transcriptText(m)}</p>
          </li>
        ))}
      </ol>
    </section>
  );
}

/** A stored message as text: its text parts, images as `[image]`, tool calls as `name(arguments)`. */
function transcriptText(m: StoredChatMessage): string {
  const parts = Array.isArray(m.content) ? m.content.map((p) => (p.type === 'text' ? p.text : '[image]')).join('') : contentText(m.content);
  const calls = (m.tool_calls ?? []).map((c) => `${c.function.name}(${c.function.arguments})`);
  return [m.tool_call_id ? `[result of ${m.tool_call_id}] ${parts}` : parts, ...calls].filter((t) => t !== '').join('\n');
}
