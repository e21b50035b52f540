import { ACTIVITY_STATUSES, type ActivityEntry, type ActivityList, type ActivityStatus, type ApiKey } from '@oc/contracts';
import { type FormEvent, useState } from 'react';
import { api, query } from '../api';
import { usd, when } from '../format';
import { Empty, ErrorNote, Loading, PageHeader, useLoad } from '../ui';

const PAGE = 50;

const STATUS_LABELS: Record<ActivityStatus, string> = { held: 'Held', charged: 'Charged', released: 'Not charged', expired: 'Expired' };
const PRODUCT_LABELS: Record<NonNullable<ActivityEntry['product']>, string> = { chat: 'Chat', text: 'Text completion', video: 'Video' };

interface Filters {
  key_id?: string | undefined;
  model?: string | undefined;
  status?: string | undefined;
  start?: string | undefined;
  end?: string | undefined;
}

const count = (n: number) => n.toLocaleString('en-US');

/** Tokens in and out for a completion, seconds for a video; nothing before the charge says. */
function usage(row: ActivityEntry): string {
  if (row.seconds !== null) return `${count(row.seconds)} s of video`;
  if (row.input_tokens !== null || row.output_tokens !== null) return `${count(row.input_tokens ?? 0)} in / ${count(row.output_tokens ?? 0)} out`;
  return '—';
}

export function Activity() {
  const [filters, setFilters] = useState<Filters>({});
  const [more, setMore] = useState<{ rows: ActivityEntry[]; hasMore: boolean; error?: unknown; busy?: boolean }>({ rows: [], hasMore: false });
  const keys = useLoad(() => api<{ data: ApiKey[] }>('GET', '/keys'));
  const log = useLoad(async () => {
    const first = await api<ActivityList>('GET', `/activity${query({ ...filters, limit: PAGE })}`);
    setMore({ rows: [], hasMore: first.has_more });
    return first;
  }, [filters]);
  const rows = log.data ? [...log.data.data, ...more.rows] : [];
  const keyName = (id: string | null) => (id === null ? null : (keys.data?.data.find((k) => k.id === id)?.name ?? null));

  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const text = (name: string) => String(form.get(name) ?? '').trim() || undefined;
    setFilters({ key_id: text('key_id'), model: text('model'), status: text('status'), start: text('start'), end: text('end') });
  };
  const showMore = async () => {
    setMore((m) => ({ ...m, busy: true, error: undefined }));
    try {
      const page = await api<ActivityList>('GET', `/activity${query({ ...filters, limit: PAGE, after: rows.at(-1)?.id })}`);
      setMore((m) => ({ rows: [...m.rows, ...page.data], hasMore: page.has_more }));
    } catch (error) {
      setMore((m) => ({ ...m, busy: false, error }));
    }
  };
  const filtered = Object.values(filters).some((v) => v !== undefined);

  return (
    <>
      <PageHeader title="Activity" />
      <p className="muted">
        Your organization’s paid requests, newest first: each chat, text completion, response and video, the key that asked for it, what was held
        while it ran and what it was charged. A request that failed or was cancelled is not charged; its hold goes back to your balance. Days are
        UTC.
      </p>
      <section className="panel" aria-labelledby="activity-filters-title">
        <h2 id="activity-filters-title">Filters</h2>
        <form onSubmit={submit} className="grid-form" aria-label="Activity filters">
          <div>
            <label htmlFor="activity-key">API key</label>
            <select id="activity-key" name="key_id" defaultValue="">
              <option value="">All keys</option>
              {keys.data?.data.map((key) => (
                <option key={key.id} value={key.id}>
                  {key.name}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label htmlFor="activity-model">Model</label>
            <input id="activity-model" name="model" placeholder="e.g. chat-2" autoComplete="off" />
          </div>
          <div>
            <label htmlFor="activity-status">Status</label>
            <select id="activity-status" name="status" defaultValue="">
              <option value="">Any status</option>
              {ACTIVITY_STATUSES.map((status) => (
                <option key={status} value={status}>
                  {STATUS_LABELS[status]}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label htmlFor="activity-start">From</label>
            <input id="activity-start" name="start" type="date" />
          </div>
          <div>
            <label htmlFor="activity-end">To</label>
            <input id="activity-end" name="end" type="date" />
          </div>
          <div>
            <button type="submit" className="primary">
              Show activity
            </button>
          </div>
        </form>
      </section>
      <ErrorNote error={keys.error} retry={keys.reload} />
      <ErrorNote error={log.error} retry={log.reload} />
      {log.loading && <Loading what="activity" />}
      {log.data && rows.length === 0 && <Empty>{filtered ? 'No requests match these filters.' : 'No paid requests yet.'}</Empty>}
      {rows.length > 0 && (
        <section className="panel" aria-labelledby="activity-table-title">
          <h2 id="activity-table-title">Requests</h2>
          <div className="table-wrap">
            {/* Under 760 px each request is a card: every cell under its column's name (data-label). */}
            <table className="stacked">
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">API key</th>
                  <th scope="col">Model</th>
                  <th scope="col">Status</th>
                  <th scope="col" className="num">
                    Held
                  </th>
                  <th scope="col" className="num">
                    Charged
                  </th>
                  <th scope="col">Usage</th>
                  <th scope="col">Resource</th>
                  <th scope="col">Settled</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((row) => (
                  <tr key={row.id}>
                    <td data-label="When">{when(row.created)}</td>
                    <td data-label="API key" className={keyName(row.key_id) === null ? 'mono wrap' : undefined}>
                      {keyName(row.key_id) ?? row.key_id ?? 'No key'}
                    </td>
                    <td data-label="Model">
                      {/* One child, so that a card keeps the product beside its label. */}
                      <span>
                        <span className="nowrap">{row.model ?? '—'}</span>
                        {row.product && (
                          <>
                            <br />
                            <span className="muted">{PRODUCT_LABELS[row.product]}</span>
                          </>
                        )}
                      </span>
                    </td>
                    <td data-label="Status">
                      <span className={`badge ${row.status}`}>{STATUS_LABELS[row.status]}</span>
                    </td>
                    <td data-label="Held" className="num">
                      {usd(row.amount_held)}
                    </td>
                    <td data-label="Charged" className="num">
                      {row.status === 'charged' ? usd(row.amount_charged) : '—'}
                    </td>
                    <td data-label="Usage">{usage(row)}</td>
                    <td data-label="Resource" className="mono wrap">
                      {row.id}
                    </td>
                    <td data-label="Settled">{when(row.settled_at)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <ErrorNote error={more.error} retry={showMore} />
          {more.hasMore && (
            <button type="button" onClick={() => void showMore()} disabled={more.busy === true}>
              Show more
            </button>
          )}
        </section>
      )}
    </>
  );
}
