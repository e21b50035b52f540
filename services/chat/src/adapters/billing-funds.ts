import { Subjects, unwrap } from '@oc/contracts';
import type { ServiceClient } from '@oc/messaging';
import type { Funds } from '../application/ports';

/** Funds held and charged by the billing service over the bus; its 402 is thrown with the amounts it compared. */
export function billingFunds(client: ServiceClient): Funds {
  return {
    async reserve(org_id, reservation_id, amount_micros, description, { expiresAt: expires_at, holder, keyId }) {
      const reservation = { org_id, reservation_id, amount_micros, description, expires_at, holder, ...(keyId === undefined ? {} : { key_id: keyId }), answer_when_decided: true };
      unwrap(await client.request(Subjects.billing.reserveFunds, reservation));
    },
    async capture(org_id, reservation_id, amount_micros, usage, { answerWhenDecided }) {
      const capture = { org_id, reservation_id, amount_micros, ...(usage ? { usage } : {}), ...(answerWhenDecided ? { answer_when_decided: true } : {}) };
      unwrap(await client.request(Subjects.billing.captureReservation, capture));
    },
    async release(org_id, reservation_id) {
      unwrap(await client.request(Subjects.billing.releaseReservation, { org_id, reservation_id }));
    },
    async holders(prefix) {
      return unwrap(await client.request<{ holders: string[] }>(Subjects.billing.listReservationHolders, { prefix })).holders;
    },
    async releaseHeld(holder) {
      return unwrap(await client.request<{ released: number; more: boolean }>(Subjects.billing.releaseHeldReservations, { holder }));
    },
  };
}

export function broadcastFrames(client: ServiceClient) {
  return { publish: (subject: string, frame: unknown) => client.broadcast(subject, frame) };
}
