import { hostname } from 'node:os';
import { join } from 'node:path';
import { aloneReplica, type Clock, type IdSource, type ModelCatalog, type Replicas, repeatByClock, type VideoModel } from '@oc/contracts';
import { CommandHandler, type EventStore } from '@oc/eventstore';
import type { ServiceClient } from '@oc/messaging';
import { projectInThisThread, type ProjectorFactory, type ReadModelStore, readLatest, readYourWrites } from '@oc/readmodel';
import { telemetryEnabled } from '@oc/telemetry';
import { type DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import { videoReadModels } from './projections';
import { billingOver } from './adapters/billing-client';
import { FfmpegRenderer } from './adapters/ffmpeg-renderer';
import { LocalFileStore } from './adapters/local-file-store';
import { DeploymentPool, failureDetail, providerEnvironment, readCatalogFile } from '@oc/routing';
import { type VideoModelDeployments, type VideoTarget, videoDeployments, videoTarget } from './adapters/deployments';
import { RoutedVideoProviders } from './adapters/routed-providers';
import { ClockScheduler } from './adapters/scheduler';
import { SimulatedProvider } from './adapters/simulator';
import { traceVideoProvider } from './adapters/traced-provider';
import { fileKey, type JobTimings, VideoJobs } from './application/jobs';
import { type VideoPrices, videoPrices } from './domain/pricing';
import type { FileStore, Scheduler, UrlSigner, VideoProvider } from './application/ports';
import { VideoService } from './application/videos';
import type { VideoConfig } from './config';
import { LOGGER, VIDEO_SERVICE, VideoController } from './transport/video.controller';

export interface VideoRuntime {
  eventStore: EventStore;
  readModels: ReadModelStore;
  /** Where the projections run; in this thread unless the process runs them in a projection thread. */
  projector?: ProjectorFactory;
  /** To reach billing. */
  client: ServiceClient;
  clock: Clock;
  ids: IdSource;
  logger: Logger;
  config: VideoConfig;
  /**
   * Each video model's deployments for live keys, in catalog order (test keys always get the simulator); by
   * default MODELS_FILE's, else the built-in order over the providers' keys in the environment. Its models are
   * the ones served: the spec's, and models of the operator's own priced in MODELS_FILE.
   */
  deployments?: VideoModelDeployments;
  /** The router's weighted choice; Math.random unless a test fixes it. */
  random?: () => number;
  /** Absolute base of `url` values (PUBLIC_BASE_URL). */
  publicBaseUrl: string;
  /** Temporary (upstream) files under `<dataDir>/upstream`, permanent ones under `<dataDir>/objects` unless S3 is configured. */
  dataDir: string;
  scheduler?: Scheduler;
  /**
   * Replicas of video on the same event store and storage (its own process): each runs the jobs of the
   * videos it created and takes over those of a replica that is gone. Absent, this process is alone and
   * runs every unfinished job.
   */
  replicas?: Replicas;
}

/** How often a replica looks for the jobs of replicas that are gone (by the injected clock). */
export const TAKEOVER_SWEEP_MS = 5_000;

@Module({})
export class VideoModule {
  static register(service: VideoService, logger: Logger): DynamicModule {
    return {
      module: VideoModule,
      controllers: [VideoController],
      providers: [
        { provide: VIDEO_SERVICE, useValue: service },
        { provide: LOGGER, useValue: logger },
      ],
    };
  }
}

/**
 * The deployments behind each model. Upstream calls are GenAI spans when telemetry is on; otherwise the adapters
 * are used as they are.
 */
function routedProviders(
  runtime: VideoRuntime,
  catalog: ModelCatalog | undefined,
  simulator: VideoProvider,
): { live: RoutedVideoProviders; simulator: VideoProvider; prices: VideoPrices } {
  const { config } = runtime;
  const deployments = runtime.deployments ?? videoDeployments(catalog, config, providerEnvironment(config));
  const priced = videoPrices(config.VIDEO_PRICES, catalog);
  const prices = Object.fromEntries(
    Object.keys(deployments).map((model) => {
      if (!Object.hasOwn(priced, model)) throw new Error(`video model ${model} has no price: give it one in MODELS_FILE`);
      return [model, priced[model]!];
    }),
  );
  const traced = telemetryEnabled();
  // The simulator has no model of its own: its spans name the public model, as they always did.
  const trace = (inner: VideoProvider, provider: string, model: string | undefined) =>
    traced ? traceVideoProvider(inner, { provider, modelOf: (publicModel) => model ?? publicModel }) : inner;
  const pools = Object.fromEntries(
    Object.entries(deployments).map(([model, served]) => [
      model,
      new DeploymentPool(
        served.map((d) => {
          const target = videoTarget(d, simulator);
          // OpenTelemetry's well-known value for Gemini (Veo through generativelanguage.googleapis.com).
          const provider = d.provider === 'simulator' ? 'oc.simulator' : d.provider === 'gemini' ? 'gcp.gemini' : d.provider;
          return { id: d.id, provider: d.provider, model: d.model, weight: d.weight, maxConcurrency: d.maxConcurrency, rpm: d.rpm, target: { ...target, provider: trace(target.provider, provider, d.provider === 'simulator' ? undefined : d.model) } };
        }),
        { now: () => runtime.clock.now(), random: runtime.random ?? Math.random },
      ),
    ]),
  ) as Record<VideoModel, DeploymentPool<VideoTarget>>;
  const live = new RoutedVideoProviders(pools, {
    now: () => runtime.clock.now(),
    // A provider's own words may name our account with it: the operator's log is the only place they go.
    onFailure: (deployment, err) =>
      runtime.logger.warn({ deployment, detail: failureDetail(err) }, 'video deployment failed'),
  });
  return { live, simulator: traced ? traceVideoProvider(simulator, { provider: 'oc.simulator', modelOf: (model) => model }) : simulator, prices };
}

/** The S3 client is loaded only when a bucket is configured: it is large, and costs start-up time. */
async function objectStore(config: VideoConfig, dataDir: string): Promise<FileStore & Partial<UrlSigner> & { close?(): void }> {
  if (!config.VIDEO_S3_BUCKET) return new LocalFileStore(join(dataDir, 'objects'));
  const { S3FileStore } = await import('./adapters/s3-file-store');
  const { VIDEO_S3_ACCESS_KEY_ID: accessKeyId, VIDEO_S3_SECRET_ACCESS_KEY: secretAccessKey } = config;
  return new S3FileStore({
    bucket: config.VIDEO_S3_BUCKET,
    endpoint: config.VIDEO_S3_ENDPOINT,
    region: config.VIDEO_S3_REGION,
    credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
    forcePathStyle: config.VIDEO_S3_FORCE_PATH_STYLE === '1',
  });
}

/**
 * Presigned URLs stand for a persisted video when the object store signs them, no CDN fronts it, and the
 * operator gave them a lifetime (VIDEO_S3_SIGNED_URL_TTL_SECONDS): the store must be reachable by clients.
 */
function permanentUrlSigner(config: VideoConfig, store: Partial<UrlSigner>, clock: Clock) {
  const ttl = config.VIDEO_S3_SIGNED_URL_TTL_SECONDS;
  if (config.VIDEO_PUBLIC_BASE_URL || ttl === undefined || !store.signedUrl) return undefined;
  const signer = store as UrlSigner;
  return (key: string) => signer.signedUrl(key, ttl, clock.now());
}

/** Builds the video service and catches its read model up; every unfinished job resumes once it listens. */
export async function createVideo(runtime: VideoRuntime) {
  const { config, clock, logger } = runtime;
  const projections = (runtime.projector ?? projectInThisThread)({
    service: 'video',
    set: videoReadModels,
    eventStore: runtime.eventStore,
    readModels: runtime.readModels,
    onError: (err) => logger.error({ err }, 'video projection stopped'),
  });
  await projections.start();
  const renderer = new FfmpegRenderer({ cacheDir: join(runtime.dataDir, 'renders') });
  const simulator = new SimulatedProvider({
    durationMs: config.SIM_VIDEO_DURATION_MS,
    pollIntervalMs: config.SIM_VIDEO_POLL_MS,
    renderer,
  });
  const scheduler = runtime.scheduler ?? new ClockScheduler(clock, (err, key) => logger.error({ err, key }, 'video task failed'));
  const temporary: FileStore = new LocalFileStore(join(runtime.dataDir, 'upstream'));
  const permanent = await objectStore(config, runtime.dataDir);
  const replicas = runtime.replicas ?? aloneReplica(hostname());
  const commands = new CommandHandler(runtime.eventStore, { otherWriters: replicas.shared });
  const readModels = replicas.shared
    ? readLatest(runtime.readModels, projections, runtime.eventStore)
    : readYourWrites(runtime.readModels, projections, commands);
  const billing = billingOver(runtime.client);
  const timings: JobTimings = {
    jobTimeoutMs: config.VIDEO_JOB_TIMEOUT_MS,
    persistAfterMs: config.VIDEO_PERSIST_AFTER_MS,
    tempTtlMs: config.VIDEO_TEMP_TTL_MS,
    retryMs: config.VIDEO_RETRY_MS,
  };
  const base = runtime.publicBaseUrl.replace(/\/$/, '');
  const providers = routedProviders(runtime, config.MODELS_FILE ? readCatalogFile(config.MODELS_FILE) : undefined, simulator);
  const jobs = new VideoJobs({
    eventStore: runtime.eventStore,
    commands,
    readModels,
    billing,
    providers,
    temporary,
    permanent,
    renderer,
    scheduler,
    clock,
    logger,
    timings,
    replicas,
    temporaryUrl: (videoId) => `${base}/v1/videos/${videoId}/content/temporary`,
    permanentUrl: (video) =>
      config.VIDEO_PUBLIC_BASE_URL
        ? `${config.VIDEO_PUBLIC_BASE_URL.replace(/\/$/, '')}/${fileKey(video, 'video')}`
        : `${base}/v1/videos/${video.videoId}/content/permanent`,
  });
  const service = new VideoService({
    commands,
    readModels,
    billing,
    jobs,
    temporary,
    permanent,
    clock,
    ids: runtime.ids,
    prices: providers.prices,
    routing: providers.live,
    simulatorPollIntervalMs: config.SIM_VIDEO_POLL_MS,
    deployments: () => providers.live.statuses(),
    timings,
    replicas,
    signPermanentUrl: permanentUrlSigner(config, permanent, clock),
    logger,
  });
  if (config.SIM_VIDEO_PRERENDER === '1') void renderer.prerender(undefined, (err) => logger.warn({ err }, 'rendering a clip ahead failed'));
  let takeovers: { stop(): Promise<void> } | undefined;
  return {
    service,
    jobs,
    module: VideoModule.register(service, logger),
    /**
     * Unfinished jobs resume once billing can answer their settlements; with replicas, those of a replica
     * that stops are taken over at the next sweep.
     */
    listening: () =>
      jobs.resume().then(
        () => {
          if (!replicas.shared) return;
          takeovers = repeatByClock(
            clock,
            TAKEOVER_SWEEP_MS,
            async () => {
              const taken = await jobs.takeOverFromGoneReplicas();
              if (taken > 0) logger.warn({ taken }, 'video jobs of a stopped replica taken over');
            },
            (err) => logger.warn({ err }, 'looking for the jobs of stopped replicas failed; will retry'),
          );
        },
        (err: unknown) => logger.error({ err }, 'unfinished videos not resumed'),
      ),
    async close() {
      await takeovers?.stop();
      await scheduler.close();
      await renderer.close();
      await projections.stop();
      permanent.close?.();
    },
  };
}
