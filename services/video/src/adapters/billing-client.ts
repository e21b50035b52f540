import { Subjects } from '@oc/contracts';
import type { ServiceClient } from '@oc/messaging';
import type { Billing } from '../application/ports';

/** The reservation id is the video id, which makes every call idempotent at billing. */
export const billingOver = (client: ServiceClient): Billing => ({
  reserve: (org_id, video_id, amount_micros, description, expires_at, key_id) =>
    client.request(Subjects.billing.reserveFunds, { org_id, reservation_id: video_id, amount_micros, description, expires_at, ...(key_id === undefined ? {} : { key_id }) }),
  capture: (org_id, video_id, amount_micros, usage) =>
    client.request(Subjects.billing.captureReservation, { org_id, reservation_id: video_id, amount_micros, ...(usage ? { usage } : {}) }),
  release: (org_id, video_id) => client.request(Subjects.billing.releaseReservation, { org_id, reservation_id: video_id }),
});
