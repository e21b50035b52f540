import type { Video } from '@oc/contracts';
import { useState } from 'react';
import { API, api } from '../api';
import { videoCost, when } from '../format';
import { ConfirmButton, Empty, ErrorNote, Loading, PageHeader, useLoad } from '../ui';

/**
 * The list is read again this often while the page is in view, so videos created since it loaded appear and
 * running ones progress: the spec asks clients to look at a video no more often than every 5 seconds.
 */
const POLL_MS = 5_000;

const running = (v: Video) => v.status === 'queued' || v.status === 'in_progress';

function storage(v: Video): string {
  if (v.status !== 'completed') return '—';
  if (v['x-persisted']) return 'Permanent';
  return v.expires_at ? `Temporary until ${when(v.expires_at)}` : 'Temporary';
}

export function Videos() {
  const videos = useLoad(() => api<{ data: Video[]; has_more: boolean }>('GET', '/videos?limit=50'), [], POLL_MS);
  const [playing, setPlaying] = useState<string | undefined>(undefined);
  return (
    <>
      <PageHeader title="Videos" />
      <p className="muted">
        Videos your organization created through the API, newest first. The list updates every 5 seconds while this page is open: new
        videos appear and progress moves on without a reload.
      </p>
      <ErrorNote error={videos.error} retry={videos.reload} />
      {videos.loading && <Loading what="videos" />}
      {videos.data?.data.length === 0 && <Empty>No videos yet. Create one with POST /v1/videos.</Empty>}
      {videos.data && videos.data.data.length > 0 && (
        <ul className="video-list">
          {videos.data.data.map((v) => (
            <li key={v.id} className="panel video" data-video-id={v.id}>
              <div className="video-head">
                <p className="prompt">{v.prompt}</p>
                <span className={`badge ${v.status}`}>{v.status.replace('_', ' ')}</span>
              </div>
              <div className="progress-row">
                <progress max={100} value={v.progress} aria-label={`Progress of ${v.id}`} />
                <span className="num" data-testid="progress">
                  {v.progress}%
                </span>
              </div>
              <dl className="facts">
                <div>
                  <dt>Id</dt>
                  <dd className="mono">{v.id}</dd>
                </div>
                <div>
                  <dt>Model</dt>
                  <dd>
                    {v.model}, {v.seconds} s, {v.size}
                  </dd>
                </div>
                <div>
                  <dt>Cost</dt>
                  <dd data-testid="cost">{videoCost(v)}</dd>
                </div>
                <div>
                  <dt>Storage</dt>
                  <dd>{storage(v)}</dd>
                </div>
                <div>
                  <dt>Created</dt>
                  <dd>{when(v.created)}</dd>
                </div>
              </dl>
              {v.error && (
                <p className="error">
                  {v.error.message} ({v.error.code})
                </p>
              )}
              <div className="actions">
                {v.status === 'completed' && (
                  <button type="button" onClick={() => setPlaying(playing === v.id ? undefined : v.id)} aria-expanded={playing === v.id}>
                    {playing === v.id ? 'Hide player' : 'Play'}
                  </button>
                )}
                {v.status === 'completed' && (
                  <a href={`${API}/videos/${encodeURIComponent(v.id)}/content`} download={`${v.id}.mp4`}>
                    Download
                  </a>
                )}
                <ConfirmButton
                  label="Delete"
                  title="Delete this video?"
                  confirmLabel="Delete video"
                  onConfirm={async () => {
                    await api('DELETE', `/videos/${encodeURIComponent(v.id)}`);
                    await videos.reload();
                  }}
                >
                  <p>Its files are deleted{running(v) ? '; the job is cancelled and what was reserved for it is released' : ''}.</p>
                </ConfirmButton>
              </div>
              {playing === v.id && (
                <video
                  controls
                  preload="metadata"
                  src={`${API}/videos/${encodeURIComponent(v.id)}/content`}
                  poster={`${API}/videos/${encodeURIComponent(v.id)}/content?variant=thumbnail`}
                  aria-label={`Video ${v.id}`}
                  className="player"
                />
              )}
            </li>
          ))}
        </ul>
      )}
    </>
  );
}
