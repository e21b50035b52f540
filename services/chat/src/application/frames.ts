import type { ApiErrorData, StreamFrame, Usage } from '@oc/contracts';
import type { FramePublisher } from './ports';

/** Numbers the frames of one stream, so the receiver can tell a lost or reordered frame. */
export class FrameSequence {
  private seq = 0;

  constructor(
    private readonly publisher: FramePublisher,
    private readonly subject: string,
  ) {}

  data(data: unknown) {
    return this.send({ kind: 'data', seq: this.seq++, data: data as Record<string, unknown> });
  }

  end(usage: Usage) {
    return this.send({ kind: 'end', seq: this.seq++, usage });
  }

  error(error: ApiErrorData) {
    return this.send({ kind: 'error', seq: this.seq++, error });
  }

  private send(frame: StreamFrame) {
    return this.publisher.publish(this.subject, frame);
  }
}
