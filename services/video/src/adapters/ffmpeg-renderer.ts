import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ffmpeg from '@ffmpeg-installer/ffmpeg';
import type { VideoSeconds, VideoSize } from '@oc/contracts';
import type { Renderer } from '../application/ports';

const run = promisify(execFile);

async function inScratchDir<T>(work: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'oc-video-'));
  try {
    return await work(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Real H.264 MP4s from the ffmpeg binary that ships inside the `@ffmpeg-installer` npm package: a
 * moving test pattern at the requested size and duration, kept small (8 fps, high CRF). Clips depend
 * only on size and duration, so each is rendered once per process.
 */
export class FfmpegRenderer implements Renderer {
  private readonly clips = new Map<string, Promise<Buffer>>();

  clip(size: VideoSize, seconds: VideoSeconds): Promise<Buffer> {
    const key = `${size}/${seconds}`;
    let clip = this.clips.get(key);
    if (!clip) {
      clip = this.render(size, seconds);
      clip.catch(() => this.clips.delete(key));
      this.clips.set(key, clip);
    }
    return clip;
  }

  private render(size: VideoSize, seconds: VideoSeconds): Promise<Buffer> {
    return inScratchDir(async (dir) => {
      const out = join(dir, 'clip.mp4');
      await run(ffmpeg.path, [
        ...['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi'],
        ...['-i', `testsrc=size=${size}:rate=8:duration=${seconds}`],
        ...['-c:v', 'libx264', '-preset', 'ultrafast', '-crf', '35', '-pix_fmt', 'yuv420p', '-movflags', '+faststart', out],
      ]);
      return readFile(out);
    });
  }

  thumbnail(mp4: Buffer): Promise<Buffer> {
    return inScratchDir(async (dir) => {
      const input = join(dir, 'in.mp4');
      const out = join(dir, 'thumbnail.webp');
      await writeFile(input, mp4);
      await run(ffmpeg.path, ['-hide_banner', '-loglevel', 'error', '-y', '-i', input, '-frames:v', '1', '-c:v', 'libwebp', out]);
      return readFile(out);
    });
  }
}
