import { MessageChannel } from 'node:worker_threads';
import { describe } from 'vitest';
import { InProcessBroker, InProcessServerStrategy, serveThreadClient, ThreadServiceClient } from '../src';
import { transportScenarios } from './transport-scenarios';

/** Each client on a port of its own, served from the broker on the other end (standalone: the gateway's thread). */
describe('thread transport', () => {
  transportScenarios(async () => {
    const broker = new InProcessBroker();
    const served: Array<{ close(): void }> = [];
    return {
      strategy: () => new InProcessServerStrategy(broker),
      client: () => {
        const { port1, port2 } = new MessageChannel();
        served.push(serveThreadClient(broker, port2));
        return new ThreadServiceClient(port1);
      },
      close: async () => {
        for (const s of served) s.close();
      },
    };
  });
});
