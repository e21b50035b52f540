import { describe } from 'vitest';
import { NatsServiceClient, natsServerStrategy } from '../src';
import { NATS_URL, natsAvailable, uniqueSuffix } from './nats';
import { transportScenarios } from './transport-scenarios';

describe.skipIf(!(await natsAvailable()))('NATS transport', () => {
  transportScenarios(async () => {
    const queue = `test-service-${uniqueSuffix()}`;
    return {
      strategy: () => natsServerStrategy({ servers: NATS_URL, queue }),
      client: () => new NatsServiceClient({ servers: NATS_URL }),
      close: async () => {},
    };
  });
});
