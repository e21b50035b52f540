/**
 * An allowance of `capacity` units per key, first come first served: `take(key, amount)` resolves once the key's
 * earlier takers have left room for `amount` (or the whole capacity, if it asks more), with the function that
 * gives it back. A taker never overtakes an earlier one of its key that is still waiting, so a large amount is
 * not starved by small ones. Keys with nothing taken or asked for hold no memory.
 */
export class Allowances {
  private readonly keys = new Map<string, { taken: number; waiting: Array<{ amount: number; grant: () => void }> }>();

  constructor(private readonly capacity: number) {}

  /** Keys with an amount taken or asked for. */
  get size(): number {
    return this.keys.size;
  }

  take(key: string, amount: number): Promise<() => void> {
    const wanted = Math.min(amount, this.capacity);
    let entry = this.keys.get(key);
    if (!entry) {
      entry = { taken: 0, waiting: [] };
      this.keys.set(key, entry);
    }
    const held = entry;
    return new Promise((resolve) => {
      held.waiting.push({ amount: wanted, grant: () => resolve(this.giveBack(key, wanted)) });
      this.grant(key);
    });
  }

  private grant(key: string) {
    const entry = this.keys.get(key)!;
    while (entry.waiting.length > 0 && entry.taken + entry.waiting[0]!.amount <= this.capacity) {
      const next = entry.waiting.shift()!;
      entry.taken += next.amount;
      next.grant();
    }
    if (entry.taken === 0 && entry.waiting.length === 0) this.keys.delete(key);
  }

  private giveBack(key: string, amount: number): () => void {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.keys.get(key)!.taken -= amount;
      this.grant(key);
    };
  }
}
