import { type CreatedWebhook, type DeliveryAttempt, type TestDeliveryResult, type Webhook, WEBHOOK_EVENT_TYPES } from '@oc/contracts';
import { type FormEvent, useState } from 'react';
import { api } from '../api';
import { when } from '../format';
import { ConfirmButton, Empty, ErrorNote, Loading, PageHeader, SecretOnce, useLoad } from '../ui';

const path = (id: string) => `/webhooks/${encodeURIComponent(id)}`;

export function Webhooks() {
  const hooks = useLoad(async () => {
    const list = await api<{ data: Pick<Webhook, 'id'>[] }>('GET', '/webhooks');
    // The list carries summaries; each webhook's own answer has its failure count and last outcomes.
    return Promise.all(list.data.map((w) => api<Webhook>('GET', path(w.id))));
  });
  const [created, setCreated] = useState<CreatedWebhook | undefined>(undefined);
  return (
    <>
      <PageHeader title="Webhooks" />
      <CreateWebhook
        onCreated={(w) => {
          setCreated(w);
          void hooks.reload();
        }}
      />
      {created && (
        <SecretOnce
          label={`Signing secret of ${created.url}`}
          value={created.secret}
          note="Store this secret now: it is shown only once. Verify the X-Service-Signature of each delivery with it."
        />
      )}
      <ErrorNote error={hooks.error} />
      {hooks.loading && <Loading what="webhooks" />}
      {hooks.data?.length === 0 && <Empty>No webhooks yet.</Empty>}
      <ul className="plain">
        {hooks.data?.map((w) => (
          <li key={w.id}>
            <WebhookPanel webhook={w} onChange={hooks.reload} />
          </li>
        ))}
      </ul>
    </>
  );
}

function WebhookPanel({ webhook: w, onChange }: { webhook: Webhook; onChange: () => Promise<void> }) {
  const [error, setError] = useState<unknown>(undefined);
  const [test, setTest] = useState<TestDeliveryResult | 'sending' | undefined>(undefined);
  const [showLog, setShowLog] = useState(false);
  const [reenabled, setReenabled] = useState(false);
  const act = async (work: () => Promise<unknown>) => {
    setError(undefined);
    try {
      await work();
      await onChange();
    } catch (e) {
      setError(e);
    }
  };
  const setActive = (isActive: boolean) =>
    act(async () => {
      await api('PATCH', path(w.id), { is_active: isActive });
      setReenabled(isActive);
    });
  const sendTest = async () => {
    setError(undefined);
    setTest('sending');
    try {
      setTest(await api<TestDeliveryResult>('POST', `${path(w.id)}/test`, {}));
    } catch (e) {
      setTest(undefined);
      setError(e);
    }
  };
  return (
    <section className="panel webhook" aria-label={`Webhook ${w.url}`} data-webhook-id={w.id}>
      <div className="video-head">
        <p className="mono url">{w.url}</p>
        <span className={`badge ${w.is_active ? 'active' : 'inactive'}`} data-testid="webhook-state">
          {w.is_active ? 'active' : 'disabled'}
        </span>
      </div>
      {w.description && <p>{w.description}</p>}
      <dl className="facts">
        <div>
          <dt>Events</dt>
          <dd>{w.events.join(', ')}</dd>
        </div>
        <div>
          <dt>Consecutive failures</dt>
          <dd data-testid="failure-count">{w.failure_count}</dd>
        </div>
        <div>
          <dt>Last success</dt>
          <dd>{when(w.last_success_at)}</dd>
        </div>
        <div>
          <dt>Last failure</dt>
          <dd>{when(w.last_failure_at)}</dd>
        </div>
      </dl>
      {!w.is_active && (
        <p className="muted" data-testid="disabled-note">
          Disabled: nothing is sent to it. Events that happen meanwhile are not sent later, even once it is re-enabled.
          Deliveries that were waiting when it was disabled are marked failed (not sent): resend them from Deliveries after
          re-enabling it.
        </p>
      )}
      <div aria-live="polite" data-testid="reenabled-note">
        {reenabled && w.is_active && (
          <p className="ok">
            Re-enabled: events are delivered again from now on. Those that happened while it was disabled are not sent;
            deliveries marked failed (not sent) can be resent from Deliveries.
          </p>
        )}
      </div>
      <ErrorNote error={error} />
      <div className="actions">
        {w.is_active ? (
          <button type="button" onClick={() => setActive(false)}>
            Disable
          </button>
        ) : (
          <button type="button" className="primary" onClick={() => setActive(true)}>
            Re-enable
          </button>
        )}
        <button type="button" onClick={sendTest} disabled={test === 'sending'}>
          Send test event
        </button>
        <button type="button" onClick={() => setShowLog(!showLog)} aria-expanded={showLog}>
          {showLog ? 'Hide deliveries' : 'Deliveries'}
        </button>
        <ConfirmButton label="Delete" title="Delete this webhook?" confirmLabel="Delete webhook" onConfirm={() => act(() => api('DELETE', path(w.id)))}>
          <p>
            Events stop going to <span className="mono">{w.url}</span>.
          </p>
        </ConfirmButton>
      </div>
      <div aria-live="polite" data-testid="test-result">
        {test === 'sending' && <p className="muted">Sending a test event…</p>}
        {test && test !== 'sending' && (
          <p className={test.success ? 'ok' : 'error'}>
            Test {test.success ? 'delivered' : 'failed'}: {test.status_code === null ? 'no answer' : `HTTP ${test.status_code}`} in {test.response_time_ms} ms
            {!test.success && ` (${test.message})`}
          </p>
        )}
      </div>
      {showLog && <DeliveryLog webhookId={w.id} active={w.is_active} />}
    </section>
  );
}

function DeliveryLog({ webhookId, active }: { webhookId: string; active: boolean }) {
  const log = useLoad(() => api<{ data: DeliveryAttempt[] }>('GET', `${path(webhookId)}/deliveries?limit=50`), [webhookId]);
  const [error, setError] = useState<unknown>(undefined);
  // The log is newest first: a delivery's first row is its latest attempt, the one that says how it stands.
  const seen = new Set<string>();
  const latest = new Set<string>();
  for (const a of log.data?.data ?? []) {
    if (seen.has(a.delivery_id)) continue;
    seen.add(a.delivery_id);
    latest.add(a.id);
  }
  const resend = async (deliveryId: string) => {
    setError(undefined);
    try {
      await api('POST', `${path(webhookId)}/deliveries/${encodeURIComponent(deliveryId)}/retry`, {});
      await log.reload();
    } catch (e) {
      setError(e);
    }
  };
  const inactiveNote = `inactive-note-${webhookId}`;
  return (
    <div className="table-wrap">
      {!active && (
        <p className="muted" id={inactiveNote}>
          Resending needs the webhook enabled: re-enable it first.
        </p>
      )}
      <ErrorNote error={log.error ?? error} />
      {log.loading && <Loading what="deliveries" />}
      {log.data?.data.length === 0 && <Empty>No deliveries yet (test events are not logged).</Empty>}
      {log.data && log.data.data.length > 0 && (
        <table>
          <caption className="visually-hidden">Delivery attempts, newest first</caption>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Event</th>
              <th scope="col" className="num">
                Attempt
              </th>
              <th scope="col">Answer</th>
              <th scope="col">Delivery</th>
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {log.data.data.map((a) => (
              <tr key={a.id}>
                <td>{when(a.created)}</td>
                <td>
                  {a.event_type} <span className="mono muted">{a.event_id}</span>
                </td>
                <td className="num">{a.attempt}</td>
                <td>{a.status_code === null ? (a.error ?? '—') : `HTTP ${a.status_code}`}</td>
                <td>
                  <span className={`badge ${a.delivery_status}`}>{a.delivery_status}</span>
                </td>
                <td>
                  {a.delivery_status === 'failed' && latest.has(a.id) && (
                    <button type="button" onClick={() => resend(a.delivery_id)} disabled={!active} aria-describedby={active ? undefined : inactiveNote}>
                      Resend
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

function CreateWebhook({ onCreated }: { onCreated: (w: CreatedWebhook) => void }) {
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const formElement = event.currentTarget;
    const form = new FormData(formElement);
    setError(undefined);
    try {
      const description = String(form.get('description') ?? '');
      const created = await api<CreatedWebhook>('POST', '/webhooks', {
        url: String(form.get('url')),
        events: form.getAll('events').map(String),
        ...(description ? { description } : {}),
      });
      formElement.reset();
      onCreated(created);
    } catch (e) {
      setError(e);
    }
  };
  return (
    <section className="panel" aria-labelledby="create-webhook-title">
      <h2 id="create-webhook-title">Add an endpoint</h2>
      <form onSubmit={submit} className="grid-form">
        <div>
          <label htmlFor="webhook-url">URL</label>
          <input id="webhook-url" name="url" type="url" required placeholder="https://example.com/hooks/oc" />
        </div>
        <fieldset>
          <legend>Events</legend>
          <div className="checks">
            {WEBHOOK_EVENT_TYPES.map((type) => (
              <label key={type} className="check">
                <input type="checkbox" name="events" value={type} defaultChecked={type !== 'video.processing'} /> {type}
              </label>
            ))}
          </div>
        </fieldset>
        <div>
          <label htmlFor="webhook-description">Description (optional)</label>
          <input id="webhook-description" name="description" maxLength={500} />
        </div>
        <ErrorNote error={error} />
        <div>
          <button type="submit" className="primary">
            Add endpoint
          </button>
        </div>
      </form>
    </section>
  );
}
