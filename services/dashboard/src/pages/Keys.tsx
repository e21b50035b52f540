import { type ApiKey, type CreatedApiKey, type KeyDailyUsage, SCOPES } from '@oc/contracts';
import { type FormEvent, useState } from 'react';
import { api } from '../api';
import { perDay, when } from '../format';
import { ConfirmButton, Empty, ErrorNote, Loading, PageHeader, SecretOnce, useLoad } from '../ui';
import { budgetOf, EditKeyLimits, KeyBudget, KeyModels, modelsOf, PERIODS } from './KeyLimits';

/** The days of use each key's average is over. */
const USAGE_DAYS = 7;

const status = (key: ApiKey) =>
  key.revoked_at !== null ? 'revoked' : key.expires_at !== null && key.expires_at * 1000 <= Date.now() ? 'expired' : 'active';

export function Keys() {
  const keys = useLoad(() => api<{ data: ApiKey[] }>('GET', '/keys'));
  const usage = useLoad(() => api<KeyDailyUsage>('GET', `/key-usage?days=${USAGE_DAYS}`));
  const [created, setCreated] = useState<CreatedApiKey | undefined>(undefined);
  const today = new Date().toISOString().slice(0, 10);
  const used = (keyId: string) => {
    const rows = usage.data?.data.filter((u) => u.key_id === keyId) ?? [];
    const total = rows.reduce((sum, u) => sum + u.requests, 0);
    return { today: rows.find((u) => u.date === today)?.requests ?? 0, average: perDay(total, USAGE_DAYS) };
  };
  return (
    <>
      <PageHeader title="API keys" />
      <CreateKey
        onCreated={(key) => {
          setCreated(key);
          void keys.reload();
        }}
      />
      {created && (
        <SecretOnce
          label={`New key “${created.name}”`}
          value={created.key}
          note="Store this key now: it is shown only once. Anyone with it can act for your organization within its scopes."
        />
      )}
      <section className="panel" aria-labelledby="keys-title">
        <h2 id="keys-title">Keys</h2>
        <ErrorNote error={keys.error ?? usage.error} retry={() => Promise.all([keys.reload(), usage.reload()])} />
        {keys.loading && <Loading what="keys" />}
        {keys.data?.data.length === 0 && <Empty>No keys yet.</Empty>}
        {keys.data && keys.data.data.length > 0 && (
          <div className="table-wrap">
            {/* Under 640 px each key is a card: every cell under its column's name (data-label). */}
            <table className="stacked">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Prefix</th>
                  <th scope="col">Scopes</th>
                  <th scope="col">Created</th>
                  <th scope="col">Last used</th>
                  <th scope="col">Expires</th>
                  <th scope="col" className="num">
                    Rate limit
                  </th>
                  <th scope="col" className="num">
                    Requests today
                  </th>
                  <th scope="col" className="num">
                    Daily average ({USAGE_DAYS} days)
                  </th>
                  <th scope="col">Models, spend / budget</th>
                  <th scope="col">Status</th>
                  <th scope="col">
                    <span className="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {keys.data.data.map((key) => {
                  const use = used(key.id);
                  return (
                    <tr key={key.id} data-key-id={key.id}>
                      <td data-label="Name" className="wrap">
                        {key.name}
                      </td>
                      <td data-label="Prefix" className="mono">
                        {key.prefix}…
                      </td>
                      <td data-label="Scopes">
                        <ul className="tags">
                          {key.scopes.map((s) => (
                            <li key={s}>{s}</li>
                          ))}
                        </ul>
                      </td>
                      <td data-label="Created">{when(key.created)}</td>
                      <td data-label="Last used" data-testid="last-used">
                        {when(key.last_used_at)}
                      </td>
                      <td data-label="Expires" data-testid="expires">
                        {key.expires_at === null ? 'Never' : when(key.expires_at)}
                      </td>
                      <td data-label="Rate limit" className="num" data-testid="rate-limit">
                        {key.rate_limit_per_minute.toLocaleString('en-US')}/min
                      </td>
                      <td data-label="Requests today" className="num" data-testid="requests-today">
                        {use.today}
                      </td>
                      <td data-label={`Daily average (${USAGE_DAYS} days)`} className="num" data-testid="requests-per-day">
                        {use.average}
                      </td>
                      <td data-label="Models, spend / budget">
                        <div data-testid="models">
                          <KeyModels apiKey={key} />
                        </div>
                        <div data-testid="budget">
                          <KeyBudget apiKey={key} />
                        </div>
                      </td>
                      <td data-label="Status">
                        <span className={`badge ${status(key)}`}>{status(key)}</span>
                      </td>
                      <td>
                        {key.revoked_at === null && <EditKeyLimits apiKey={key} onSaved={keys.reload} />}
                        {key.revoked_at === null && (
                          <ConfirmButton
                            label="Revoke"
                            title={`Revoke “${key.name}”?`}
                            confirmLabel="Revoke key"
                            onConfirm={async () => {
                              await api('DELETE', `/keys/${encodeURIComponent(key.id)}`);
                              await keys.reload();
                            }}
                          >
                            <p>
                              Requests with <span className="mono">{key.prefix}…</span> are refused from the next one on. This cannot be undone.
                            </p>
                          </ConfirmButton>
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </>
  );
}

function CreateKey({ onCreated }: { onCreated: (key: CreatedApiKey) => void }) {
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const formElement = event.currentTarget;
    const form = new FormData(formElement);
    const rate = String(form.get('rate_limit_per_minute') ?? '');
    const days = String(form.get('expires_in_days') ?? '');
    const models = modelsOf(String(form.get('allowed_models') ?? ''));
    setBusy(true);
    setError(undefined);
    try {
      const key = await api<CreatedApiKey>('POST', '/keys', {
        name: String(form.get('name')),
        scopes: form.getAll('scopes').map(String),
        ...(rate ? { rate_limit_per_minute: Number(rate) } : {}),
        ...(days ? { expires_in_days: Number(days) } : {}),
        ...(models ? { allowed_models: models } : {}),
        budget: budgetOf(form),
      });
      formElement.reset();
      onCreated(key);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section className="panel" aria-labelledby="create-key-title">
      <h2 id="create-key-title">Create a key</h2>
      <form onSubmit={submit} className="grid-form">
        <div>
          <label htmlFor="key-name">Name</label>
          <input id="key-name" name="name" required maxLength={200} placeholder="backend" />
        </div>
        <fieldset>
          <legend>Scopes</legend>
          <div className="checks">
            {SCOPES.map((scope) => (
              <label key={scope} className="check">
                <input type="checkbox" name="scopes" value={scope} /> {scope}
              </label>
            ))}
          </div>
        </fieldset>
        <div>
          <label htmlFor="key-rate">Rate limit (requests per minute)</label>
          <input id="key-rate" name="rate_limit_per_minute" type="number" min={1} max={100000} placeholder="100" inputMode="numeric" />
        </div>
        <div>
          <label htmlFor="key-expiry">Expires after (days)</label>
          <input id="key-expiry" name="expires_in_days" type="number" min={1} max={3650} placeholder="never" inputMode="numeric" />
        </div>
        <div>
          <label htmlFor="key-models">Allowed models</label>
          <input id="key-models" name="allowed_models" placeholder="every model" />
        </div>
        {PERIODS.map(({ period, field }) => (
          <div key={period}>
            <label htmlFor={`key-${period}`}>{field}</label>
            <input id={`key-${period}`} name={period} type="number" min={0.000001} step="any" inputMode="decimal" placeholder="no limit" />
          </div>
        ))}
        <ErrorNote error={error} />
        <div>
          <button type="submit" className="primary" disabled={busy}>
            Create key
          </button>
        </div>
      </form>
    </section>
  );
}
