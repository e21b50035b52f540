import { type ActivityStatus, type BillingEvent, unixSeconds } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import { type CollectionSpec, documentProjection } from '@oc/readmodel';

/** One paid request of an organization: its reservation, from the hold to its settlement. */
export interface ActivityDoc {
  /** `<org_id>/<reservation_id>`: reservation ids are chosen by the products, so only unique within an organization. */
  _id: string;
  org_id: string;
  /** The resource's id: the products reserve under it (`chatcmpl_…`, `cmpl_…`, `video_…`). */
  reservation_id: string;
  key_id: string | null;
  model: string | null;
  product: 'chat' | 'text' | 'video' | null;
  status: ActivityStatus;
  description: string;
  held_micros: number;
  charged_micros: number;
  input_tokens: number | null;
  output_tokens: number | null;
  seconds: number | null;
  /** Unix seconds. */
  created: number;
  settled_at: number | null;
  [key: string]: unknown;
}

export const ActivityCollections = { activity: 'billing_activity' } as const;

/**
 * The log newest first, alone or narrowed by one key, model or status (each index ends with `created`, so a page
 * is an index range); a second filter is checked on the rows of the first's range.
 */
export const activityCollections: CollectionSpec[] = [
  {
    name: ActivityCollections.activity,
    indexes: [
      ['org_id', 'created'],
      ['org_id', 'key_id', 'created'],
      ['org_id', 'model', 'created'],
      ['org_id', 'status', 'created'],
    ],
  },
];

/** The product a reservation is for, by the prefix of the id it was made under, until its charge says. */
const PRODUCTS: Array<[prefix: string, product: ActivityDoc['product']]> = [
  ['chatcmpl_', 'chat'],
  ['cmpl_', 'text'],
  ['video_', 'video'],
];
const productOf = (reservationId: string) => PRODUCTS.find(([prefix]) => reservationId.startsWith(prefix))?.[1] ?? null;

type Stored = StoredEvent & BillingEvent;

export const activityProjection = documentProjection<ActivityDoc>({
  name: 'billing-activity',
  collection: ActivityCollections.activity,
  canHandle: ['FundsReserved', 'ReservationCaptured', 'ReservationReleased'],
  startedBy: ['FundsReserved'],
  documentId: (event) => {
    const data = event.data as { org_id: string; reservation_id: string };
    return `${data.org_id}/${data.reservation_id}`;
  },
  evolve(doc, stored) {
    const event = stored as Stored;
    switch (event.type) {
      case 'FundsReserved': {
        const { org_id, reservation_id, amount_micros, description, key_id, reserved_at } = event.data;
        return {
          _id: `${org_id}/${reservation_id}`,
          org_id,
          reservation_id,
          key_id: key_id ?? null,
          model: null,
          product: productOf(reservation_id),
          status: 'held',
          description,
          held_micros: amount_micros,
          charged_micros: 0,
          input_tokens: null,
          output_tokens: null,
          seconds: null,
          created: reserved_at ?? unixSeconds(stored.created),
          settled_at: null,
        };
      }
      case 'ReservationCaptured': {
        if (!doc) return null;
        const { amount_micros, usage, settled_at } = event.data;
        return {
          ...doc,
          status: 'charged',
          charged_micros: amount_micros,
          // Reservations made before they named their key: the charge names it.
          key_id: doc.key_id ?? usage?.key_id ?? null,
          model: usage?.model ?? doc.model,
          product: usage?.product ?? doc.product,
          input_tokens: usage?.input_tokens ?? null,
          output_tokens: usage?.output_tokens ?? null,
          seconds: usage?.seconds ?? null,
          settled_at: settled_at ?? unixSeconds(stored.created),
        };
      }
      case 'ReservationReleased':
        return (
          doc && {
            ...doc,
            status: event.data.reason === 'expired' ? 'expired' : 'released',
            settled_at: event.data.settled_at ?? unixSeconds(stored.created),
          }
        );
      default:
        return doc;
    }
  },
});
