import { type Organization, TIERS } from '@oc/contracts';
import { type FormEvent, useState } from 'react';
import { Link } from 'wouter';
import { api, query } from '../api';
import { usd, when } from '../format';
import { Empty, ErrorNote, Loading, PageHeader, useLoad, useSubmit } from '../ui';

const ADMIN = '/admin/organizations';

/** An organization as the list answers it: with its balance. */
type Listed = Organization & { balance: { available: number; reserved: number } };

/** The operators' list: newest first, or what a search finds (by name prefix in any case, or by id), each with its balance. */
export function Organizations() {
  const [cursors, setCursors] = useState<string[]>([]);
  const [q, setQ] = useState('');
  const after = cursors.at(-1);
  const orgs = useLoad(
    () => api<{ data: Listed[]; has_more: boolean }>('GET', `${ADMIN}${query({ limit: 50, after, ...(q ? { q } : {}) })}`),
    [after, q],
  );
  const search = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    setQ(String(new FormData(event.currentTarget).get('q') ?? '').trim());
    setCursors([]);
  };
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
      <form role="search" onSubmit={search} className="grid-form" aria-label="Organizations">
        <div>
          <label htmlFor="org-search">Search organizations</label>
          <input id="org-search" name="q" type="search" maxLength={200} placeholder="Start of a name, or an org_ id" />
        </div>
        <div className="actions">
          <button type="submit">Search</button>
          {q && (
            <button type="button" className="link" onClick={() => (setQ(''), setCursors([]))}>
              Show all
            </button>
          )}
        </div>
      </form>
      <ErrorNote error={orgs.error} retry={orgs.reload} />
      {orgs.loading && <Loading what="organizations" />}
      {orgs.data?.data.length === 0 && <Empty>{q ? `No organization’s name starts with “${q}”, and none has that id.` : 'No organizations yet.'}</Empty>}
      {orgs.data && orgs.data.data.length > 0 && (
        <div className="table-wrap">
          <table className="stacked" aria-label="Organizations">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Tier</th>
                <th scope="col" className="num">
                  Available
                </th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {orgs.data.data.map((o) => (
                <tr key={o.id}>
                  <td data-label="Name" className="wrap">
                    <Link href={`/organizations/${encodeURIComponent(o.id)}`}>{o.name}</Link>
                  </td>
                  <td data-label="Id" className="mono">
                    {o.id}
                  </td>
                  <td data-label="Tier">{o.tier}</td>
                  <td data-label="Available" className="num" data-testid="org-available">
                    {usd(o.balance.available)}
                  </td>
                  <td data-label="Created">{when(o.created)}</td>
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
