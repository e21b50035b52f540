import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Where deliveries may go: public unicast addresses only, plus loopback (127.0.0.1, ::1) in development mode with
 * `WEBHOOK_ALLOW_PRIVATE=1` (local receivers), plus whatever the operator lists in `WEBHOOK_ALLOW_CIDRS`.
 * Link-local (the metadata address), CGNAT, RFC 1918 and ULA ranges stay refused in every mode otherwise.
 */
export interface DestinationRules {
  allowLoopback: boolean;
  allowCidrs: readonly string[];
}

/**
 * Single addresses, not CIDRs: the agent matches a CIDR against addresses of either family and warns on
 * every mismatch, where a single address is compared as it is.
 */
const LOOPBACK = ['127.0.0.1', '::1'];

const allowList = (rules: DestinationRules) => [...(rules.allowLoopback ? LOOPBACK : []), ...rules.allowCidrs];

/** The same rules for `request-filtering-agent`, which applies them to the address each socket connects to. */
export function agentFilter(rules: DestinationRules) {
  return { allowPrivateIPAddress: false, allowMetaIPAddress: false, allowIPAddressList: allowList(rules) };
}

/** A CIDR (`10.1.2.0/24`, `fd00::/8`) or a single address, as `WEBHOOK_ALLOW_CIDRS` takes them. */
export function isCidr(entry: string): boolean {
  try {
    if (isIP(entry) !== 0) return true;
    ipaddr.parseCIDR(entry);
    return true;
  } catch {
    return false;
  }
}

/** Judged exactly as the agent judges it: listed, or else public unicast. */
export function isAllowedAddress(address: string, rules: DestinationRules): boolean {
  const parsed = ipaddr.parse(address);
  for (const entry of allowList(rules)) {
    if (isIP(entry) !== 0) {
      if (entry === address) return true;
      continue;
    }
    const [range, bits] = ipaddr.parseCIDR(entry);
    if (parsed.kind() === range.kind() && parsed.match(range, bits)) return true;
  }
  return parsed.range() === 'unicast';
}

/** A host's addresses; none when it does not resolve. */
export type ResolveHost = (host: string) => Promise<string[]>;

export const resolveWithDns: ResolveHost = (host) =>
  lookup(host, { all: true, verbatim: true }).then(
    (found) => found.map((a) => a.address),
    () => [],
  );

/**
 * Whether a URL would be refused at delivery, judged at registration: an address literal in any notation
 * (`new URL` has already turned `2130706433` or `0x7f.1` into `127.0.0.1`, and `user@host` into its host), or
 * a name any of whose addresses is refused. A name that does not resolve yet is let through: the check when a
 * delivery connects stays the authority, and also covers a name that later resolves elsewhere (rebinding).
 */
export async function isRefusedDestination(url: URL, rules: DestinationRules, resolve: ResolveHost): Promise<boolean> {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const addresses = isIP(host) !== 0 ? [host] : await resolve(host);
  return addresses.some((address) => !isAllowedAddress(address, rules));
}
