import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { wireCopy } from '../src/wire';

const roundTrip = (value: unknown) => JSON.parse(JSON.stringify(value)) as unknown;

describe('wireCopy', () => {
  it('gives what a JSON round trip gives, for any value', () => {
    fc.assert(
      fc.property(fc.anything({ withDate: true, withNullPrototype: true, withBoxedValues: true, withSparseArray: true }), (value) => {
        fc.pre(value !== undefined && typeof value !== 'function' && typeof value !== 'symbol');
        expect(wireCopy(value)).toStrictEqual(roundTrip(value));
      }),
      { numRuns: 2_000 },
    );
  });

  it('keeps an own __proto__ key a property, and shares no object with the original', () => {
    const original = JSON.parse('{"__proto__":{"admin":true},"nested":{"list":[1,{"a":-0}]}}') as Record<string, any>;
    const copy = wireCopy(original);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(['__proto__', 'nested']);
    expect((copy as any).admin).toBeUndefined();
    expect(copy.nested).not.toBe(original.nested);
    expect(copy.nested.list[1]).not.toBe(original.nested.list[1]);
    expect(Object.is(copy.nested.list[1].a, 0)).toBe(true);
    copy.nested.list.push(2);
    expect(original.nested.list).toHaveLength(2);
  });

  it('drops what JSON drops and turns what JSON nulls into null', () => {
    expect(wireCopy({ a: undefined, b: () => 1, c: [undefined, NaN, Infinity], d: new Date(0) })).toEqual({
      c: [null, null, null],
      d: '1970-01-01T00:00:00.000Z',
    });
  });
});
