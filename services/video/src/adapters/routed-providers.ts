import type { VideoModel } from '@oc/contracts';
import { type DeploymentPool, deploymentStatuses, ProviderError } from '@oc/routing';
import type { GenerationJob, JobShape, ServingDeployment, StartedGeneration, UpstreamFailure, VideoRouting } from '../application/ports';
import type { VideoTarget } from './deployments';

/**
 * The video models' deployments. A job is submitted to a weighted choice among the deployments that generate
 * its length and size and may take a call now; an outage (connection, timeout, 429, 5xx, a wrong key) fails
 * over to the next. Its answer, a started job or a refusal of the prompt, ends the choice: the job then stays
 * with that deployment (its id is recorded with the provider's job id), polled there until it ends.
 */
export class RoutedVideoProviders implements VideoRouting {
  constructor(
    private readonly pools: Record<VideoModel, DeploymentPool<VideoTarget>>,
    private readonly options: { now: () => number; onFailure(deployment: string, error: unknown): void },
  ) {}

  private pool(model: VideoModel): DeploymentPool<VideoTarget> {
    const pool = Object.hasOwn(this.pools, model) ? this.pools[model] : undefined;
    if (!pool) throw new Error(`video model ${model} is not served here`);
    return pool;
  }

  unsupported(job: JobShape): 'seconds' | 'size' | 'input_reference' | undefined {
    const specs = this.pool(job.model).specs;
    if (!specs.some((d) => d.target.seconds.has(job.seconds))) return 'seconds';
    if (!specs.some((d) => d.target.sizes.has(job.size))) return 'size';
    // Each is made somewhere, but not together.
    if (!specs.some((d) => d.target.accepts(job.seconds, job.size))) return 'size';
    if (job.imageType && !specs.some((d) => takes(d.target, job))) return 'input_reference';
    return undefined;
  }

  async start(job: GenerationJob, now: number): Promise<(StartedGeneration & { deployment: string }) | UpstreamFailure> {
    // A job queued before its model left the catalog: nothing can generate it.
    if (!Object.hasOwn(this.pools, job.model)) return { status: 'failed', code: 'generation_failed', message: `The model ${job.model} is no longer served.` };
    const pool = this.pool(job.model);
    const tried = new Set<string>();
    let last: unknown;
    for (;;) {
      const acquired = pool.acquire((d) => takes(d.target, { ...job, imageType: job.image?.contentType }), tried);
      if (!acquired.lease) {
        throw last ?? new ProviderError({ kind: 'retryable', message: `No deployment of ${job.model} can take a job now.`, detail: `all busy until ${acquired.retryAt}` });
      }
      const { lease } = acquired;
      tried.add(lease.id);
      const startedAt = this.options.now();
      try {
        const answer = await lease.spec.target.provider.start(job, now);
        lease.succeeded(this.options.now() - startedAt);
        return 'status' in answer ? answer : { ...answer, deployment: lease.id };
      } catch (error) {
        lease.failed(error);
        this.options.onFailure(lease.id, error);
        // The provider refused what was asked: another would refuse it too, and the job cannot succeed.
        if (error instanceof ProviderError && error.kind === 'request') {
          return { status: 'failed', code: 'generation_failed', message: `The provider serving ${job.model} refused the request.` };
        }
        last = error;
      }
    }
  }

  deployment(model: VideoModel, id: string): ServingDeployment | undefined {
    // A model the catalog no longer lists has no deployment left.
    const spec = Object.hasOwn(this.pools, model) ? this.pools[model]!.specs.find((d) => d.id === id) : undefined;
    return (
      spec && {
        id: spec.id,
        provider: spec.provider,
        upstreamModel: spec.model,
        adapter: spec.target.provider,
        costMicrosPerSecond: spec.target.costMicrosPerSecond,
      }
    );
  }

  pollIntervalMs(model: VideoModel, deployment: string | null): number | undefined {
    if (!Object.hasOwn(this.pools, model)) return undefined;
    const { specs } = this.pools[model]!;
    const serving = specs.find((d) => d.id === deployment);
    return serving ? serving.target.pollIntervalMs : Math.min(...specs.map((d) => d.target.pollIntervalMs));
  }

  statuses() {
    return Object.entries(this.pools).flatMap(([model, pool]) => deploymentStatuses(model, pool.stats()));
  }
}

/** Whether a deployment makes this length at this size, from this image when there is one. */
function takes(target: VideoTarget, job: JobShape): boolean {
  return target.accepts(job.seconds, job.size) && (job.imageType === undefined || target.imageTypes.has(job.imageType));
}
