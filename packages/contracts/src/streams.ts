import { BillingStreams } from './billing';
import { ChatStreams } from './chat';
import { VideoStreams } from './video';
import { WebhookStreams } from './webhook';

/**
 * Which service writes which streams. A stream is named `<category>-<id>` (`video-video_abc`), and each
 * category has exactly one writer. In production every service shares one event store, so a service's
 * log holds other services' events too; its outbox relay publishes only the streams it owns, under its own
 * subject (`events.<service>.<type>`). JetStream de-duplicates on the event id across subjects, so a relay
 * publishing another service's event first would hide it from that service's consumers.
 */
export const STREAM_CATEGORIES = {
  billing: Object.values(BillingStreams),
  chat: Object.values(ChatStreams),
  video: Object.values(VideoStreams),
  webhook: Object.values(WebhookStreams),
} as const satisfies Record<string, readonly string[]>;
export type OwningService = keyof typeof STREAM_CATEGORIES;

/** `<category>-<id>`; categories hold no `-`, ids may. */
export const streamName = (category: string, id: string) => `${category}-${id}`;

/** The part of a stream name before its first `-` (the whole name when there is none). */
export function streamCategory(name: string): string {
  const dash = name.indexOf('-');
  return dash < 0 ? name : name.slice(0, dash);
}

/** Whether `service` writes the stream with this name. */
export function ownsStream(service: OwningService): (streamName: string) => boolean {
  const categories = new Set<string>(STREAM_CATEGORIES[service]);
  return (name) => categories.has(streamCategory(name));
}
