import type { Balance, CheckoutSession, Organization, Payment } from '@oc/contracts';
import { type FormEvent, useState } from 'react';
import { api } from '../api';
import { usd, when } from '../format';
import { Empty, ErrorNote, Loading, PageHeader, useLoad } from '../ui';
import { AutoRecharge } from './AutoRecharge';

const STATUS_LABEL: Record<Payment['status'], string> = {
  pending: 'Pending',
  failed: 'Failed',
  paid: 'Paid',
  partially_refunded: 'Partly refunded',
  refunded: 'Refunded',
  disputed: 'Disputed',
};

/** What Stripe's Checkout sent the member back with (`?top_up=`), said once on arrival. */
function returnedFrom(): 'success' | 'cancelled' | null {
  const outcome = new URLSearchParams(window.location.search).get('top_up');
  return outcome === 'success' || outcome === 'cancelled' ? outcome : null;
}

/** A USD field's value: null when left empty (no budget, no alert), else the number typed. */
const usdOrNull = (value: FormDataEntryValue | null) => (String(value ?? '').trim() === '' ? null : Number(value));

/**
 * The organization's monthly budget with its alert thresholds and its low-balance amount: what sends
 * `billing.budget_threshold` and `balance.low` to the webhooks that asked for them. An alert, not a limit.
 */
function Alerts() {
  const organization = useLoad(() => api<Organization>('GET', '/organization'));
  const [stored, setStored] = useState<Organization['alerts'] | null>(null);
  const [saved, setSaved] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  // The form is made again from what was stored after each save, and kept as typed when a save is refused.
  const alerts = stored ?? organization.data?.alerts;

  const save = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const thresholds = String(form.get('budget_thresholds') ?? '')
      .split(',')
      .map((t) => t.trim())
      .filter((t) => t !== '')
      .map(Number);
    setBusy(true);
    setError(undefined);
    setSaved(false);
    try {
      const updated = await api<Organization>('PATCH', '/organization/alerts', {
        monthly_budget: usdOrNull(form.get('monthly_budget')),
        budget_thresholds: thresholds,
        low_balance: usdOrNull(form.get('low_balance')),
      });
      setStored(updated.alerts);
      setSaved(true);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="panel" aria-labelledby="alerts-title">
      <h2 id="alerts-title">Budget and alerts</h2>
      <ErrorNote error={organization.error} retry={organization.reload} />
      {alerts && (
        <form onSubmit={(e) => void save(e)} className="grid-form" key={JSON.stringify(alerts)}>
          <label>
            Monthly budget (USD)
            <input name="monthly_budget" type="number" min="0.000001" step="any" inputMode="decimal" placeholder="None" defaultValue={alerts.monthly_budget ?? ''} />
          </label>
          <label>
            Alert at (% of the budget)
            <input name="budget_thresholds" type="text" inputMode="numeric" defaultValue={alerts.budget_thresholds.join(', ')} />
          </label>
          <label>
            Low-balance alert below (USD)
            <input name="low_balance" type="number" min="0.000001" step="any" inputMode="decimal" placeholder="None" defaultValue={alerts.low_balance ?? ''} />
          </label>
          <button type="submit" disabled={busy}>
            {busy ? 'Saving…' : 'Save alerts'}
          </button>
        </form>
      )}
      {saved && (
        <p className="ok" role="status">
          Alerts saved.
        </p>
      )}
      <ErrorNote error={error} />
      <p className="muted">
        Each threshold of the month’s spend (UTC calendar month) is sent once as <code>billing.budget_threshold</code>, and a balance below the amount as{' '}
        <code>balance.low</code>, to the webhooks subscribed to them. Nothing is refused past the budget. Leave a field empty for none.
      </p>
    </section>
  );
}

/** Balance, a top-up paid on Stripe's Checkout, and the top-ups so far with their refunds, disputes and receipts. */
export function Billing() {
  const balance = useLoad(() => api<Balance>('GET', '/balance'));
  const payments = useLoad(() => api<{ data: Payment[]; has_more: boolean }>('GET', '/payments?limit=100'));
  const [returned] = useState(returnedFrom);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);

  const topUp = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const amount = Number(new FormData(event.currentTarget).get('amount'));
    setBusy(true);
    setError(undefined);
    try {
      const session = await api<CheckoutSession>('POST', '/top-ups', { amount });
      window.location.assign(session.url);
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };

  return (
    <>
      <PageHeader title="Billing" />
      {returned === 'success' && (
        <p className="ok" role="status">
          Thank you: your payment was received. The credit appears here as soon as Stripe confirms it, usually within seconds.
        </p>
      )}
      {returned === 'cancelled' && (
        <p className="muted" role="status">
          The payment was cancelled; nothing was charged.
        </p>
      )}
      <section className="cards" aria-label="Balance">
        <div className="card">
          <h2>Available</h2>
          <p className="figure" data-testid="available">{balance.data ? usd(balance.data.available) : '…'}</p>
          {balance.data && balance.data.available < 0 && <p className="error">In debt: new paid requests are refused until a top-up covers it.</p>}
        </div>
      </section>
      <ErrorNote error={balance.error} retry={balance.reload} />
      <section className="panel" aria-labelledby="top-up-title">
        <h2 id="top-up-title">Top up</h2>
        <form onSubmit={(e) => void topUp(e)} className="grid-form">
          <label>
            Amount (USD)
            <input name="amount" type="number" min="0.01" step="0.01" required inputMode="decimal" defaultValue="20" />
          </label>
          <button type="submit" disabled={busy}>
            {busy ? 'Opening Stripe…' : 'Pay with Stripe'}
          </button>
        </form>
        <p className="muted">You pay on Stripe’s page and come back here; the balance is credited once Stripe confirms the payment.</p>
        <ErrorNote error={error} />
      </section>
      <AutoRecharge />
      <Alerts />
      <section className="panel" aria-labelledby="payments-title">
        <h2 id="payments-title">Payment history</h2>
        <ErrorNote error={payments.error} retry={payments.reload} />
        {payments.loading && <Loading what="payments" />}
        {payments.data?.data.length === 0 && <Empty>No top-ups yet.</Empty>}
        {payments.data && payments.data.data.length > 0 && (
          <div className="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Status</th>
                  <th scope="col" className="num">
                    Amount
                  </th>
                  <th scope="col" className="num">
                    Refunded
                  </th>
                  <th scope="col" className="num">
                    Disputed
                  </th>
                  <th scope="col">Receipt</th>
                </tr>
              </thead>
              <tbody>
                {payments.data.data.map((p) => (
                  <tr key={p.id}>
                    <td>{when(p.paid_at ?? p.created)}</td>
                    <td>
                      <span className={`badge ${p.status}`}>{STATUS_LABEL[p.status]}</span>
                      {p.auto_recharge && ' Auto-recharge'}
                    </td>
                    <td className="num">{usd(p.amount)}</td>
                    <td className="num">{p.refunded > 0 ? usd(p.refunded) : '—'}</td>
                    <td className="num">{p.disputed > 0 ? usd(p.disputed) : '—'}</td>
                    <td>
                      {p.receipt_url ? (
                        <a href={p.receipt_url} target="_blank" rel="noreferrer">
                          Receipt
                        </a>
                      ) : (
                        '—'
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </>
  );
}
