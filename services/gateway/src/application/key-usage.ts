import { type Clock, Subjects, unixSeconds } from '@oc/contracts';
import type { ServiceClient } from '@oc/messaging';

/**
 * Counts requests per key and reports them to billing in batches, so "last used" and usage stay
 * current without a write on every request's path.
 */
export class KeyUsageRecorder {
  private pending = new Map<string, { requests: number; last_used_at: number }>();

  constructor(
    private readonly billing: ServiceClient,
    private readonly clock: Clock,
  ) {}

  record(keyId: string) {
    const now = unixSeconds(this.clock.now());
    const entry = this.pending.get(keyId);
    if (entry) {
      entry.requests += 1;
      entry.last_used_at = now;
    } else {
      this.pending.set(keyId, { requests: 1, last_used_at: now });
    }
  }

  /** Sends what was counted; on failure the counts are kept for the next flush. */
  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    const usage = [...batch].map(([key_id, u]) => ({ key_id, ...u }));
    const reply = await this.billing.request(Subjects.billing.recordKeyUsage, { usage });
    if (!reply.ok) {
      for (const [keyId, u] of batch) {
        const entry = this.pending.get(keyId);
        this.pending.set(keyId, entry ? { requests: entry.requests + u.requests, last_used_at: entry.last_used_at } : u);
      }
    }
  }
}
