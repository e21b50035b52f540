import { describe, expect, it } from 'vitest';
import { NatsStreamReplicasSchema, NatsUrlSchema } from '../src/subjects';

describe('NATS settings', () => {
  it('takes a cluster as NATS_URL, its servers separated by commas', () => {
    expect(NatsUrlSchema.parse(undefined)).toEqual(['nats://127.0.0.1:4222']);
    expect(NatsUrlSchema.parse('nats://n1:4222, nats://n2:4222,nats://n3:4222')).toEqual(['nats://n1:4222', 'nats://n2:4222', 'nats://n3:4222']);
    expect(NatsUrlSchema.safeParse(' , ').success).toBe(false);
  });

  it('keeps streams on one server unless NATS_STREAM_REPLICAS says how many, up to JetStream’s five', () => {
    expect(NatsStreamReplicasSchema.parse(undefined)).toBe(1);
    expect(NatsStreamReplicasSchema.parse('3')).toBe(3);
    for (const wrong of ['0', '6', '2.5', 'three']) expect(NatsStreamReplicasSchema.safeParse(wrong).success, wrong).toBe(false);
  });
});
