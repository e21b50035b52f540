import type { AutoRecharge as AutoRechargeState, SetupSession } from '@oc/contracts';
import { type FormEvent, useState } from 'react';
import { api } from '../api';
import { plural, usd, when } from '../format';
import { ErrorNote, useLoad } from '../ui';

const OUTCOME_LABEL: Record<NonNullable<AutoRechargeState['last_attempt']>['outcome'], string> = {
  pending: 'Pending',
  succeeded: 'Paid',
  failed: 'Failed',
};

/** What Stripe's Checkout in setup mode sent the member back with (`?card_setup=`). */
function returnedFrom(): 'success' | 'cancelled' | null {
  const outcome = new URLSearchParams(window.location.search).get('card_setup');
  return outcome === 'success' || outcome === 'cancelled' ? outcome : null;
}

/**
 * Auto-recharge: the card saved with Stripe, the threshold and the amount, and how the last attempt went (and, when
 * it turned itself off after failed payments, why).
 */
export function AutoRecharge() {
  const loaded = useLoad(() => api<AutoRechargeState>('GET', '/auto-recharge'));
  const [stored, setStored] = useState<AutoRechargeState | null>(null);
  const [returned] = useState(returnedFrom);
  const [saved, setSaved] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const state = stored ?? loaded.data;

  const save = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setBusy(true);
    setError(undefined);
    setSaved(false);
    try {
      setStored(
        await api<AutoRechargeState>('PATCH', '/auto-recharge', {
          enabled: form.get('enabled') === 'on',
          threshold: Number(form.get('threshold')),
          amount: Number(form.get('amount')),
        }),
      );
      setSaved(true);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };

  const saveCard = async () => {
    setBusy(true);
    setError(undefined);
    try {
      const session = await api<SetupSession>('POST', '/auto-recharge/payment-method');
      window.location.assign(session.url);
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };

  const last = state?.last_attempt;
  return (
    <section className="panel" aria-labelledby="auto-recharge-title">
      <h2 id="auto-recharge-title">Auto-recharge</h2>
      {returned === 'success' && (
        <p className="ok" role="status">
          Card saved with Stripe: it appears here as soon as Stripe confirms it.
        </p>
      )}
      {returned === 'cancelled' && (
        <p className="muted" role="status">
          No card was saved.
        </p>
      )}
      <ErrorNote error={loaded.error} retry={loaded.reload} />
      {state && (
        <>
          <p data-testid="auto-recharge-status">
            <span className={`badge ${state.enabled ? 'paid' : 'pending'}`}>{state.enabled ? 'On' : 'Off'}</span>{' '}
            {state.payment_method_saved ? 'A card is saved for auto-recharge.' : 'No card saved yet.'}
            {state.consecutive_failures > 0 && ` ${plural(state.consecutive_failures, 'failed payment')} in a row.`}
          </p>
          {state.disabled_reason && (
            <p className="error" role="alert">
              {state.disabled_reason}
            </p>
          )}
          {last && (
            <p data-testid="auto-recharge-last">
              Last recharge: {usd(last.amount)} on {when(last.created)}, <span className={`badge ${last.outcome === 'succeeded' ? 'paid' : last.outcome}`}>{OUTCOME_LABEL[last.outcome]}</span>
              {last.failure_message && ` (${last.failure_message})`}
            </p>
          )}
          <form onSubmit={(e) => void save(e)} className="grid-form" key={JSON.stringify([state.enabled, state.threshold, state.amount])}>
            <label>
              Recharge when available falls below (USD)
              <input name="threshold" type="number" min="0.01" step="0.01" required inputMode="decimal" defaultValue={state.threshold ?? 5} />
            </label>
            <label>
              Charge the card (USD)
              <input name="amount" type="number" min="0.01" step="0.01" required inputMode="decimal" defaultValue={state.amount ?? 20} />
            </label>
            <label className="check">
              <input name="enabled" type="checkbox" defaultChecked={state.enabled} /> Auto-recharge on
            </label>
            <button type="submit" disabled={busy}>
              {busy ? 'Saving…' : 'Save auto-recharge'}
            </button>
          </form>
          <button type="button" disabled={busy} onClick={() => void saveCard()}>
            {state.payment_method_saved ? 'Replace the card with Stripe' : 'Save a card with Stripe'}
          </button>
        </>
      )}
      {saved && (
        <p className="ok" role="status">
          Auto-recharge saved.
        </p>
      )}
      <ErrorNote error={error} />
      <p className="muted">
        The saved card is charged when the available balance falls below the threshold: one payment at a time, at most one every few minutes, and
        after repeated failed payments auto-recharge turns itself off. Each recharge appears in the payment history.
      </p>
    </section>
  );
}
