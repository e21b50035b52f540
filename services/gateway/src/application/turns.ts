/**
 * Turns per key, first come first served: `turn(key)` resolves when every earlier turn of the same key has
 * ended, with the function that ends this one. Keys with no turn waiting hold no memory.
 */
export class Turns {
  private readonly last = new Map<string, Promise<void>>();

  /** Keys with a turn taken or asked for. */
  get size(): number {
    return this.last.size;
  }

  async turn(key: string): Promise<() => void> {
    const before = this.last.get(key);
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    const mine = before ? before.then(() => ended) : ended;
    this.last.set(key, mine);
    void mine.then(() => {
      if (this.last.get(key) === mine) this.last.delete(key);
    });
    if (before) await before;
    // Resolving a promise twice is harmless: ending a turn again does nothing.
    return end;
  }
}
