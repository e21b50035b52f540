import { type AttemptOutcome } from '../domain/delivery';
import { inSpan, instruments, markSpanError, telemetryEnabled } from '@oc/telemetry';

const metrics = instruments((meter) => ({
  attempts: meter.createCounter('oc.webhook.delivery.attempts', {
    description: 'Webhook delivery attempts, by outcome (success, failure) and the receiver’s status code.',
  }),
  duration: meter.createHistogram('oc.webhook.delivery.duration', {
    description: 'How long a delivery attempt took, from connecting to the end of the answer.',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] },
  }),
}));

export interface AttemptDescription {
  url: string;
  attempt: number;
  deliveryId: string;
  webhookId: string;
  eventType: string;
}

/**
 * One delivery attempt as an HTTP client span (`POST`, `http.response.status_code`, the attempt number as
 * `http.request.resend_count` and `oc.webhook.attempt`) and in the attempts metrics. No trace header is sent to
 * the receiver: it is a third party.
 */
export function tracedAttempt(attempt: AttemptDescription, send: () => Promise<AttemptOutcome>): Promise<AttemptOutcome> {
  if (!telemetryEnabled()) return send();
  const url = new URL(attempt.url);
  return inSpan(
    'POST',
    {
      kind: 'client',
      attributes: {
        'http.request.method': 'POST',
        // Without its query, which may hold the receiver's own token.
        'url.full': `${url.origin}${url.pathname}`,
        'server.address': url.hostname,
        'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
        'http.request.resend_count': attempt.attempt - 1,
        'oc.webhook.attempt': attempt.attempt,
        'oc.webhook.id': attempt.webhookId,
        'oc.webhook.delivery.id': attempt.deliveryId,
        'oc.event_type': attempt.eventType,
      },
    },
    async (span) => {
      const outcome = await send();
      const labels = {
        'oc.webhook.outcome': outcome.success ? 'success' : 'failure',
        ...(outcome.statusCode !== null ? { 'http.response.status_code': outcome.statusCode } : {}),
      };
      if (span) {
        if (outcome.statusCode !== null) span.setAttribute('http.response.status_code', outcome.statusCode);
        if (!outcome.success) markSpanError(span, outcome.statusCode !== null ? String(outcome.statusCode) : 'connection', outcome.error ?? undefined);
      }
      metrics().attempts.add(1, labels);
      metrics().duration.record(outcome.durationMs / 1000, labels);
      return outcome;
    },
  );
}
