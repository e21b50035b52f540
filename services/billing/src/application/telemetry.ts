import { DomainError } from '@oc/contracts';
import { instruments, telemetryEnabled } from '@oc/telemetry';
import type { AccountCommand } from '../domain/account';

const metrics = instruments((meter) => ({
  reservations: meter.createCounter('oc.billing.reservations', {
    description:
      'Reservation operations (reserve, capture, release, expire) by outcome: done, repeated (idempotent, nothing changed) or refused (insufficient funds, invalid state).',
  }),
  amount: meter.createCounter('oc.billing.reservation.amount', {
    description: 'Funds reserved, captured (charged) and released, in USD.',
    unit: 'USD',
  }),
}));

const OPERATION: Partial<Record<AccountCommand['type'], string>> = {
  ReserveFunds: 'reserve',
  CaptureReservation: 'capture',
  ReleaseReservation: 'release',
  ExpireReservation: 'expire',
};

/** Counts a reservation command's outcome, and the funds its events moved; nothing while telemetry is off. */
export function recordReservation(
  command: AccountCommand,
  outcome: { events: ReadonlyArray<{ type: string; data: unknown }> } | { error: unknown },
): void {
  if (!telemetryEnabled()) return;
  const operation = OPERATION[command.type];
  if (!operation) return;
  if ('error' in outcome) {
    const error = outcome.error;
    const refused = error instanceof DomainError ? error.detail.kind : 'error';
    metrics().reservations.add(1, { 'oc.billing.operation': operation, 'oc.billing.outcome': 'refused', 'error.type': refused });
    return;
  }
  metrics().reservations.add(1, { 'oc.billing.operation': operation, 'oc.billing.outcome': outcome.events.length > 0 ? 'done' : 'repeated' });
  for (const event of outcome.events) {
    const data = event.data as { amount_micros?: number; released_micros?: number };
    if (event.type === 'FundsReserved') metrics().amount.add((data.amount_micros ?? 0) / 1e6, { 'oc.billing.operation': 'reserve' });
    if (event.type === 'ReservationCaptured') {
      metrics().amount.add((data.amount_micros ?? 0) / 1e6, { 'oc.billing.operation': 'capture' });
      if (data.released_micros) metrics().amount.add(data.released_micros / 1e6, { 'oc.billing.operation': 'release' });
    }
    if (event.type === 'ReservationReleased') metrics().amount.add((data.amount_micros ?? 0) / 1e6, { 'oc.billing.operation': operation });
  }
}
