import { type ChildProcess, fork } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ffmpeg from '@ffmpeg-installer/ffmpeg';
import { VIDEO_SECONDS, VIDEO_SIZES, type VideoSeconds, type VideoSize } from '@oc/contracts';
import type { RenderedClip, Renderer } from '../application/ports';

/** The encoding of every clip: a moving test pattern, kept small (8 fps, high CRF), and its first frame as WebP. */
const clipArgs = (size: VideoSize, seconds: VideoSeconds, video: string, thumbnail: string, threads: string[] = []) => [
  ...['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi'],
  ...['-i', `testsrc=size=${size}:rate=8:duration=${seconds}`],
  ...['-c:v', 'libx264', '-preset', 'ultrafast', '-crf', '35', '-pix_fmt', 'yuv420p', '-movflags', '+faststart', ...threads, video],
  ...['-frames:v', '1', '-c:v', 'libwebp', thumbnail],
];

/** A clip of an input_reference image held still for the length asked, cropped to fill the size, and its first frame. */
const imageClipArgs = (image: string, size: VideoSize, seconds: VideoSeconds, video: string, thumbnail: string) => {
  const [width, height] = size.split('x');
  return [
    ...['-hide_banner', '-loglevel', 'error', '-y', '-loop', '1', '-framerate', '8', '-t', seconds, '-i', image],
    ...['-filter_complex', `[0:v]scale=${width}:${height}:force_original_aspect_ratio=increase,crop=${width}:${height},setsar=1,split=2[v][t]`],
    ...['-map', '[v]', '-c:v', 'libx264', '-preset', 'ultrafast', '-crf', '35', '-pix_fmt', 'yuv420p', '-movflags', '+faststart', video],
    ...['-map', '[t]', '-frames:v', '1', '-c:v', 'libwebp', thumbnail],
  ];
};

/** Part of every cached file's name: a change of encoding settings renders anew instead of serving old files. */
const RENDER_VERSION = createHash('sha256')
  .update(JSON.stringify([ffmpeg.version, clipArgs('1280x720', '4', 'v', 't'), imageClipArgs('i', '1280x720', '4', 'v', 't')]))
  .digest('hex')
  .slice(0, 8);

/** The order of the ahead-of-time renders: the most asked-for first. */
export const ALL_CLIPS: readonly (readonly [VideoSize, VideoSeconds])[] = VIDEO_SECONDS.flatMap((seconds) =>
  VIDEO_SIZES.map((size) => [size, seconds] as const),
);

/** The small process that spawns ffmpeg for us (see the file). */
const SPAWNER = join(import.meta.dirname, 'ffmpeg-spawner.mjs');

/**
 * ffmpeg runs through one small helper process: forking the service process itself for every run would
 * block its event loop for 10-40 ms each time. Started at the first run, again after it died.
 */
class FfmpegSpawner {
  private helper: ChildProcess | undefined;
  private readonly pending = new Map<number, { resolve(): void; reject(error: Error): void }>();
  private seq = 0;

  run(args: string[], background: boolean): Promise<void> {
    if (this.helper && !this.helper.connected) this.helper = undefined;
    const helper = (this.helper ??= this.start());
    const id = ++this.seq;
    return new Promise<void>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      helper.send({ id, file: ffmpeg.path, args, background }, (error) => {
        if (!error) return;
        this.pending.delete(id);
        reject(error);
      });
    });
  }

  /** Kills every run in progress (their callers see an error) and the helper; resolves once it is gone. */
  async close(): Promise<void> {
    const helper = this.helper;
    if (!helper) return;
    const exited = new Promise<void>((resolve) => helper.once('exit', () => resolve()));
    if (helper.connected) helper.disconnect();
    else helper.kill('SIGKILL');
    await exited;
  }

  private start(): ChildProcess {
    // No loader (tsx) and no inherited flags: a plain, small Node process.
    const helper = fork(SPAWNER, [], { execArgv: [], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    helper.on('message', (message: { id: number; error: string | null }) => {
      const call = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (message.error === null) call?.resolve();
      else call?.reject(new Error(`ffmpeg failed: ${message.error}`));
    });
    const gone = (reason: string) => {
      if (this.helper === helper) this.helper = undefined;
      for (const call of this.pending.values()) call.reject(new Error(`ffmpeg stopped: ${reason}`));
      this.pending.clear();
    };
    helper.once('exit', () => gone('its helper process exited'));
    // Could not be started, or could not be sent to: the runs in progress fail (and are retried by their steps).
    helper.on('error', (error) => gone(`its helper process failed (${error.message})`));
    // Neither the process nor its channel keeps the service alive.
    helper.unref();
    helper.channel?.unref();
    return helper;
  }
}

export interface FfmpegRendererOptions {
  /** Where rendered clips and their stills are kept across restarts (the video data dir's `renders/`). */
  cacheDir: string;
}

/**
 * Real H.264 MP4s from the ffmpeg binary that ships inside the `@ffmpeg-installer` npm package. A clip
 * depends only on its size and length, so each is rendered once, together with its WebP still (one
 * ffmpeg run), and kept as files under `cacheDir`: later jobs, and the same data dir after a restart, reuse
 * them. Files appear by rename once complete and are never written again, so stores may hard-link them.
 */
export class FfmpegRenderer implements Renderer {
  private readonly clips = new Map<string, Promise<RenderedClip>>();
  private readonly ffmpeg = new FfmpegSpawner();
  private prerendering: Promise<void> | undefined;
  private closed = false;
  /** ffmpeg runs so far (clips and upstream thumbnails), for tests and diagnostics. */
  renders = 0;

  constructor(private readonly options: FfmpegRendererOptions) {}

  clip(size: VideoSize, seconds: VideoSeconds): Promise<RenderedClip> {
    return this.clipAt(size, seconds, 'normal');
  }

  /**
   * Renders what is not on disk yet, one clip at a time at the lowest CPU priority, in the background;
   * a job that needs a clip first renders it at once. Resolves when done (or closed); never rejects.
   */
  prerender(clips: readonly (readonly [VideoSize, VideoSeconds])[] = ALL_CLIPS, onError?: (error: unknown) => void): Promise<void> {
    this.prerendering ??= (async () => {
      for (const [size, seconds] of clips) {
        if (this.closed) return;
        await this.clipAt(size, seconds, 'background').catch((error: unknown) => {
          if (!this.closed) onError?.(error);
        });
      }
    })();
    return this.prerendering;
  }

  async thumbnail(mp4: Buffer): Promise<Buffer> {
    const dir = await mkdtemp(join(tmpdir(), 'oc-video-'));
    try {
      const input = join(dir, 'in.mp4');
      const out = join(dir, 'thumbnail.webp');
      await writeFile(input, mp4);
      await this.run(['-hide_banner', '-loglevel', 'error', '-y', '-i', input, '-frames:v', '1', '-c:v', 'libwebp', out], 'normal');
      return await readFile(out);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  async imageClip(image: Buffer, size: VideoSize, seconds: VideoSeconds): Promise<RenderedClip> {
    const digest = createHash('sha256').update(image).digest('hex');
    const files = this.imageClipFiles(digest, size, seconds);
    const kept = await this.onDisk(files);
    if (kept) return kept;
    await mkdir(this.options.cacheDir, { recursive: true });
    const scratch = await mkdtemp(join(this.options.cacheDir, '.render-'));
    try {
      const input = join(scratch, 'image');
      const video = join(scratch, 'clip.mp4');
      const thumbnail = join(scratch, 'clip.webp');
      await writeFile(input, image);
      await this.run(imageClipArgs(input, size, seconds, video, thumbnail), 'normal');
      await rename(thumbnail, files.thumbnail);
      await rename(video, files.video);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
    return { ...files, bytes: (await stat(files.video)).size };
  }

  async renderedImageClip(digest: string, size: VideoSize, seconds: VideoSeconds): Promise<RenderedClip | null> {
    return this.onDisk(this.imageClipFiles(digest, size, seconds));
  }

  private imageClipFiles(digest: string, size: VideoSize, seconds: VideoSeconds) {
    const base = join(this.options.cacheDir, `image-${digest}-${size}-${seconds}s-${RENDER_VERSION}`);
    return { video: `${base}.mp4`, thumbnail: `${base}.webp` };
  }

  forget(size: VideoSize, seconds: VideoSeconds): void {
    this.clips.delete(`${size}/${seconds}`);
  }

  /** Stops a render in progress (its callers see an error) and the ahead-of-time renders. */
  async close(): Promise<void> {
    this.closed = true;
    await this.ffmpeg.close();
    await this.prerendering;
  }

  private clipAt(size: VideoSize, seconds: VideoSeconds, priority: 'normal' | 'background'): Promise<RenderedClip> {
    const key = `${size}/${seconds}`;
    let clip = this.clips.get(key);
    if (!clip) {
      clip = this.load(size, seconds, priority);
      clip.catch(() => this.clips.delete(key));
      this.clips.set(key, clip);
    }
    return clip;
  }

  private async load(size: VideoSize, seconds: VideoSeconds, priority: 'normal' | 'background'): Promise<RenderedClip> {
    const base = join(this.options.cacheDir, `${size}-${seconds}s-${RENDER_VERSION}`);
    const files = { video: `${base}.mp4`, thumbnail: `${base}.webp` };
    const kept = await this.onDisk(files);
    if (kept) return kept;
    await mkdir(this.options.cacheDir, { recursive: true });
    // Rendered aside, then renamed into place (still first): a clip on disk is always complete.
    const scratch = await mkdtemp(join(this.options.cacheDir, '.render-'));
    try {
      const video = join(scratch, 'clip.mp4');
      const thumbnail = join(scratch, 'clip.webp');
      // In the background on one core, so that the service's own work comes first.
      await this.run(clipArgs(size, seconds, video, thumbnail, priority === 'background' ? ['-threads', '1'] : []), priority);
      await rename(thumbnail, files.thumbnail);
      await rename(video, files.video);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
    return { ...files, bytes: (await stat(files.video)).size };
  }

  private async onDisk(files: { video: string; thumbnail: string }): Promise<RenderedClip | null> {
    try {
      const [video] = await Promise.all([stat(files.video), stat(files.thumbnail)]);
      return { ...files, bytes: video.size };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  private run(args: string[], priority: 'normal' | 'background'): Promise<void> {
    if (this.closed) return Promise.reject(new Error('The renderer is closed'));
    this.renders++;
    // In the background at the lowest CPU priority too.
    return this.ffmpeg.run(args, priority === 'background');
  }
}
