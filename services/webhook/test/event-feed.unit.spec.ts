import type { StreamedEvent, VideoWebhookEventType, WebhookEnvelope } from '@oc/contracts';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { EventFeed } from '../src/application/event-feed';
import { completedVideo } from './support';

const envelope = (n: number, type: VideoWebhookEventType = 'video.completed'): WebhookEnvelope => ({
  id: `evt_${n}`,
  type,
  created: 1_767_225_600 + n,
  data: completedVideo({ id: `video_${n}` }),
});

function feed(capacity: number) {
  const sent: { subject: string; payload: StreamedEvent }[] = [];
  const f = new EventFeed({ broadcast: async (subject, payload) => void sent.push({ subject, payload }) }, capacity, pino({ level: 'silent' }));
  return { f, sent };
}

describe('the event feed', () => {
  it("broadcasts each event on its organization's subject, once however often the bus redelivers it", () => {
    const { f, sent } = feed(10);
    f.publish({ orgId: 'org_a', envelope: envelope(1) });
    f.publish({ orgId: 'org_b', envelope: envelope(2) });
    f.publish({ orgId: 'org_a', envelope: envelope(1) });
    expect(sent).toEqual([
      { subject: 'webhook.event_stream.org_a', payload: { org_id: 'org_a', event: envelope(1) } },
      { subject: 'webhook.event_stream.org_b', payload: { org_id: 'org_b', event: envelope(2) } },
    ]);
  });

  it("replays the organization's events after an id, of the types asked, a page at a time", () => {
    const { f } = feed(10);
    f.publish({ orgId: 'org_a', envelope: envelope(1) });
    f.publish({ orgId: 'org_a', envelope: envelope(2, 'video.processing') });
    f.publish({ orgId: 'org_b', envelope: envelope(3) });
    f.publish({ orgId: 'org_a', envelope: envelope(4) });
    f.publish({ orgId: 'org_a', envelope: envelope(5) });
    const ids = (r: { events: WebhookEnvelope[] }) => r.events.map((e) => e.id);

    expect(ids(f.replay({ orgId: 'org_a', after: 'evt_1' }))).toEqual(['evt_2', 'evt_4', 'evt_5']);
    expect(ids(f.replay({ orgId: 'org_a', after: 'evt_1', types: ['video.completed'] }))).toEqual(['evt_4', 'evt_5']);
    expect(f.replay({ orgId: 'org_a', after: 'evt_1', limit: 2 })).toMatchObject({ found: true, has_more: true, events: [{ id: 'evt_2' }, { id: 'evt_4' }] });
    expect(f.replay({ orgId: 'org_a', after: 'evt_4', limit: 1 })).toMatchObject({ found: true, has_more: false, events: [{ id: 'evt_5' }] });
    expect(f.replay({ orgId: 'org_a', after: 'evt_5' })).toEqual({ found: true, events: [], has_more: false });
    expect(f.replay({ orgId: 'org_a' })).toEqual({ found: true, events: [], has_more: false });
  });

  it("does not find another organization's event, nor one that fell out of the bounded window", () => {
    const { f } = feed(3);
    for (let n = 1; n <= 5; n++) f.publish({ orgId: n === 4 ? 'org_b' : 'org_a', envelope: envelope(n) });
    expect(f.replay({ orgId: 'org_a', after: 'evt_4' })).toEqual({ found: false, events: [], has_more: false });
    expect(f.replay({ orgId: 'org_a', after: 'evt_2' })).toEqual({ found: false, events: [], has_more: false });
    expect(f.replay({ orgId: 'org_a', after: 'evt_3' })).toMatchObject({ found: true, events: [{ id: 'evt_5' }] });
    // An evicted id is forgotten: published again, it is a new event.
    const { f: g, sent } = feed(1);
    g.publish({ orgId: 'org_a', envelope: envelope(1) });
    g.publish({ orgId: 'org_a', envelope: envelope(2) });
    g.publish({ orgId: 'org_a', envelope: envelope(1) });
    expect(sent.map((s) => s.payload.event.id)).toEqual(['evt_1', 'evt_2', 'evt_1']);
  });
});
