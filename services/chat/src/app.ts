import { type Clock, type IdSource, type Replicas, repeatByClock, Subjects, usdToMicros } from '@oc/contracts';
import { CommandHandler, type EventStore } from '@oc/eventstore';
import type { ServiceClient } from '@oc/messaging';
import { projectInThisThread, type ProjectorFactory, type ReadModelStore, readLatest, readYourWrites } from '@oc/readmodel';
import { telemetryEnabled } from '@oc/telemetry';
import { type DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import { chatReadModels } from './projections';
import { DeploymentPool, deploymentStatuses, failureDetail } from '@oc/routing';
import { billingFunds, broadcastFrames } from './adapters/billing-funds';
import { type ChatDeploymentConfig, chatTarget } from './adapters/deployments';
import { RoutedChatProvider } from './adapters/routed-provider';
import { SimulatorProvider } from './adapters/simulator';
import { traceChatProvider } from './adapters/traced-provider';
import { gptTokenizer } from './adapters/tokenizer';
import { type ChatPricing, ChatService, type CompletionLifecycle } from './application/chat';
import type { ChatProvider } from './application/ports';
import { ResponsesService } from './application/responses';
import { CHAT_SERVICE, ChatController, LOGGER, onCancelStream } from './transport/chat.controller';
import { RESPONSES_SERVICE, ResponsesController } from './transport/responses.controller';

export interface ChatRuntime {
  eventStore: EventStore;
  readModels: ReadModelStore;
  /** Where the projections run; in this thread unless the process runs them in a projection thread. */
  projector?: ProjectorFactory;
  /** To reach billing, and to publish streamed frames and hear cancels. */
  client: ServiceClient;
  clock: Clock;
  ids: IdSource;
  logger: Logger;
  /** chat-2's deployments, in catalog order, for live keys (test keys always get the simulator). */
  deployments: ChatDeploymentConfig[];
  /** The operator's own chat models, with their price and deployments. */
  models?: Record<string, { pricePer1kTokensUsd: number; deployments: ChatDeploymentConfig[] }>;
  /** The router's weighted choice; Math.random unless a test fixes it. */
  random?: () => number;
  pricing: ChatPricing;
  lifecycle: CompletionLifecycle;
  /** The simulator's pause between streamed words. */
  simulatorWordDelayMs: number;
  /**
   * Replicas of chat on the same event store (its own process): the completions a gone replica left open
   * are settled at the next sweep. Absent, this process is alone (`lifecycle.replica` names it).
   */
  replicas?: Replicas;
}

/** `gen_ai.provider.name` where OpenTelemetry's well-known value differs from the catalog's name (`openai`, `anthropic` are the same). */
const GEN_AI_PROVIDER: Readonly<Record<string, string>> = { simulator: 'oc.simulator', gemini: 'gcp.gemini' };

/** How often completions left open by a crash are looked for (by the injected clock). */
export const ABANDONED_SWEEP_MS = 10_000;

@Module({})
export class ChatModule {
  static register(service: ChatService, responses: ResponsesService, logger: Logger): DynamicModule {
    return {
      module: ChatModule,
      controllers: [ChatController, ResponsesController],
      providers: [
        { provide: CHAT_SERVICE, useValue: service },
        { provide: RESPONSES_SERVICE, useValue: responses },
        { provide: LOGGER, useValue: logger },
      ],
    };
  }
}

/** Builds the chat service and catches its read models up with the event store. */
export async function createChat(runtime: ChatRuntime) {
  const projections = (runtime.projector ?? projectInThisThread)({
    service: 'chat',
    set: chatReadModels,
    eventStore: runtime.eventStore,
    readModels: runtime.readModels,
    onError: (err) => runtime.logger.error({ err }, 'chat projection stopped'),
  });
  await projections.start();
  const simulatorProvider = new SimulatorProvider({ tokenizer: gptTokenizer, wordDelayMs: runtime.simulatorWordDelayMs });
  // Upstream calls are GenAI spans when telemetry is on; otherwise the providers are used as they are.
  const traced = telemetryEnabled();
  const trace = (inner: ChatProvider, provider: string, model: string) =>
    traced ? traceChatProvider(inner, { provider, model, tokenizer: gptTokenizer }) : inner;
  const simulator = trace(simulatorProvider, 'oc.simulator', 'chat-2');
  const route = (model: string, deployments: ChatDeploymentConfig[]) => {
    const pool = new DeploymentPool(
      deployments.map((d) => {
        const target = chatTarget(d, simulatorProvider);
        return {
          id: d.id,
          provider: d.provider,
          model: d.model,
          weight: d.weight,
          maxConcurrency: d.maxConcurrency,
          rpm: d.rpm,
          target: { ...target, provider: trace(target.provider, GEN_AI_PROVIDER[d.provider] ?? d.provider, d.model) },
        };
      }),
      { now: () => runtime.clock.now(), random: runtime.random ?? Math.random },
    );
    const provider = new RoutedChatProvider({
      model,
      pool,
      now: () => runtime.clock.now(),
      // A provider's own words may name our account with it: the operator's log is the only place they go.
      onFailure: (deployment, err) =>
        runtime.logger.warn({ model, deployment, detail: failureDetail(err) }, 'chat deployment failed'),
    });
    return { provider, statuses: () => deploymentStatuses(model, pool.stats()) };
  };
  const chat2 = route('chat-2', runtime.deployments);
  const provider = chat2.provider;
  const custom = Object.entries(runtime.models ?? {}).map(([model, { pricePer1kTokensUsd, deployments }]) => ({
    model,
    microsPer1kTokens: usdToMicros(pricePer1kTokensUsd),
    ...route(model, deployments),
  }));
  const shared = runtime.replicas?.shared ?? false;
  const commands = new CommandHandler(runtime.eventStore, { otherWriters: shared });
  const readModels = shared ? readLatest(runtime.readModels, projections, runtime.eventStore) : readYourWrites(runtime.readModels, projections, commands);
  const frames = broadcastFrames(runtime.client);
  const service = new ChatService({
    eventStore: runtime.eventStore,
    commands,
    readModels,
    provider,
    simulator,
    tokenizer: gptTokenizer,
    funds: billingFunds(runtime.client),
    frames,
    clock: runtime.clock,
    ids: runtime.ids,
    pricing: runtime.pricing,
    lifecycle: runtime.replicas ? { ...runtime.lifecycle, replica: runtime.replicas.self } : runtime.lifecycle,
    ...(runtime.replicas ? { replicas: runtime.replicas } : {}),
    models: Object.fromEntries(custom.map((m) => [m.model, { provider: m.provider, microsPer1kTokens: m.microsPer1kTokens }])),
    deployments: () => [...chat2.statuses(), ...custom.flatMap((m) => m.statuses())],
    logger: runtime.logger,
  });
  const responses = new ResponsesService({
    chat: service,
    eventStore: runtime.eventStore,
    commands,
    readModels,
    frames,
    clock: runtime.clock,
    ids: runtime.ids,
  });
  const cancels = await runtime.client.onBroadcast(Subjects.chat.cancelStream, onCancelStream(service, runtime.logger));
  let sweep: { stop(): Promise<void> } | undefined;
  return {
    service,
    responses,
    module: ChatModule.register(service, responses, runtime.logger),
    /** Billing answers by now: what a crash left reserved is released at once, then every few seconds. */
    listening() {
      gptTokenizer.warmUp();
      sweep = repeatByClock(
        runtime.clock,
        ABANDONED_SWEEP_MS,
        async () => {
          const settled = await service.settleAbandoned();
          if (settled > 0) runtime.logger.warn({ settled }, 'abandoned completions settled (a stopped process or an unreachable billing left them reserved); their funds released');
        },
        (err) => runtime.logger.warn({ err }, 'settling abandoned completions failed; will retry'),
      );
    },
    /** The completions in flight may finish for up to `graceMs`; those still running then are cut. */
    drain: (graceMs: number) => service.drain(graceMs),
    async close() {
      await sweep?.stop();
      await cancels.stop();
      await service.close();
      await Promise.all([provider, ...custom.map((m) => m.provider)].map((p) => p.close()));
      await projections.stop();
    },
  };
}
