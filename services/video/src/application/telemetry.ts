import { instruments, telemetryEnabled } from '@oc/telemetry';
import type { VideoState } from '../domain/video';

const metrics = instruments((meter) => ({
  jobs: meter.createCounter('oc.video.jobs', {
    description: 'Video jobs entering each state (queued, in_progress, completed, failed, rejected), by model.',
  }),
  duration: meter.createHistogram('oc.video.job.duration', {
    description: 'From queued to completed or failed.',
    unit: 's',
    advice: { explicitBucketBoundaries: [1, 5, 10, 20, 30, 60, 120, 300, 600, 1200] },
  }),
}));

const STATE_OF: Record<string, string> = {
  VideoQueued: 'queued',
  VideoProcessing: 'in_progress',
  VideoCompleted: 'completed',
  VideoFailed: 'failed',
  VideoRejected: 'rejected',
};

/** Counts the state changes `events` made (and how long a finished job took); nothing while telemetry is off. */
export function recordVideoEvents(events: readonly { type: string }[], state: VideoState, now: number): void {
  if (!telemetryEnabled() || state.status === 'absent') return;
  for (const { type } of events) {
    const entered = STATE_OF[type];
    if (!entered) continue;
    const labels = { 'oc.video.state': entered, 'gen_ai.request.model': state.model, 'oc.mode': state.mode };
    metrics().jobs.add(1, labels);
    if (entered === 'completed' || entered === 'failed') metrics().duration.record(Math.max(0, now - state.queuedAt) / 1000, labels);
  }
}
