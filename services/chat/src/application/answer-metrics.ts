import { toApiError } from '@oc/contracts';
import { type Attributes, instruments, telemetryEnabled } from '@oc/telemetry';
import type { Outcome } from './chat-answers';

/**
 * OpenTelemetry's GenAI model server metrics (gen_ai.server.*) for the answers this service gives, with the names,
 * units and bucket boundaries of the semantic conventions (docs/gen-ai/gen-ai-metrics.md, 1.41).
 */
const metrics = instruments((meter) => ({
  duration: meter.createHistogram('gen_ai.server.request.duration', {
    description: 'Generative AI server request duration such as time-to-last byte or last output token.',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92] },
  }),
  firstToken: meter.createHistogram('gen_ai.server.time_to_first_token', {
    description: 'Time to generate first token for successful responses.',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0] },
  }),
  perOutputToken: meter.createHistogram('gen_ai.server.time_per_output_token', {
    description: 'Time per output token generated after the first token for successful responses.',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5] },
  }),
}));

/** `gen_ai.operation.name`: a chat completion (and a response, which is one) or a text completion. */
export type AnswerOperation = 'chat' | 'text_completion';

/** The timing of one answer, from its reservation to its last token charged and stored. */
export interface AnswerMeter {
  /** A token of the answer was generated (text or a tool call's): the first one's time is kept. */
  token(): void;
  /** Answered (or cut short by its caller: `cancelled`): its duration and, unless cut short, its token timings. */
  answered(outcome: Outcome, cancelled: boolean): void;
  failed(error: unknown): void;
}

const UNMETERED: AnswerMeter = { token() {}, answered() {}, failed() {} };

/**
 * `gen_ai.provider.name` of the answers we serve: this service is the provider its customers call. The upstream
 * that generated each answer is its `gen_ai.response.model`, and the client metrics' provider.
 */
const PROVIDER = 'oc';

/**
 * The attribute sets of one operation, mode and model, made once for each response model and error code (a few
 * dozen in all: the catalog's models, the API's error codes), so that recording an answer allocates none. Never
 * the organization, the key or the completion: those are the spans' attributes, unbounded on a metric.
 */
class Series {
  private readonly base: Attributes;
  /** By response model ('' for none: a test key's simulator names none). */
  private readonly answered = new Map<string, { ok: Attributes; cancelled: Attributes }>();
  private readonly failed = new Map<string, Attributes>();

  constructor(operation: AnswerOperation, mode: string, model: string) {
    this.base = { 'gen_ai.operation.name': operation, 'gen_ai.provider.name': PROVIDER, 'gen_ai.request.model': model, 'oc.mode': mode };
  }

  ofAnswer(responseModel: string | undefined, cancelled: boolean): Attributes {
    let found = this.answered.get(responseModel ?? '');
    if (!found) {
      const ok = responseModel === undefined ? this.base : { ...this.base, 'gen_ai.response.model': responseModel };
      this.answered.set(responseModel ?? '', (found = { ok, cancelled: { ...ok, 'error.type': 'cancelled' } }));
    }
    return cancelled ? found.cancelled : found.ok;
  }

  ofFailure(errorType: string): Attributes {
    let found = this.failed.get(errorType);
    if (!found) this.failed.set(errorType, (found = { ...this.base, 'error.type': errorType }));
    return found;
  }
}

/** operation → mode → model. */
const series = new Map<AnswerOperation, Map<string, Map<string, Series>>>();
function seriesOf(operation: AnswerOperation, mode: string, model: string): Series {
  let byMode = series.get(operation);
  if (!byMode) series.set(operation, (byMode = new Map()));
  let byModel = byMode.get(mode);
  if (!byModel) byMode.set(mode, (byModel = new Map()));
  let found = byModel.get(model);
  if (!found) byModel.set(model, (found = new Series(operation, mode, model)));
  return found;
}

class Meter implements AnswerMeter {
  private readonly started = performance.now();
  private firstAt: number | undefined;

  constructor(private readonly series: Series) {}

  token() {
    this.firstAt ??= performance.now();
  }

  answered(outcome: Outcome, cancelled: boolean) {
    const seconds = (performance.now() - this.started) / 1000;
    const attributes = this.series.ofAnswer(outcome.served?.model, cancelled);
    metrics().duration.record(seconds, attributes);
    if (cancelled || this.firstAt === undefined) return;
    const first = (this.firstAt - this.started) / 1000;
    metrics().firstToken.record(first, attributes);
    // As the conventions define it: the rest of the request's duration over the tokens after the first.
    const after = outcome.usage.completion_tokens - 1;
    if (after > 0) metrics().perOutputToken.record((seconds - first) / after, attributes);
  }

  failed(error: unknown) {
    // The error code the customer is answered with: the API's few codes, never its message.
    metrics().duration.record((performance.now() - this.started) / 1000, this.series.ofFailure(toApiError(error).code));
  }
}

/** Starts timing an answer now; while telemetry is off, a meter that records nothing and costs nothing. */
export function meterAnswer(operation: AnswerOperation, model: string, mode: string): AnswerMeter {
  return telemetryEnabled() ? new Meter(seriesOf(operation, mode, model)) : UNMETERED;
}
