import type { ApiKey } from '@oc/contracts';
import { type FormEvent, useId, useRef, useState } from 'react';
import { api } from '../api';
import { usd } from '../format';
import { ErrorNote } from '../ui';

export const PERIODS = [
  { period: 'daily', spent: 'today', label: 'Today', field: 'Daily budget (USD)' },
  { period: 'monthly', spent: 'this_month', label: 'Month', field: 'Monthly budget (USD)' },
  { period: 'total', spent: 'total', label: 'Total', field: 'Total budget (USD)' },
] as const;

/** The models a key may use, or that it may use all of them. */
export function KeyModels({ apiKey }: { apiKey: ApiKey }) {
  if (apiKey.allowed_models === null) return <span className="muted">All models</span>;
  return (
    <ul className="tags">
      {apiKey.allowed_models.map((model) => (
        <li key={model}>{model}</li>
      ))}
    </ul>
  );
}

/** What the key spent in each period (the UTC day and month), against its budget there when it has one. */
export function KeyBudget({ apiKey }: { apiKey: ApiKey }) {
  return (
    // One element, so that a narrow screen's card keeps it in its cell.
    <div>
      {PERIODS.map(({ period, spent, label }) => (
        <div key={period} data-period={period}>
          <span className="muted">{label}:</span> {usd(apiKey.spend[spent])}
          {apiKey.budget[period] !== null && <> of {usd(apiKey.budget[period])}</>}
        </div>
      ))}
    </div>
  );
}

/** `chat-2, video-2` as a list; nothing for every model. */
export const modelsOf = (text: string) => {
  const models = text
    .split(/[\s,]+/)
    .map((m) => m.trim())
    .filter(Boolean);
  return models.length === 0 ? null : models;
};
const limitOf = (text: string) => (text.trim() === '' ? null : Number(text));
/** The form's budget fields, an empty one for no limit. */
export const budgetOf = (form: FormData) => Object.fromEntries(PERIODS.map(({ period }) => [period, limitOf(String(form.get(period) ?? ''))]));

/** A dialog to change the models a key may use and its budget; the change applies from the key's next request. */
export function EditKeyLimits({ apiKey, onSaved }: { apiKey: ApiKey; onSaved: () => Promise<unknown> }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setBusy(true);
    setError(undefined);
    try {
      await api('PATCH', `/keys/${encodeURIComponent(apiKey.id)}`, {
        allowed_models: modelsOf(String(form.get('allowed_models') ?? '')),
        budget: budgetOf(form),
      });
      await onSaved();
      dialog.current?.close();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button
        type="button"
        onClick={() => {
          setError(undefined);
          dialog.current?.showModal();
        }}
      >
        Limits
      </button>
      <dialog ref={dialog} aria-labelledby={titleId}>
        <h2 id={titleId}>Limits of “{apiKey.name}”</h2>
        {/* Keyed by the key's figures, so the form opens on what the key has now. */}
        <form onSubmit={submit} className="grid-form" key={JSON.stringify([apiKey.allowed_models, apiKey.budget])}>
          <div>
            <label htmlFor={`${titleId}-models`}>Allowed models</label>
            <input id={`${titleId}-models`} name="allowed_models" defaultValue={apiKey.allowed_models?.join(', ') ?? ''} placeholder="every model" />
            <p className="muted">Model ids separated by commas; empty for every model.</p>
          </div>
          {PERIODS.map(({ period, field }) => (
            <div key={period}>
              <label htmlFor={`${titleId}-${period}`}>{field}</label>
              <input
                id={`${titleId}-${period}`}
                name={period}
                type="number"
                min={0.000001}
                step="any"
                inputMode="decimal"
                placeholder="no limit"
                defaultValue={apiKey.budget[period] ?? ''}
              />
            </div>
          ))}
          <p className="muted">
            Days and months are UTC. A request that would take the key's spend (charged and held) over a budget is refused; empty for no
            limit.
          </p>
          <ErrorNote error={error} />
          <div className="actions">
            <button type="button" onClick={() => dialog.current?.close()}>
              Cancel
            </button>
            <button type="submit" className="primary" disabled={busy}>
              Save limits
            </button>
          </div>
        </form>
      </dialog>
    </>
  );
}
