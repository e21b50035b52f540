import { KEY_USAGE_GROUPS, type KeyUsageGroup, type KeyUsageReport, type KeyUsageRow } from '@oc/contracts';
import { type FormEvent, useState } from 'react';
import { API, api, query } from '../api';
import { usd } from '../format';
import { Empty, ErrorNote, Loading, PageHeader, useLoad } from '../ui';

const GROUP_LABELS: Record<KeyUsageGroup, string> = { key: 'API key', model: 'Model', day: 'Day (UTC)' };
const CHART_TITLES: Record<KeyUsageGroup, string> = { key: 'Spend by API key', model: 'Spend by model', day: 'Spend by day (UTC)' };

/** Rows a page shows; the CSV takes up to the API's most, 10,000. */
const PAGE_ROWS = 500;
const CSV_ROWS = 10_000;

const count = (n: number) => n.toLocaleString('en-US');

/** A key by its name where it has one, else its id; null where the charges named no key or model. */
function label(row: KeyUsageRow, group: KeyUsageGroup): string {
  if (group === 'key') return row.key_name ?? row.key_id ?? 'No key recorded';
  if (group === 'model') return row.model ?? 'No model recorded';
  return row.day ?? '';
}

interface Params {
  start?: string | undefined;
  end?: string | undefined;
  group_by: string;
}

export function Usage() {
  const [params, setParams] = useState<Params>({ group_by: 'key,model' });
  const [more, setMore] = useState<{ rows: KeyUsageRow[]; after: string | null; error?: unknown; busy?: boolean }>({ rows: [], after: null });
  const report = useLoad(async () => {
    const first = await api<KeyUsageReport>('GET', `/usage${query({ ...params, limit: PAGE_ROWS })}`);
    setMore({ rows: [], after: first.next_after });
    return first;
  }, [params]);
  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const text = (name: string) => String(form.get(name) ?? '').trim() || undefined;
    setParams({ start: text('start'), end: text('end'), group_by: form.getAll('group_by').join(',') });
  };
  const showMore = async () => {
    if (more.after === null) return;
    setMore((m) => ({ ...m, busy: true, error: undefined }));
    try {
      const page = await api<KeyUsageReport>('GET', `/usage${query({ ...params, limit: PAGE_ROWS, after: more.after })}`);
      setMore((m) => ({ rows: [...m.rows, ...page.data], after: page.next_after }));
    } catch (error) {
      setMore((m) => ({ ...m, busy: false, error }));
    }
  };
  const r = report.data;
  const rows = r ? [...r.data, ...more.rows] : [];
  const csv = `${API}/usage${query({ ...params, limit: CSV_ROWS, format: 'csv' })}`;
  return (
    <>
      <PageHeader title="Usage">
        <a className="button" href={csv} download>
          Download CSV
        </a>
      </PageHeader>
      <p className="muted">
        What your organization’s paid requests used and were charged, by API key, model and day. Days are UTC and both included; without dates,
        the last 30 days. Test keys are never charged, so their requests are not counted here.
      </p>
      <section className="panel" aria-labelledby="usage-form-title">
        <h2 id="usage-form-title">Report</h2>
        <form onSubmit={submit} className="grid-form" aria-label="Usage report">
          <div>
            <label htmlFor="usage-start">From</label>
            <input id="usage-start" name="start" type="date" />
          </div>
          <div>
            <label htmlFor="usage-end">To</label>
            <input id="usage-end" name="end" type="date" />
          </div>
          <fieldset>
            <legend>Group by</legend>
            <div className="checks">
              {KEY_USAGE_GROUPS.map((group) => (
                <label key={group} className="check">
                  <input type="checkbox" name="group_by" value={group} defaultChecked={params.group_by.split(',').includes(group)} />
                  {GROUP_LABELS[group]}
                </label>
              ))}
            </div>
          </fieldset>
          <div>
            <button type="submit" className="primary" disabled={report.loading}>
              Show usage
            </button>
          </div>
        </form>
      </section>
      <ErrorNote error={report.error} retry={report.reload} />
      {report.loading && <Loading what="usage" />}
      {r && rows.length === 0 && <Empty>No paid requests in these days.</Empty>}
      {r && rows.length > 0 && (
        <>
          <SpendChart rows={rows} groups={r.group_by} />
          <section className="panel" aria-labelledby="usage-table-title">
            <h2 id="usage-table-title">
              Usage, {r.start} to {r.end}
            </h2>
            <div className="table-wrap">
              {/* Under 640 px each row is a card: every cell under its column's name (data-label). */}
              <table className="stacked">
                <thead>
                  <tr>
                    {r.group_by.map((group) => (
                      <th key={group} scope="col">
                        {GROUP_LABELS[group]}
                      </th>
                    ))}
                    <th scope="col" className="num">
                      Requests
                    </th>
                    <th scope="col" className="num">
                      Input tokens
                    </th>
                    <th scope="col" className="num">
                      Output tokens
                    </th>
                    <th scope="col" className="num">
                      Video seconds
                    </th>
                    <th scope="col" className="num">
                      Spend
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {rows.map((row) => (
                    <tr key={JSON.stringify(r.group_by.map((group) => (group === 'key' ? row.key_id : row[group])))}>
                      {r.group_by.map((group) => (
                        <td key={group} data-label={GROUP_LABELS[group]} className={group === 'key' && row.key_name === null ? 'mono wrap' : 'wrap'}>
                          {label(row, group)}
                        </td>
                      ))}
                      <td data-label="Requests" className="num">
                        {count(row.requests)}
                      </td>
                      <td data-label="Input tokens" className="num">
                        {count(row.input_tokens)}
                      </td>
                      <td data-label="Output tokens" className="num">
                        {count(row.output_tokens)}
                      </td>
                      <td data-label="Video seconds" className="num">
                        {count(row.seconds)}
                      </td>
                      <td data-label="Spend" className="num">
                        {usd(row.spend)}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <ErrorNote error={more.error} retry={showMore} />
            {more.after !== null && (
              <button type="button" onClick={() => void showMore()} disabled={more.busy === true}>
                Show more rows
              </button>
            )}
          </section>
        </>
      )}
    </>
  );
}

/**
 * Spend by day where the report is grouped by day, else by its first group: bars drawn with CSS widths, each
 * labelled with its amount, so the figures read without the chart and no charting library is loaded for it.
 */
function SpendChart({ rows, groups }: { rows: KeyUsageRow[]; groups: KeyUsageGroup[] }) {
  const by: KeyUsageGroup | undefined = groups.includes('day') ? 'day' : groups[0];
  if (by === undefined) return null;
  const sums = new Map<string, number>();
  for (const row of rows) sums.set(label(row, by), (sums.get(label(row, by)) ?? 0) + row.spend);
  const bars = [...sums.entries()];
  const most = Math.max(...bars.map(([, spend]) => spend));
  return (
    <section className="panel" aria-labelledby="usage-chart-title">
      <h2 id="usage-chart-title">{CHART_TITLES[by]}</h2>
      <ul className="bars" aria-label={CHART_TITLES[by]}>
        {bars.map(([name, spend]) => (
          <li key={name}>
            <span className="bar-label">{name}</span>
            <span className="bar-track" aria-hidden="true">
              <span className="bar" style={{ width: `${most > 0 ? Math.max(1, (spend / most) * 100) : 0}%` }} />
            </span>
            <span className="bar-value num">{usd(spend)}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
