import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager, type StreamConfig } from '@nats-io/jetstream';
import { TimeoutError } from '@nats-io/transport-node';

/**
 * A clustered server answers none of the requests that race a stream's creation (nats-server 2.9: every process of
 * a deployment starting at once against a cluster met a timeout and exited); by the next attempt the stream is there.
 */
const ATTEMPTS = 5;

/** Creates the stream `name`, or brings an existing one to `config`. */
export async function ensureStream(jsm: JetStreamManager, name: string, config: Partial<StreamConfig>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      try {
        await jsm.streams.update(name, config);
      } catch (error) {
        if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)) throw error;
        await jsm.streams.add({ ...config, name });
      }
      return;
    } catch (error) {
      if (!(error instanceof TimeoutError) || attempt === ATTEMPTS) throw error;
    }
  }
}
