import type { VideoModel } from '@oc/contracts';
import { inSpan, markSpanError } from '@oc/telemetry';
import type { GenerationJob, VideoProvider } from '../application/ports';

/**
 * A video upstream's calls as GenAI client spans: the start of a generation (`generate_content <model>`), its
 * polls and its download, with `gen_ai.operation.name`, `gen_ai.provider.name` and `gen_ai.request.model` (the
 * upstream's name for the model). Wrapped around a provider only when telemetry is on.
 */
export function traceVideoProvider(inner: VideoProvider, options: { provider: string; modelOf: (model: VideoModel) => string }): VideoProvider {
  const attributes = (job: GenerationJob, operation: string) => ({
    'gen_ai.operation.name': 'generate_content',
    'gen_ai.provider.name': options.provider,
    'gen_ai.request.model': options.modelOf(job.model),
    'gen_ai.output.type': 'video',
    'oc.video.id': job.videoId,
    'oc.upstream.operation': operation,
  });
  return {
    name: inner.name,
    start: (job, now) =>
      inSpan(`generate_content ${options.modelOf(job.model)}`, { kind: 'client', attributes: { ...attributes(job, 'start'), 'oc.video.seconds': job.seconds, 'oc.video.size': job.size } }, async (span) => {
        const started = await inner.start(job, now);
        if (!span) return started;
        if ('status' in started) markSpanError(span, started.code, started.message);
        else span.setAttribute('gen_ai.response.id', started.upstreamId);
        return started;
      }),
    nextPollAt: (job, started, now) => inner.nextPollAt(job, started, now),
    poll: (job, started, now) =>
      inSpan(`poll ${options.modelOf(job.model)}`, { kind: 'client', attributes: { ...attributes(job, 'poll'), 'gen_ai.response.id': started.upstreamId } }, async (span) => {
        const status = await inner.poll(job, started, now);
        span?.setAttribute('oc.upstream.status', status.status);
        if (span && status.status === 'failed') markSpanError(span, status.code, status.message);
        return status;
      }),
    download: (job, started) =>
      inSpan(`download ${options.modelOf(job.model)}`, { kind: 'client', attributes: { ...attributes(job, 'download'), 'gen_ai.response.id': started.upstreamId } }, () =>
        inner.download(job, started),
      ),
  };
}
