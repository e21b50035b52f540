import {
  type ApiKey,
  type Balance,
  type DailySpend,
  type LedgerEntry,
  LIMIT_NAMES,
  type Member,
  type Organization,
  type Tier,
  TIERS,
  type UsageReport,
  type Webhook,
} from '@oc/contracts';
import { useState } from 'react';
import { Link } from 'wouter';
import { api, query } from '../api';
import { usd, when } from '../format';
import { ConfirmButton, Empty, ErrorNote, Loading, PageHeader, useLoad, useSubmit } from '../ui';

const org = (id: string) => `/admin/organizations/${encodeURIComponent(id)}`;
const LEDGER_PAGE = 20;
const SPEND_DAYS = 30;

/**
 * A limit as typed: digits only. Number('7,500') is NaN, which JSON sends as null, and null gives the figure back
 * to the tier: a typo must stop here instead. Separators are refused rather than read, since 7,500 and 7.500 mean
 * different numbers in different locales.
 */
function limitFigure(name: string, typed: string): number {
  const figure = Number(typed);
  if (/^\d+$/.test(typed) && figure >= 1 && Number.isSafeInteger(figure)) return figure;
  document.getElementById(`limit-${name}`)?.focus();
  throw new Error(
    `${name.replaceAll('_', ' ')}: “${typed}” is not a whole number of 1 or more. Type digits only (7500, not 7,500), or “default” for the tier’s figure. Nothing was changed.`,
  );
}

/** A USD amount as typed: a positive number with at most six decimals (the service counts micro-dollars). */
const creditAmount = (typed: string): number | undefined => (/^\d+(\.\d{1,6})?$/.test(typed.trim()) && Number(typed) > 0 ? Number(typed) : undefined);

/**
 * Everything about one organization for an operator: balance, tier and limits, spend per day, usage by key and
 * model, API keys, the ledger, webhooks and members. Credit and tier changes are confirmed in a dialog naming the
 * amount or tier and the organization, and then said in a status message.
 */
export function OrganizationDetail({ id }: { id: string }) {
  const organization = useLoad(() => api<Organization>('GET', org(id)), [id]);
  const balance = useLoad(() => api<Balance>('GET', `${org(id)}/balance`), [id]);
  const [done, setDone] = useState<string | undefined>(undefined);
  /** Credits added here: the ledger is read again after each, its new entry on top. */
  const [credits, setCredits] = useState(0);
  const o = organization.data;
  return (
    <>
      <PageHeader title={o ? o.name : 'Organization'}>
        <Link href="/">All organizations</Link>
      </PageHeader>
      <ErrorNote error={organization.error} retry={organization.reload} />
      {organization.loading && <Loading what="the organization" />}
      {done && (
        <p className="ok" role="status">
          {done}
        </p>
      )}
      {o && (
        <>
          <section className="cards" aria-label="Balance and tier">
            <div className="card">
              <h2>Available</h2>
              <p className="figure" data-testid="available">
                {balance.data ? usd(balance.data.available) : '…'}
              </p>
            </div>
            <div className="card">
              <h2>Reserved</h2>
              <p className="figure" data-testid="reserved">
                {balance.data ? usd(balance.data.reserved) : '…'}
              </p>
            </div>
            <div className="card">
              <h2>Tier</h2>
              <p className="figure tier">{o.tier}</p>
              <p className="muted mono">{o.id}</p>
            </div>
          </section>
          <ErrorNote error={balance.error} retry={balance.reload} />
          <div className="split">
            <CreditPanel
              organization={o}
              onCredited={async (amount) => {
                const after = await api<Balance>('GET', `${org(id)}/balance`);
                await balance.reload();
                setCredits((n) => n + 1);
                setDone(`Added ${usd(amount)} to ${o.name}. Available balance: ${usd(after.available)}.`);
              }}
              onStart={() => setDone(undefined)}
            />
            <TierPanel
              organization={o}
              onChanged={async (from, to) => {
                await organization.reload();
                setDone(`${o.name} moved from the ${from} tier to the ${to} tier; its limits changed with it.`);
              }}
              onStart={() => setDone(undefined)}
            />
          </div>
          <LimitsPanel organization={o} onChanged={organization.reload} />
          <SpendPanel id={id} />
          <UsagePanel id={id} />
          <KeysPanel id={id} />
          <LedgerPanel key={credits} id={id} />
          <WebhooksPanel id={id} />
          <MembersPanel id={id} />
        </>
      )}
    </>
  );
}

function CreditPanel(props: { organization: Organization; onCredited: (amount: number) => Promise<void>; onStart: () => void }) {
  const [typed, setTyped] = useState('');
  const [description, setDescription] = useState('');
  const amount = creditAmount(typed);
  return (
    <section className="panel" aria-labelledby="credit-title">
      <h2 id="credit-title">Add credit</h2>
      <form className="grid-form" onSubmit={(event) => event.preventDefault()}>
        <div>
          <label htmlFor="credit-amount">Amount (USD)</label>
          <input id="credit-amount" name="amount" inputMode="decimal" value={typed} onChange={(e) => setTyped(e.target.value)} required />
        </div>
        <div>
          <label htmlFor="credit-description">Description</label>
          <input id="credit-description" name="description" maxLength={500} placeholder="Credit" value={description} onChange={(e) => setDescription(e.target.value)} />
        </div>
        {typed.trim() !== '' && amount === undefined && (
          <p className="error" role="alert">
            Type an amount in USD greater than 0, with at most six decimals (12.50).
          </p>
        )}
        <div>
          <ConfirmButton
            label="Add credit…"
            className="primary"
            confirmClassName="primary"
            disabled={amount === undefined}
            title={`Add ${usd(amount ?? 0)} to ${props.organization.name}?`}
            confirmLabel="Add credit"
            onConfirm={async () => {
              props.onStart();
              const text = description.trim();
              await api('POST', `${org(props.organization.id)}/credits`, { amount, ...(text ? { description: text } : {}) });
              setTyped('');
              setDescription('');
              await props.onCredited(amount!);
            }}
          >
            <p>
              {props.organization.name} (<span className="mono">{props.organization.id}</span>) can spend it at once. A credit is not undone
              from the console.
            </p>
          </ConfirmButton>
        </div>
      </form>
    </section>
  );
}

function TierPanel(props: { organization: Organization; onChanged: (from: Tier, to: Tier) => Promise<void>; onStart: () => void }) {
  const current = props.organization.tier;
  const [tier, setTier] = useState<Tier>(current);
  return (
    <section className="panel" aria-labelledby="tier-title">
      <h2 id="tier-title">Tier</h2>
      <form className="grid-form" onSubmit={(event) => event.preventDefault()}>
        <div>
          <label htmlFor="tier-select">Tier</label>
          <select id="tier-select" name="tier" value={tier} onChange={(e) => setTier(e.target.value as Tier)}>
            {TIERS.map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </div>
        <div>
          <ConfirmButton
            label="Change tier…"
            className=""
            confirmClassName="primary"
            disabled={tier === current}
            title={`Move ${props.organization.name} from ${current} to ${tier}?`}
            confirmLabel={`Change to ${tier}`}
            onConfirm={async () => {
              props.onStart();
              await api('PATCH', org(props.organization.id), { tier });
              await props.onChanged(current, tier);
            }}
          >
            <p>Its requests are limited by the {tier} tier’s figures from its next request (custom limits apply to enterprise only).</p>
          </ConfirmButton>
        </div>
      </form>
    </section>
  );
}

function LimitsPanel({ organization: o, onChanged }: { organization: Organization; onChanged: () => Promise<void> }) {
  const limits = useSubmit(async (form) => {
    const change: Record<string, number | null> = {};
    for (const name of LIMIT_NAMES) {
      const value = String(form.get(name) ?? '').trim();
      if (value === 'default') change[name] = null;
      else if (value !== '') change[name] = limitFigure(name, value);
    }
    await api('PATCH', org(o.id), { limits: change });
    await onChanged();
  });
  return (
    <section className="panel" aria-labelledby="limits-title">
      <h2 id="limits-title">Limits</h2>
      <dl className="facts" aria-label="Limits in force">
        {LIMIT_NAMES.map((name) => (
          <div key={name}>
            <dt>{name.replaceAll('_', ' ')}</dt>
            <dd data-testid={`limit-${name}`}>{o.limits[name].toLocaleString('en-US')}</dd>
          </div>
        ))}
      </dl>
      <p className="muted">Custom figures are for enterprise organizations. Leave a field empty to keep it; “default” gives it back to the tier.</p>
      <form onSubmit={limits.onSubmit} className="grid-form limits">
        {LIMIT_NAMES.map((name) => (
          <div key={name}>
            <label htmlFor={`limit-${name}`}>{name.replaceAll('_', ' ')}</label>
            <input id={`limit-${name}`} name={name} placeholder={String(o.limits[name])} inputMode="numeric" />
          </div>
        ))}
        <ErrorNote error={limits.error} />
        <div>
          <button type="submit" disabled={limits.busy}>
            Set limits
          </button>
        </div>
      </form>
    </section>
  );
}

/** What usage charged on each UTC day with a charge, over the last 30 days, as labelled bars. */
function SpendPanel({ id }: { id: string }) {
  const spend = useLoad(() => api<DailySpend>('GET', `${org(id)}/spend${query({ days: SPEND_DAYS })}`), [id]);
  const days = spend.data?.days.filter((d) => d.amount > 0) ?? [];
  const most = Math.max(0, ...days.map((d) => d.amount));
  return (
    <section className="panel" aria-labelledby="spend-title">
      <h2 id="spend-title">Spend per day (last {SPEND_DAYS} days, UTC)</h2>
      <ErrorNote error={spend.error} retry={spend.reload} />
      {spend.loading && <Loading what="spend" />}
      {spend.data && (
        <>
          <p>
            Total: <strong data-testid="spend-total">{usd(spend.data.total)}</strong>
          </p>
          {days.length === 0 ? (
            <Empty>Nothing was charged in the last {SPEND_DAYS} days.</Empty>
          ) : (
            <ul className="bars" aria-label="Spend per day">
              {days.map((d) => (
                <li key={d.date}>
                  <span className="bar-label">{d.date}</span>
                  <span className="bar-track" aria-hidden="true">
                    <span className="bar" style={{ width: `${Math.max(1, (d.amount / most) * 100)}%` }} />
                  </span>
                  <span className="bar-value num">{usd(d.amount)}</span>
                </li>
              ))}
            </ul>
          )}
        </>
      )}
    </section>
  );
}

/** The admin usage report for this organization by key and model, the last 30 days (its default window). */
function UsagePanel({ id }: { id: string }) {
  const usage = useLoad(() => api<UsageReport>('GET', `/admin/usage${query({ org_id: id, group_by: 'key,model', limit: 100 })}`), [id]);
  return (
    <section className="panel" aria-labelledby="usage-title">
      <h2 id="usage-title">Usage by key and model</h2>
      <ErrorNote error={usage.error} retry={usage.reload} />
      {usage.loading && <Loading what="usage" />}
      {usage.data && (
        <p className="muted">
          {usage.data.start} to {usage.data.end} (UTC){usage.data.has_more ? '; the first 100 rows' : ''}.
        </p>
      )}
      {usage.data?.data.length === 0 && <Empty>No paid requests in this period.</Empty>}
      {usage.data && usage.data.data.length > 0 && (
        <div className="table-wrap">
          <table className="stacked" aria-label="Usage by key and model">
            <thead>
              <tr>
                <th scope="col">API key</th>
                <th scope="col">Model</th>
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
                  Charged
                </th>
              </tr>
            </thead>
            <tbody>
              {usage.data.data.map((row) => (
                <tr key={`${row.key_id ?? ''}/${row.model ?? ''}`}>
                  <td data-label="API key" className="wrap">
                    {row.key_name ?? row.key_id ?? '—'}
                  </td>
                  <td data-label="Model">{row.model ?? '—'}</td>
                  <td data-label="Requests" className="num">
                    {row.requests.toLocaleString('en-US')}
                  </td>
                  <td data-label="Input tokens" className="num">
                    {row.input_tokens.toLocaleString('en-US')}
                  </td>
                  <td data-label="Output tokens" className="num">
                    {row.output_tokens.toLocaleString('en-US')}
                  </td>
                  <td data-label="Video seconds" className="num">
                    {row.seconds.toLocaleString('en-US')}
                  </td>
                  <td data-label="Charged" className="num">
                    {usd(row.revenue)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function KeysPanel({ id }: { id: string }) {
  const keys = useLoad(() => api<{ data: ApiKey[] }>('GET', `${org(id)}/keys`), [id]);
  return (
    <section className="panel" aria-labelledby="keys-title">
      <h2 id="keys-title">API keys</h2>
      <ErrorNote error={keys.error} retry={keys.reload} />
      {keys.loading && <Loading what="API keys" />}
      {keys.data?.data.length === 0 && <Empty>No API keys yet.</Empty>}
      {keys.data && keys.data.data.length > 0 && (
        <div className="table-wrap">
          <table className="stacked" aria-label="API keys">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Prefix</th>
                <th scope="col">Scopes</th>
                <th scope="col">Models</th>
                <th scope="col">Last used</th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              {keys.data.data.map((k) => (
                <tr key={k.id}>
                  <td data-label="Name" className="wrap">
                    {k.name}
                  </td>
                  <td data-label="Prefix" className="mono">
                    {k.prefix}
                  </td>
                  <td data-label="Scopes">
                    <ul className="tags">
                      {k.scopes.map((s) => (
                        <li key={s}>{s}</li>
                      ))}
                    </ul>
                  </td>
                  <td data-label="Models" className="wrap">
                    {k.allowed_models === null ? 'All models' : k.allowed_models.join(', ')}
                  </td>
                  <td data-label="Last used">{k.last_used_at === null ? 'Never' : when(k.last_used_at)}</td>
                  <td data-label="Status">
                    {k.revoked_at === null ? (
                      <span className="badge active">active</span>
                    ) : (
                      <span className="badge revoked">revoked {when(k.revoked_at)}</span>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function LedgerPanel({ id }: { id: string }) {
  const [cursors, setCursors] = useState<string[]>([]);
  const after = cursors.at(-1);
  const page = useLoad(() => api<{ data: LedgerEntry[]; has_more: boolean }>('GET', `${org(id)}/ledger${query({ limit: LEDGER_PAGE, after })}`), [id, after]);
  return (
    <section className="panel" aria-labelledby="ledger-title">
      <h2 id="ledger-title">Ledger</h2>
      <p className="muted">Every movement of the balance, newest first.</p>
      <ErrorNote error={page.error} retry={page.reload} />
      {page.loading && <Loading what="the ledger" />}
      {page.data?.data.length === 0 && <Empty>No entries yet.</Empty>}
      {page.data && page.data.data.length > 0 && (
        <div className="table-wrap">
          <table className="stacked" aria-label="Ledger">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Type</th>
                <th scope="col">Description</th>
                <th scope="col" className="num">
                  Amount
                </th>
                <th scope="col" className="num">
                  Charged
                </th>
                <th scope="col" className="num">
                  Available after
                </th>
              </tr>
            </thead>
            <tbody>
              {page.data.data.map((e) => (
                <tr key={e.id}>
                  <td data-label="When">{when(e.created)}</td>
                  <td data-label="Type">
                    <span className={`badge ${e.type}`}>{e.type}</span>
                  </td>
                  <td data-label="Description" className="wrap">
                    {e.description}
                  </td>
                  <td data-label="Amount" className="num">
                    {usd(e.amount)}
                  </td>
                  <td data-label="Charged" className="num">
                    {e.type === 'capture' ? usd(e.charged) : '—'}
                  </td>
                  <td data-label="Available after" className="num">
                    {usd(e.available_after)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div className="actions">
        {cursors.length > 0 && (
          <button type="button" onClick={() => setCursors(cursors.slice(0, -1))}>
            Newer
          </button>
        )}
        {page.data?.has_more && (
          <button type="button" onClick={() => setCursors([...cursors, page.data!.data.at(-1)!.id])}>
            Older
          </button>
        )}
      </div>
    </section>
  );
}

function WebhooksPanel({ id }: { id: string }) {
  const webhooks = useLoad(() => api<{ data: Webhook[] }>('GET', `${org(id)}/webhooks`), [id]);
  return (
    <section className="panel" aria-labelledby="webhooks-title">
      <h2 id="webhooks-title">Webhooks</h2>
      <ErrorNote error={webhooks.error} retry={webhooks.reload} />
      {webhooks.loading && <Loading what="webhooks" />}
      {webhooks.data?.data.length === 0 && <Empty>No webhooks.</Empty>}
      {webhooks.data && webhooks.data.data.length > 0 && (
        <div className="table-wrap">
          <table className="stacked" aria-label="Webhooks">
            <thead>
              <tr>
                <th scope="col">URL</th>
                <th scope="col">Events</th>
                <th scope="col">State</th>
                <th scope="col" className="num">
                  Failures in a row
                </th>
                <th scope="col">Last failure</th>
                <th scope="col">Last success</th>
              </tr>
            </thead>
            <tbody>
              {webhooks.data.data.map((w) => (
                <tr key={w.id}>
                  <td data-label="URL" className="mono">
                    {w.url}
                  </td>
                  <td data-label="Events">
                    <ul className="tags">
                      {w.events.map((e) => (
                        <li key={e}>{e}</li>
                      ))}
                    </ul>
                  </td>
                  <td data-label="State">
                    <span className={`badge ${w.is_active ? 'active' : 'inactive'}`}>{w.is_active ? 'active' : 'inactive'}</span>
                  </td>
                  <td data-label="Failures in a row" className="num">
                    {w.failure_count}
                  </td>
                  <td data-label="Last failure">{when(w.last_failure_at)}</td>
                  <td data-label="Last success">{when(w.last_success_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function MembersPanel({ id }: { id: string }) {
  const members = useLoad(() => api<{ data: Member[] }>('GET', `${org(id)}/members`), [id]);
  const member = useSubmit(async (form) => {
    const name = String(form.get('name') ?? '').trim();
    await api('POST', `${org(id)}/members`, { email: String(form.get('email')), password: String(form.get('password')), ...(name ? { name } : {}) });
    await members.reload();
  });
  return (
    <section className="panel" aria-labelledby="members-title">
      <h2 id="members-title">Console members</h2>
      <ErrorNote error={members.error} retry={members.reload} />
      {members.data?.data.length === 0 && <Empty>No members yet.</Empty>}
      <ul className="plain">
        {members.data?.data.map((m) => (
          <li key={m.id} className="row">
            <span>
              {m.name ? `${m.name} · ` : ''}
              {m.email}
            </span>
            <ConfirmButton
              label="Remove"
              title={`Remove ${m.email}?`}
              confirmLabel="Remove member"
              onConfirm={async () => {
                await api('DELETE', `${org(id)}/members/${encodeURIComponent(m.id)}`);
                await members.reload();
              }}
            >
              <p>Their console sessions end at once.</p>
            </ConfirmButton>
          </li>
        ))}
      </ul>
      <form onSubmit={member.onSubmit} className="grid-form">
        <div>
          <label htmlFor="member-email">Email</label>
          <input id="member-email" name="email" type="email" required autoComplete="off" />
        </div>
        <div>
          <label htmlFor="member-name">Name (optional)</label>
          <input id="member-name" name="name" maxLength={200} autoComplete="off" />
        </div>
        <div>
          <label htmlFor="member-password">Password (12 characters or more)</label>
          <input id="member-password" name="password" type="password" minLength={12} required autoComplete="new-password" />
        </div>
        <ErrorNote error={member.error} />
        <div>
          <button type="submit" disabled={member.busy}>
            Add member
          </button>
        </div>
      </form>
    </section>
  );
}
