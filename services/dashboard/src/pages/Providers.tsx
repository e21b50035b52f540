import { type DeploymentStatus, type DeploymentStatusList, USAGE_GROUPS, type UsageReport } from '@oc/contracts';
import { type FormEvent, useState } from 'react';
import { api, query } from '../api';
import { usd } from '../format';
import { Empty, ErrorNote, Loading, PageHeader, useLoad } from '../ui';

/** A circuit opens within seconds of a provider failing: the table follows it while the page is in view. */
const REFRESH_MS = 5_000;

/** The badge colours the other pages use for in use, waiting and refused. */
const CIRCUIT_BADGE: Record<DeploymentStatus['circuit'], string> = { closed: 'active', half_open: 'pending', open: 'failed' };

const GROUP_LABELS: Record<(typeof USAGE_GROUPS)[number], string> = {
  key: 'API key',
  model: 'Model',
  provider: 'Provider',
  deployment: 'Deployment',
  day: 'Day (UTC)',
};

const count = (n: number) => n.toLocaleString('en-US');

/** A row's value of one group: a key by its name where it has one (null: charges recorded without a key or model). */
const groupValue = (row: UsageReport['data'][number], group: (typeof USAGE_GROUPS)[number]) =>
  (group === 'key' ? (row.key_name ?? row.key_id) : row[group]) ?? '—';
const latency = (ms: number | null) => (ms === null ? '—' : `${count(Math.round(ms))} ms`);
const share = (rate: number | null) => (rate === null ? '—' : `${(rate * 100).toFixed(1)} %`);

export function Providers() {
  const deployments = useLoad(() => api<DeploymentStatusList>('GET', '/admin/providers'), [], REFRESH_MS);
  return (
    <>
      <PageHeader title="Providers" />
      <p className="muted">
        Every model’s provider deployments as the router sees them, updated every 5 seconds. A closed circuit is in use; an open one is
        skipped until its cool-down ends; a half-open one lets one trial call through at a time.
      </p>
      <section className="panel" aria-labelledby="deployments-title">
        <h2 id="deployments-title">Deployments</h2>
        <ErrorNote error={deployments.error} retry={deployments.reload} />
        {deployments.loading && <Loading what="deployments" />}
        {deployments.data?.data.length === 0 && <Empty>No deployments configured.</Empty>}
        {deployments.data && deployments.data.data.length > 0 && (
          <div className="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Model</th>
                  <th scope="col">Deployment</th>
                  <th scope="col">Provider</th>
                  <th scope="col">Upstream model</th>
                  <th scope="col">Circuit</th>
                  <th scope="col" className="num">
                    Success rate
                  </th>
                  <th scope="col" className="num">
                    p50
                  </th>
                  <th scope="col" className="num">
                    p99
                  </th>
                  <th scope="col" className="num">
                    In flight
                  </th>
                </tr>
              </thead>
              <tbody>
                {deployments.data.data.map((d) => (
                  <tr key={`${d.model}/${d.id}`} data-deployment-id={d.id}>
                    <td>{d.model}</td>
                    <td className="mono">{d.id}</td>
                    <td>{d.provider}</td>
                    <td className="mono">{d.upstream_model}</td>
                    <td>
                      <span className={`badge ${CIRCUIT_BADGE[d.circuit]}`} data-testid="circuit">
                        {d.circuit.replace('_', ' ')}
                      </span>
                    </td>
                    <td className="num">{share(d.success_rate)}</td>
                    <td className="num">{latency(d.latency_ms.p50)}</td>
                    <td className="num">{latency(d.latency_ms.p99)}</td>
                    <td className="num">{count(d.in_flight)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      <Usage />
    </>
  );
}

type UsageParams = { start?: string | undefined; end?: string | undefined; group_by: string; org_id?: string | undefined };

/** What paid requests used, earned and cost us over a range of days, grouped as the operator chooses. */
function Usage() {
  const [params, setParams] = useState<UsageParams>({ group_by: 'model,provider' });
  const report = useLoad(() => api<UsageReport>('GET', `/admin/usage${query(params)}`), [params]);
  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const text = (name: string) => String(form.get(name) ?? '').trim() || undefined;
    setParams({ start: text('start'), end: text('end'), group_by: form.getAll('group_by').join(','), org_id: text('org_id') });
  };
  const r = report.data;
  return (
    <section className="panel" aria-labelledby="usage-title">
      <h2 id="usage-title">Usage{r ? `, ${r.start} to ${r.end}` : ''}</h2>
      <p className="muted">
        Requests, tokens and seconds that paid requests used, what they earned, and what their providers charge by the catalog’s prices.
        Days are UTC and both included; without dates, the last 30 days.
      </p>
      <form onSubmit={submit} className="grid-form" aria-label="Usage report">
        <div>
          <label htmlFor="usage-start">From</label>
          <input id="usage-start" name="start" type="date" />
        </div>
        <div>
          <label htmlFor="usage-end">To</label>
          <input id="usage-end" name="end" type="date" />
        </div>
        <div>
          <label htmlFor="usage-org">Organization id (optional)</label>
          <input id="usage-org" name="org_id" maxLength={100} autoComplete="off" />
        </div>
        <fieldset>
          <legend>Group by</legend>
          <div className="checks">
            {USAGE_GROUPS.map((group) => (
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
      <ErrorNote error={report.error} retry={report.reload} />
      {report.loading && <Loading what="usage" />}
      {r?.data.length === 0 && <Empty>No paid requests in these days.</Empty>}
      {r && r.data.length > 0 && (
        <div className="table-wrap">
          <table>
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
                  Seconds
                </th>
                <th scope="col" className="num">
                  Revenue
                </th>
                <th scope="col" className="num">
                  Provider cost
                </th>
                <th scope="col" className="num">
                  Margin
                </th>
              </tr>
            </thead>
            <tbody>
              {r.data.map((row) => (
                <tr key={r.group_by.map((group) => (group === 'key' ? row.key_id : row[group])).join('/')}>
                  {r.group_by.map((group) => (
                    <td key={group} className={group === 'deployment' ? 'mono' : undefined}>
                      {groupValue(row, group)}
                    </td>
                  ))}
                  <td className="num">{count(row.requests)}</td>
                  <td className="num">{count(row.input_tokens)}</td>
                  <td className="num">{count(row.output_tokens)}</td>
                  <td className="num">{count(row.seconds)}</td>
                  <td className="num">{usd(row.revenue)}</td>
                  <td className="num">{usd(row.provider_cost)}</td>
                  <td className="num">{usd(row.margin)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
