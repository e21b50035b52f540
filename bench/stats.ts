/** Nearest-rank percentile of unsorted samples; NaN when there are none. */
export function percentile(samples: ArrayLike<number>, p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = Float64Array.from(samples).sort();
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const median = (samples: ArrayLike<number>) => percentile(samples, 50);

/** Growable float samples: a load run records one per response, hundreds of thousands at most. */
export class Samples {
  private values = new Float64Array(1024);
  length = 0;

  push(value: number): void {
    if (this.length === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.length++] = value;
  }

  percentile(p: number): number {
    return percentile(this.values.subarray(0, this.length), p);
  }
}
