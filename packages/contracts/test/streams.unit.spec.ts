import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BillingEvents, BillingStreams, ChatEvents, ChatStreams, VideoEvents, VideoStreams, WebhookEvents, WebhookStreams } from '../src';
import { ownsStream, STREAM_CATEGORIES, streamCategory, streamName } from '../src/streams';

describe('stream ownership', () => {
  it('gives every stream category exactly one owning service', () => {
    const all = Object.values(STREAM_CATEGORIES).flat();
    expect(new Set(all).size).toBe(all.length);
    for (const category of all) expect(category).toMatch(/^[a-z]+$/);
  });

  it('tells a service its own streams by the category before the first dash', () => {
    expect(streamCategory(streamName('video', 'video_a-b'))).toBe('video');
    expect(streamCategory('nodash')).toBe('nodash');
    const video = ownsStream('video');
    expect(video('video-video_1')).toBe(true);
    expect(video('videos-1')).toBe(false);
    expect(video('chat-video_1')).toBe(false);
    expect(video('videokey-0a1b')).toBe(true);
    const chat = ownsStream('chat');
    expect(['chat-s', 'chats-s', 'account-o', 'apikey-k', 'webhook-w', 'delivery-d'].filter(chat)).toEqual(['chat-s']);
    expect(['account-o', 'apikey-k', 'video-v'].filter(ownsStream('billing'))).toEqual(['account-o', 'apikey-k']);
    expect(['webhook-w', 'delivery-d', 'video-v'].filter(ownsStream('webhook'))).toEqual(['webhook-w', 'delivery-d']);
  });

  it('gives no two services an event type of the same name', () => {
    // Services share one log, and projections pick their events by type: a shared name would mix them up.
    const types = [BillingEvents, ChatEvents, VideoEvents, WebhookEvents].flatMap((events) => Object.keys(events));
    expect(new Set(types).size).toBe(types.length);
  });

  it("is described in docs/decisions.md with each service's categories as they are", () => {
    const decisions = readFileSync(join(import.meta.dirname, '../../../docs/decisions.md'), 'utf8').replace(/\s+/g, ' ');
    const declared = { BillingStreams, ChatStreams, VideoStreams, WebhookStreams };
    for (const [name, categories] of Object.entries(declared)) {
      const listed = new RegExp(`\`${name}\`: ((?:\`[a-z]+\`(?:, )?)+)`).exec(decisions)?.[1];
      expect(listed?.match(/[a-z]+/g), name).toEqual(Object.values(categories));
    }
  });
});
