import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  jetstreamManager,
  type ConsumerUpdateConfig,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import { Logger } from '@nestjs/common';
import { natsNames, type NatsNames } from '@oc/contracts';
import type { StoredEvent, Subscription } from '@oc/eventstore';
import { telemetryEnabled } from '@oc/telemetry';
import { observeConsumerPending } from './consumer-metrics';
import type { DurableEventBus, EventFilter } from './port';
import { defaultOnError } from './eventstore-bus';
import type { EventErrorHandler } from './retry';
import { processEvent } from './tracing';

type EventHandler = (event: StoredEvent) => Promise<void>;

export interface JetStreamEventBusOptions {
  /** Redelivery delay after a failure, from the message's delivery count (1 on the first). */
  redeliveryDelayMs?: (deliveryCount: number) => number;
  /** How long a handler may run before JetStream redelivers the message elsewhere. */
  ackWaitMs?: number;
  onError?: EventErrorHandler;
  /** The deployment's `NATS_PREFIX` (default `oc`). */
  prefix?: string;
}

/**
 * One durable pull consumer per consumer name on the `EVENTS` stream; replicas using the same name
 * share its messages. Acked once the handler resolves, nak'ed with back-off when it throws.
 * `max_deliver` is unbounded on purpose: dropping an event is worse than a handler that keeps
 * failing (it shows in the logs and in the consumer's pending count until it is fixed).
 */
export class JetStreamEventBus implements DurableEventBus {
  private readonly logger = new Logger(JetStreamEventBus.name);
  private readonly names: NatsNames;

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: JetStreamEventBusOptions = {},
  ) {
    this.names = natsNames(options.prefix);
  }

  async consume(consumerName: string, filter: EventFilter, handler: EventHandler): Promise<Subscription> {
    const jsm = await jetstreamManager(this.nc);
    await this.upsertConsumer(jsm, consumerName, filter);
    const consumer = await jsm.jetstream().consumers.get(this.names.eventsStream, consumerName);
    // One message in hand at a time: a buffered one would spend its ack wait queued behind others.
    const messages = await consumer.consume({ max_messages: 1 });
    const unobserve = observeConsumerPending(this.names.eventsStream, consumerName, () => consumer.info());
    const types = new Set(filter.types);
    const redeliveryDelayMs = this.options.redeliveryDelayMs ?? ((count) => Math.min(30_000, 1_000 * 2 ** (count - 1)));
    const onError = this.options.onError ?? defaultOnError(this.logger);

    const processing = (async () => {
      for await (const msg of messages) {
        let event: StoredEvent;
        try {
          event = msg.json<StoredEvent>();
        } catch (error) {
          // Not an event: no redelivery could ever fix it.
          this.logger.error(`Dropping unparsable message on ${msg.subject}: ${String(error)}`);
          msg.term();
          continue;
        }
        try {
          if (types.has(event.type)) {
            if (!telemetryEnabled()) await handler(event);
            else await processEvent('nats', msg.subject, consumerName, event, msg.headers?.get('traceparent') || undefined, () => handler(event));
          }
          msg.ack();
        } catch (error) {
          onError(error, [event]);
          msg.nak(redeliveryDelayMs(msg.info.deliveryCount));
        }
      }
    })().catch((error: unknown) => this.logger.error(`Consumer ${consumerName} stopped: ${String(error)}`));
    return {
      stop: async () => {
        unobserve();
        await messages.close();
        await processing;
      },
    };
  }

  /**
   * Every event of `filter` published from now on, in the stream's order, to this process alone: an ordered
   * consumer (not shared with replicas, nothing acknowledged, recreated by the client after a gap). For what
   * each replica must see whole and in one order (the webhook event feed), where `consume` shares its
   * messages among replicas.
   */
  async follow(filter: EventFilter, handler: (event: StoredEvent) => void): Promise<Subscription> {
    const js = (await jetstreamManager(this.nc)).jetstream();
    const consumer = await js.consumers.get(this.names.eventsStream, {
      // One subject for every server version (several need 2.10); the types are picked here.
      filter_subjects: this.names.eventSubject(filter.service, '>'),
      deliver_policy: DeliverPolicy.New,
    });
    const messages = await consumer.consume();
    const types = new Set(filter.types);
    const processing = (async () => {
      for await (const msg of messages) {
        try {
          const event = msg.json<StoredEvent>();
          if (types.has(event.type)) handler(event);
        } catch (error) {
          this.logger.error(`Dropping unusable message on ${msg.subject}: ${String(error)}`);
        }
      }
    })().catch((error: unknown) => this.logger.error(`Following ${filter.service} events stopped: ${String(error)}`));
    return {
      stop: async () => {
        await messages.close();
        await processing;
      },
    };
  }

  private async upsertConsumer(jsm: JetStreamManager, name: string, filter: EventFilter): Promise<void> {
    const subjects = filter.types.map((type) => this.names.eventSubject(filter.service, type));
    const config: Partial<ConsumerUpdateConfig> = {
      ...(subjects.length === 1
        ? { filter_subject: subjects[0] }
        : supportsMultipleFilters(this.nc)
          ? { filter_subjects: subjects }
          : // Older servers get the whole service; `consume` drops the other types client-side.
            { filter_subject: this.names.eventSubject(filter.service, '>') }),
      ack_wait: nanos(this.options.ackWaitMs ?? 60_000),
      max_deliver: -1,
    };
    try {
      await jsm.consumers.update(this.names.eventsStream, name, config);
    } catch (error) {
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
      await jsm.consumers.add(this.names.eventsStream, {
        ...config,
        durable_name: name,
        ack_policy: AckPolicy.Explicit,
        // Like the embedded bus with no checkpoint: a new consumer starts at the first event.
        deliver_policy: DeliverPolicy.All,
      });
    }
  }
}

// Several filter subjects on one consumer need nats-server 2.10.
function supportsMultipleFilters(nc: NatsConnection): boolean {
  const [major = 0, minor = 0] = (nc.info?.version ?? '0.0').split('.').map(Number);
  return major > 2 || (major === 2 && minor >= 10);
}
