import type { LedgerEntry } from '@oc/contracts';
import { useState } from 'react';
import { API, api, query } from '../api';
import { usd, when } from '../format';
import { Empty, ErrorNote, Loading, PageHeader, useLoad } from '../ui';

const PAGE = 50;

export function Ledger() {
  const [cursors, setCursors] = useState<string[]>([]);
  const after = cursors.at(-1);
  const page = useLoad(() => api<{ data: LedgerEntry[]; has_more: boolean }>('GET', `/ledger${query({ limit: PAGE, after })}`), [after]);
  return (
    <>
      <PageHeader title="Ledger">
        <a className="button" href={`${API}/ledger.csv`} download>
          Export CSV
        </a>
      </PageHeader>
      <p className="muted">
        Every movement of your balance, newest first: credits, reservations (funds held for work), captures (what the work cost; the
        rest returns) and releases. “Available after” is the running balance.
      </p>
      <ErrorNote error={page.error} retry={page.reload} />
      {page.loading && <Loading what="the ledger" />}
      {page.data?.data.length === 0 && <Empty>No entries yet.</Empty>}
      {page.data && page.data.data.length > 0 && (
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Type</th>
                <th scope="col">Description</th>
                <th scope="col">Reference</th>
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
                  <td>{when(e.created)}</td>
                  <td>
                    <span className={`badge ${e.type}`}>{e.type}</span>
                  </td>
                  <td>{e.description}</td>
                  <td className="mono">{e.reference ?? '—'}</td>
                  <td className="num">{usd(e.amount)}</td>
                  <td className="num">{e.type === 'capture' ? usd(e.charged) : '—'}</td>
                  <td className="num">{usd(e.available_after)}</td>
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
    </>
  );
}
