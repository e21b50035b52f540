import { ApiError, type ChatFeature } from '@oc/contracts';
import { type DeploymentPool, type DeploymentSpec, ProviderError } from '@oc/routing';
import type { ChatProvider, GenerationEvent, GenerationRequest, ServedBy } from '../application/ports';
import { featuresUsed } from '../domain/features';

/** One deployment of a chat model: its adapter, what it accepts, and what it costs us. */
export interface ChatTarget {
  provider: ChatProvider;
  features: ReadonlySet<ChatFeature>;
  costMicrosPer1M: { input: number; output: number };
}

export interface RoutedChatOptions {
  /** The public model, for messages. */
  model: string;
  pool: DeploymentPool<ChatTarget>;
  now: () => number;
  /** A provider's own words about a failure, for the operator's log only. */
  onFailure(deployment: string, error: unknown): void;
}

/**
 * A public chat model served by its deployments. Each call goes to a weighted choice among the deployments that
 * accept what the request uses and may take a call now; a retryable failure fails over to the next one as long
 * as nothing has reached the customer. A whole (non-streamed) answer is held until it is complete, so a failure
 * anywhere in it fails over; a streamed one is relayed as it comes, and a failure after its first text ends it
 * with the error (the caller charges what was delivered). Every attempt is reported to the deployment's breaker.
 */
export class RoutedChatProvider implements ChatProvider {
  constructor(private readonly options: RoutedChatOptions) {}

  unsupported(request: GenerationRequest): string | undefined {
    const specs = this.options.pool.specs;
    const all = featuresUsed(request);
    for (const use of all) if (!specs.some((d) => d.target.features.has(use.feature))) return use.param;
    if (specs.some((d) => all.every((use) => d.target.features.has(use.feature)))) return undefined;
    // Each is accepted somewhere, but no single deployment accepts them together.
    return all.find((use) => !specs[0]!.target.features.has(use.feature))?.param;
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    const used = featuresUsed(request);
    const eligible = (d: DeploymentSpec<ChatTarget>) => used.every((use) => d.target.features.has(use.feature));
    const tried = new Set<string>();
    let last: unknown;
    for (;;) {
      const acquired = this.options.pool.acquire(eligible, tried);
      if (!acquired.lease) throw this.exhausted(last, acquired.retryAt);
      const { lease } = acquired;
      tried.add(lease.id);
      const served: GenerationEvent = { type: 'served', served: servedBy(lease.spec) };
      const startedAt = this.options.now();
      let firstByteMs: number | undefined;
      let relayed = false;
      const held: GenerationEvent[] = [served];
      let finished = false;
      let finishes = 0;
      try {
        for await (const event of lease.spec.target.provider.generate(request, signal)) {
          firstByteMs ??= this.options.now() - startedAt;
          if (event.type === 'finish') finished = ++finishes === (request.n ?? 1);
          if (!request.stream) held.push(event);
          else {
            // The deployment is named once its answer has started: a failover before then names the next one.
            if (!relayed) yield* held.splice(0);
            relayed = true;
            yield event;
          }
        }
      } catch (error) {
        if (signal.aborted) {
          lease.abandoned();
          return;
        }
        lease.failed(error);
        this.options.onFailure(lease.id, error);
        if (relayed) throw customerError(error, null, this.options.model, true);
        if (error instanceof ProviderError && error.kind === 'request') throw customerError(error, null, this.options.model, false);
        last = error;
        continue;
      }
      if (!finished) {
        if (signal.aborted) {
          lease.abandoned();
          return;
        }
        // Ended without its last event: not a whole answer, whatever came before.
        const cut = new ProviderError({ kind: 'retryable', message: 'The answer ended early.', detail: `${lease.id}: the answer ended without a finish` });
        lease.failed(cut);
        this.options.onFailure(lease.id, cut);
        if (relayed) throw customerError(cut, null, this.options.model, true);
        last = cut;
        continue;
      }
      lease.succeeded(firstByteMs ?? this.options.now() - startedAt);
      yield* held;
      return;
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.options.pool.specs.map((d) => d.target.provider.close?.()));
  }

  /** No deployment left to try: the last failure, or none could take the call at all. */
  private exhausted(last: unknown, retryAt: number | null): ApiError {
    return customerError(last, retryAt === null ? null : retryAt - this.options.now(), this.options.model, false);
  }
}

function servedBy(spec: DeploymentSpec<ChatTarget>): ServedBy {
  return { deployment: spec.id, provider: spec.provider, model: spec.model, costMicrosPer1M: spec.target.costMicrosPer1M };
}

/**
 * What the customer is told: never the provider's own words, which may name our account with it. A request the
 * provider refused on its merits is a 400; anything else is a 503 to retry, after the soonest time a
 * deployment can take a call again when that is known.
 */
function customerError(error: unknown, waitMs: number | null, model: string, midAnswer: boolean): ApiError {
  if (error instanceof ProviderError && error.kind === 'request' && !midAnswer) {
    return new ApiError({
      status: 400,
      type: 'invalid_request_error',
      code: 'upstream_rejected',
      message: `The provider serving ${model} refused this request as invalid.`,
    });
  }
  const retryAfter = Math.max(1, Math.ceil((waitMs ?? (error instanceof ProviderError ? (error.retryAfterMs ?? 1000) : 1000)) / 1000));
  const message = midAnswer
    ? `The provider serving ${model} failed while answering.`
    : error === undefined
      ? `Every deployment of ${model} is busy or recovering; retry in ${retryAfter} s.`
      : `Every provider of ${model} failed or is unavailable; retry in ${retryAfter} s.`;
  return new ApiError({ status: 503, type: 'service_unavailable_error', code: 'upstream_error', message, retryAfter });
}
