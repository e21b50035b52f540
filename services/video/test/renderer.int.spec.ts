import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ffmpeg from '@ffmpeg-installer/ffmpeg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ALL_CLIPS, FfmpegRenderer } from '../src/adapters/ffmpeg-renderer';

/** Decodes the whole file (so it must play) and reads its size and length from ffmpeg's report. */
async function probe(path: string) {
  const { stderr } = await promisify(execFile)(ffmpeg.path, ['-hide_banner', '-i', path, '-f', 'null', '-']);
  return {
    size: /Video: h264.*?, (\d+x\d+)/.exec(stderr)?.[1],
    duration: /Duration: (\d\d:\d\d:\d\d\.\d\d)/.exec(stderr)?.[1],
  };
}

describe('FfmpegRenderer', () => {
  let cacheDir: string;
  const renderers: FfmpegRenderer[] = [];
  const renderer = () => {
    const r = new FfmpegRenderer({ cacheDir });
    renderers.push(r);
    return r;
  };
  beforeEach(async () => {
    cacheDir = await mkdtemp(join(tmpdir(), 'oc-renders-'));
  });
  afterEach(async () => {
    await Promise.all(renderers.splice(0).map((r) => r.close()));
    await rm(cacheDir, { recursive: true, force: true });
  });

  it('renders a playable clip of the size and length asked for, with its WebP still, in one run however many ask', async () => {
    const r = renderer();
    const [a, b] = await Promise.all([r.clip('720x1280', '4'), r.clip('720x1280', '4')]);
    expect(r.renders).toBe(1);
    expect(b).toEqual(a);
    expect(await probe(a.video)).toEqual({ size: '720x1280', duration: '00:00:04.00' });
    expect(a.bytes).toBe((await stat(a.video)).size);
    const still = await readFile(a.thumbnail);
    expect([still.subarray(0, 4).toString('latin1'), still.subarray(8, 12).toString('latin1')]).toEqual(['RIFF', 'WEBP']);
    expect(await r.clip('720x1280', '4')).toEqual(a);
    expect(r.renders).toBe(1);
  });

  it('keeps clips on disk: a renderer started again on the same directory serves them without rendering', async () => {
    const first = await renderer().clip('1280x720', '4');
    const { ino, mtimeMs } = await stat(first.video);
    const again = renderer();
    expect(await again.clip('1280x720', '4')).toEqual(first);
    expect(again.renders).toBe(0);
    expect(await stat(first.video)).toMatchObject({ ino, mtimeMs });
    expect((await readdir(cacheDir)).sort()).toEqual([expect.stringMatching(/^1280x720-4s-\w+\.mp4$/), expect.stringMatching(/^1280x720-4s-\w+\.webp$/)]);
  });

  it('renders ahead what is not on disk yet, in the background, and a clip asked for meanwhile is rendered once', async () => {
    await renderer().clip('1280x720', '4');
    const r = renderer();
    const ahead = r.prerender([
      ['1280x720', '4'],
      ['720x1280', '4'],
    ]);
    const asked = await r.clip('720x1280', '4');
    await ahead;
    expect(r.renders).toBe(1);
    expect(await probe(asked.video)).toEqual({ size: '720x1280', duration: '00:00:04.00' });
  });

  it('stops rendering ahead when closed, leaving nothing half-written', async () => {
    const r = renderer();
    const ahead = r.prerender(ALL_CLIPS);
    await r.close();
    await ahead;
    expect(r.renders).toBeLessThanOrEqual(1);
    expect((await readdir(cacheDir)).filter((name) => name.startsWith('.render-'))).toEqual([]);
    await expect(r.clip('1280x720', '8')).rejects.toThrow();
  });

  it('makes a still of any MP4 (an upstream video)', async () => {
    const clip = await renderer().clip('1280x720', '4');
    const still = await renderer().thumbnail(await readFile(clip.video));
    expect(still.subarray(8, 12).toString('latin1')).toBe('WEBP');
  });
});
