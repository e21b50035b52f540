import { type Balance, LIMIT_NAMES, type Member, type Organization, TIERS } from '@oc/contracts';
import { type FormEvent, useState } from 'react';
import { Link } from 'wouter';
import { api, query } from '../api';
import { usd, when } from '../format';
import { ConfirmButton, Empty, ErrorNote, Loading, PageHeader, useLoad } from '../ui';

const ADMIN = '/admin/organizations';
const org = (id: string) => `${ADMIN}/${encodeURIComponent(id)}`;

/** Runs a form's work, shows its error, and clears the form when it succeeds. */
function useSubmit(work: (form: FormData) => Promise<unknown>) {
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const onSubmit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const element = event.currentTarget;
    setBusy(true);
    setError(undefined);
    try {
      await work(new FormData(element));
      element.reset();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return { onSubmit, error, busy };
}

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

export function Organizations() {
  const [cursors, setCursors] = useState<string[]>([]);
  const after = cursors.at(-1);
  const orgs = useLoad(() => api<{ data: Organization[]; has_more: boolean }>('GET', `${ADMIN}${query({ limit: 50, after })}`), [after]);
  const create = useSubmit(async (form) => {
    await api('POST', ADMIN, { name: String(form.get('name')), tier: String(form.get('tier')) });
    setCursors([]);
    await orgs.reload();
  });
  return (
    <>
      <PageHeader title="Organizations" />
      <section className="panel" aria-labelledby="create-org-title">
        <h2 id="create-org-title">Create an organization</h2>
        <form onSubmit={create.onSubmit} className="grid-form">
          <div>
            <label htmlFor="org-name">Name</label>
            <input id="org-name" name="name" required maxLength={200} />
          </div>
          <div>
            <label htmlFor="org-tier">Tier</label>
            <select id="org-tier" name="tier" defaultValue="free">
              {TIERS.map((t) => (
                <option key={t}>{t}</option>
              ))}
            </select>
          </div>
          <ErrorNote error={create.error} />
          <div>
            <button type="submit" className="primary" disabled={create.busy}>
              Create
            </button>
          </div>
        </form>
      </section>
      <ErrorNote error={orgs.error} />
      {orgs.loading && <Loading what="organizations" />}
      {orgs.data?.data.length === 0 && <Empty>No organizations yet.</Empty>}
      {orgs.data && orgs.data.data.length > 0 && (
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Tier</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {orgs.data.data.map((o) => (
                <tr key={o.id}>
                  <td>
                    <Link href={`/organizations/${encodeURIComponent(o.id)}`}>{o.name}</Link>
                  </td>
                  <td className="mono">{o.id}</td>
                  <td>{o.tier}</td>
                  <td>{when(o.created)}</td>
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
        {orgs.data?.has_more && (
          <button type="button" onClick={() => setCursors([...cursors, orgs.data!.data.at(-1)!.id])}>
            Older
          </button>
        )}
      </div>
    </>
  );
}

export function OrganizationDetail({ id }: { id: string }) {
  const organization = useLoad(() => api<Organization>('GET', org(id)), [id]);
  const balance = useLoad(() => api<Balance>('GET', `${org(id)}/balance`), [id]);
  const members = useLoad(() => api<{ data: Member[] }>('GET', `${org(id)}/members`), [id]);
  const tier = useSubmit(async (form) => {
    await api('PATCH', org(id), { tier: String(form.get('tier')) });
    await Promise.all([organization.reload(), balance.reload()]);
  });
  const limits = useSubmit(async (form) => {
    const change: Record<string, number | null> = {};
    for (const name of LIMIT_NAMES) {
      const value = String(form.get(name) ?? '').trim();
      if (value === 'default') change[name] = null;
      else if (value !== '') change[name] = limitFigure(name, value);
    }
    await api('PATCH', org(id), { limits: change });
    await organization.reload();
  });
  const credit = useSubmit(async (form) => {
    const description = String(form.get('description') ?? '').trim();
    await api('POST', `${org(id)}/credits`, { amount: Number(form.get('amount')), ...(description ? { description } : {}) });
    await balance.reload();
  });
  const member = useSubmit(async (form) => {
    const name = String(form.get('name') ?? '').trim();
    await api('POST', `${org(id)}/members`, { email: String(form.get('email')), password: String(form.get('password')), ...(name ? { name } : {}) });
    await members.reload();
  });
  const o = organization.data;
  return (
    <>
      <PageHeader title={o ? o.name : 'Organization'}>
        <Link href="/">All organizations</Link>
      </PageHeader>
      <ErrorNote error={organization.error} />
      {organization.loading && <Loading what="the organization" />}
      {o && (
        <>
          <section className="cards" aria-label="Balance and tier">
            <div className="card">
              <h2>Available</h2>
              <p className="figure">{balance.data ? usd(balance.data.available) : '…'}</p>
            </div>
            <div className="card">
              <h2>Reserved</h2>
              <p className="figure">{balance.data ? usd(balance.data.reserved) : '…'}</p>
            </div>
            <div className="card">
              <h2>Tier</h2>
              <p className="figure tier">{o.tier}</p>
              <p className="muted mono">{o.id}</p>
            </div>
          </section>
          <div className="split">
            <section className="panel" aria-labelledby="credit-title">
              <h2 id="credit-title">Add credit</h2>
              <form onSubmit={credit.onSubmit} className="grid-form">
                <div>
                  <label htmlFor="credit-amount">Amount (USD)</label>
                  <input id="credit-amount" name="amount" type="number" min="0.000001" step="any" required inputMode="decimal" />
                </div>
                <div>
                  <label htmlFor="credit-description">Description</label>
                  <input id="credit-description" name="description" maxLength={500} placeholder="Credit" />
                </div>
                <ErrorNote error={credit.error} />
                <div>
                  <button type="submit" className="primary" disabled={credit.busy}>
                    Add credit
                  </button>
                </div>
              </form>
            </section>
            <section className="panel" aria-labelledby="tier-title">
              <h2 id="tier-title">Tier</h2>
              <form onSubmit={tier.onSubmit} className="grid-form" key={o.tier}>
                <div>
                  <label htmlFor="tier-select">Tier</label>
                  <select id="tier-select" name="tier" defaultValue={o.tier}>
                    {TIERS.map((t) => (
                      <option key={t}>{t}</option>
                    ))}
                  </select>
                </div>
                <ErrorNote error={tier.error} />
                <div>
                  <button type="submit" disabled={tier.busy}>
                    Change tier
                  </button>
                </div>
              </form>
            </section>
          </div>
          <section className="panel" aria-labelledby="limits-title">
            <h2 id="limits-title">Limits</h2>
            <dl className="facts" aria-label="Limits in force">
              {LIMIT_NAMES.map((name) => (
                <div key={name}>
                  <dt>{name.replaceAll('_', ' ')}</dt>
                  <dd data-testid={`limit-${name}`}>
                    {o.limits[name].toLocaleString('en-US')}
                  </dd>
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
          <section className="panel" aria-labelledby="members-title">
            <h2 id="members-title">Console members</h2>
            <ErrorNote error={members.error} />
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
        </>
      )}
    </>
  );
}
