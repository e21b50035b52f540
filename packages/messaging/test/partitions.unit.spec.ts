import { describe, expect, it } from 'vitest';
import { ORGANIZATION_PARTITIONS, organizationPartition, ownedPartitions, partitionOwner } from '../src';

const partitions = Array.from({ length: ORGANIZATION_PARTITIONS }, (_, p) => p);

describe('organization partitions', () => {
  it('gives every partition exactly one owner, the same whichever replica computes it', () => {
    const members = ['billing-1', 'billing-2', 'billing-3'];
    const shares = members.map((self) => ownedPartitions(self, members.filter((m) => m !== self)));
    for (const p of partitions) expect(shares.filter((owned) => owned.has(p))).toHaveLength(1);
  });

  it('spreads the partitions over the replicas', () => {
    for (const members of [['billing-1', 'billing-2'], ['billing-1', 'billing-2', 'billing-3', 'billing-4']]) {
      const fair = ORGANIZATION_PARTITIONS / members.length;
      for (const self of members) {
        const owned = ownedPartitions(self, members).size;
        expect(owned).toBeGreaterThan(fair * 0.5);
        expect(owned).toBeLessThan(fair * 1.5);
      }
    }
  });

  it('moves only the partitions a replica gains or had when it joins or leaves', () => {
    const two = ['billing-1', 'billing-2'];
    const three = [...two, 'billing-3'];
    for (const p of partitions) {
      const before = partitionOwner(p, two);
      const after = partitionOwner(p, three);
      if (after !== 'billing-3') expect(after).toBe(before);
    }
    for (const p of partitions) {
      if (partitionOwner(p, three) !== 'billing-3') expect(partitionOwner(p, two)).toBe(partitionOwner(p, three));
    }
  });

  it('puts an organization in one partition for good', () => {
    const ids = Array.from({ length: 2_000 }, (_, i) => `org_${i.toString(36).padStart(24, 'x')}`);
    const first = ids.map(organizationPartition);
    expect(ids.map(organizationPartition)).toEqual(first);
    expect(first.every((p) => Number.isInteger(p) && p >= 0 && p < ORGANIZATION_PARTITIONS)).toBe(true);
    // Every partition is used: ids that differ in a character or two do not pile up in a few.
    expect(new Set(first).size).toBe(ORGANIZATION_PARTITIONS);
  });
});
