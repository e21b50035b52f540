import { createHash } from 'node:crypto';
import {
  type Clock,
  invalidApiKey,
  type KeyPrincipal,
  KeyPrincipalSchema,
  Subjects,
  unixSeconds,
  unwrap,
} from '@oc/contracts';
import type { ServiceClient } from '@oc/messaging';
import { setActiveSpanAttributes } from '@oc/telemetry';

const KEY_FORMAT = /^oc_(live|test)_[A-Za-z0-9_-]{32,128}$/;

interface CacheEntry {
  principal: KeyPrincipal;
  fetchedAt: number;
}

/**
 * Turns a bearer token into the key's principal with one SHA-256 and, on a warm cache, no network
 * hop. Billing broadcasts revocations and organization changes before it answers them, and every
 * gateway drops the affected entries at once; a TTL bounds staleness if a broadcast is ever missed.
 */
export class KeyAuthenticator {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly inFlight = new Map<string, Promise<KeyPrincipal | null>>();

  constructor(
    private readonly billing: ServiceClient,
    private readonly clock: Clock,
    private readonly options: { ttlMs: number; maxEntries: number } = { ttlMs: 60_000, maxEntries: 50_000 },
  ) {}

  /**
   * `beforeLookup` runs only when the key must be asked of billing (not cached): the caller refuses there a
   * client that has already spent its failed-authentication window, so made-up keys cost no round trip.
   */
  async authenticate(authorization: string | undefined, beforeLookup?: () => Promise<void>): Promise<KeyPrincipal> {
    const match = /^Bearer +(\S+)$/i.exec(authorization ?? '');
    if (!match) {
      throw invalidApiKey(
        authorization
          ? 'Malformed Authorization header: use "Authorization: Bearer <API_KEY>".'
          : 'You did not provide an API key: use "Authorization: Bearer <API_KEY>".',
      );
    }
    const key = match[1]!;
    if (!KEY_FORMAT.test(key)) throw invalidApiKey();
    const principal = await this.lookup(createHash('sha256').update(key).digest('hex'), beforeLookup);
    if (!principal) throw invalidApiKey();
    if (principal.expires_at !== null && principal.expires_at <= unixSeconds(this.clock.now())) {
      throw invalidApiKey('This API key has expired.');
    }
    // Whose request it is, on the request's span, so that a trace is found by organization or key (never the secret).
    setActiveSpanAttributes({ 'oc.organization.id': principal.org_id, 'oc.api_key.id': principal.key_id });
    return principal;
  }

  forgetKey(keyHash: string) {
    this.cache.delete(keyHash);
    this.inFlight.delete(keyHash);
  }

  forgetOrganization(orgId: string) {
    for (const [hash, entry] of this.cache) if (entry.principal.org_id === orgId) this.cache.delete(hash);
    this.inFlight.clear();
  }

  private async lookup(keyHash: string, beforeLookup?: () => Promise<void>): Promise<KeyPrincipal | null> {
    const cached = this.cache.get(keyHash);
    if (cached && this.clock.now() - cached.fetchedAt < this.options.ttlMs) return cached.principal;
    let pending = this.inFlight.get(keyHash);
    if (!pending) {
      await beforeLookup?.();
      pending = this.inFlight.get(keyHash);
    }
    if (!pending) {
      pending = this.fetch(keyHash);
      this.inFlight.set(keyHash, pending);
    }
    const principal = await pending;
    // A revocation that arrived while we were asking removed the in-flight entry: do not cache then.
    if (this.inFlight.get(keyHash) === pending) {
      this.inFlight.delete(keyHash);
      if (principal) this.remember(keyHash, principal);
    }
    return principal;
  }

  private async fetch(keyHash: string): Promise<KeyPrincipal | null> {
    const reply = await this.billing.request(Subjects.billing.authenticate, { key_hash: keyHash });
    const principal = unwrap(reply);
    return principal === null ? null : KeyPrincipalSchema.parse(principal);
  }

  private remember(keyHash: string, principal: KeyPrincipal) {
    if (this.cache.size >= this.options.maxEntries) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    this.cache.set(keyHash, { principal, fetchedAt: this.clock.now() });
  }
}
