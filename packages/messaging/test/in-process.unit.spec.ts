import { describe } from 'vitest';
import { InProcessBroker, InProcessServerStrategy, InProcessServiceClient } from '../src';
import { transportScenarios } from './transport-scenarios';

describe('in-process transport', () => {
  transportScenarios(async () => {
    const broker = new InProcessBroker();
    return {
      strategy: () => new InProcessServerStrategy(broker),
      client: () => new InProcessServiceClient(broker),
      close: async () => {},
    };
  });
});
