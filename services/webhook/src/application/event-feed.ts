import {
  EVENT_REPLAY_PAGE,
  type EventReplay,
  eventStreamSubject,
  type StreamedEvent,
  type WebhookEnvelope,
  type WebhookEventType,
} from '@oc/contracts';
import type { Logger } from 'pino';
import type { WebhookEvent } from './deliveries';

/** How the feed reaches the gateways: a broadcast that every subscriber of the subject receives. */
export interface FeedPublisher {
  broadcast(subject: string, payload: StreamedEvent): Promise<void>;
}

export interface ReplayRequest {
  orgId: string;
  after?: string | undefined;
  types?: readonly WebhookEventType[] | undefined;
  limit?: number;
}

interface Held {
  orgId: string;
  envelope: WebhookEnvelope;
}

/**
 * The live feed behind `GET /v1/webhooks/events/stream`: every webhook event, whether or not the
 * organization registered a webhook, is broadcast on its organization's subject, and the last `capacity`
 * events of the deployment are held in a ring so that a listener that reconnects with `Last-Event-ID`
 * gets what it missed. Memory is bounded by the ring (`WEBHOOK_STREAM_REPLAY_EVENTS` envelopes of at most
 * a few KiB each); what falls out of it can no longer be replayed, and a replay after it says so.
 * An event the bus redelivers is held and broadcast once.
 */
export class EventFeed {
  private readonly ring: (Held | undefined)[];
  /** Sequence number of each held event, by id; a sequence's slot is `seq % capacity`. */
  private readonly positions = new Map<string, number>();
  private next = 0;

  constructor(
    private readonly publisher: FeedPublisher,
    private readonly capacity: number,
    private readonly logger: Logger,
  ) {
    this.ring = new Array<Held | undefined>(capacity);
  }

  publish({ orgId, envelope }: WebhookEvent): void {
    if (this.positions.has(envelope.id)) return;
    const slot = this.next % this.capacity;
    const evicted = this.ring[slot];
    if (evicted) this.positions.delete(evicted.envelope.id);
    this.ring[slot] = { orgId, envelope };
    this.positions.set(envelope.id, this.next++);
    // Not awaited: a broadcast is fire-and-forget, and the deliveries of the same event must not wait on it.
    this.publisher
      .broadcast(eventStreamSubject(orgId), { org_id: orgId, event: envelope })
      .catch((err: unknown) => this.logger.warn({ err, event_id: envelope.id }, 'event not broadcast to listeners'));
  }

  /**
   * The organization's events held after `after`, oldest first, at most `limit` of them. `found` is false
   * when `after` is no longer held, or is another organization's: then the listener may have missed events.
   */
  replay({ orgId, after, types, limit = EVENT_REPLAY_PAGE }: ReplayRequest): EventReplay {
    if (after === undefined) return { found: true, events: [], has_more: false };
    const from = this.positions.get(after);
    if (from === undefined || this.ring[from % this.capacity]!.orgId !== orgId) return { found: false, events: [], has_more: false };
    const events: WebhookEnvelope[] = [];
    for (let seq = from + 1; seq < this.next; seq++) {
      const held = this.ring[seq % this.capacity]!;
      if (held.orgId !== orgId || (types && !types.includes(held.envelope.type))) continue;
      if (events.length === limit) return { found: true, events, has_more: true };
      events.push(held.envelope);
    }
    return { found: true, events, has_more: false };
  }
}
