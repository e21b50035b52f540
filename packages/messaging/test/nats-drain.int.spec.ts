import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MessagePattern } from '@nestjs/microservices';
import { ok } from '@oc/contracts';
import { describe, expect, it } from 'vitest';
import { NatsServiceClient, natsServerStrategy } from '../src';
import { NATS_URL, natsAvailable, uniqueSuffix } from './nats';

describe.skipIf(!(await natsAvailable()))('a NATS server strategy that drains', () => {
  it('takes no new requests once draining, answers those it took, and resolves once they are answered', async () => {
    const prefix = `drain-${uniqueSuffix()}`;
    let letGo!: () => void;
    const held = new Promise<void>((resolve) => (letGo = resolve));
    let taken!: () => void;
    const takenOne = new Promise<void>((resolve) => (taken = resolve));

    @Controller()
    class SlowController {
      @MessagePattern(`${prefix}.slow`)
      async slow() {
        taken();
        await held;
        return ok('answered');
      }
    }
    @Module({ controllers: [SlowController] })
    class SlowModule {}

    const strategy = natsServerStrategy({ servers: NATS_URL, queue: prefix });
    const app = await NestFactory.createMicroservice(SlowModule, { strategy, logger: false });
    await app.listen();
    const client = new NatsServiceClient({ servers: NATS_URL });
    try {
      const inFlight = client.request(`${prefix}.slow`, {});
      await takenOne;
      const draining = strategy.drain(60_000);
      letGo();
      // Answered on the connection the drain keeps open (closing it at once lost the answer).
      expect(await inFlight).toEqual({ ok: true, data: 'answered' });
      await draining;
      // Nobody takes another: its caller hears so at once (no responders), instead of waiting out its timeout.
      expect(await client.request(`${prefix}.slow`, {}, { timeoutMs: 5_000 })).toMatchObject({ ok: false, error: { status: 503 } });
    } finally {
      await app.close();
      await client.close();
    }
  });
});
