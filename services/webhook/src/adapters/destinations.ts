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

/**
 * IPv6 forms that carry an IPv4 address, and the byte where it starts. A packet to one is meant for that IPv4
 * host (the socket layer, a translator or a relay takes it there), so it is judged as that address: `::7f00:1`
 * (IPv4-compatible, deprecated but still routed by some stacks) as 127.0.0.1, `64:ff9b::a9fe:a9fe` as the
 * metadata address. Forms whose IPv4 address cannot be told from the address alone (Teredo, which holds two;
 * NAT64's local-use 64:ff9b:1::/48, laid out by the operator's prefix length) are not public unicast to
 * ipaddr.js, so they stay refused.
 */
const EMBEDDING_IPV4: readonly (readonly [ipaddr.IPv6, number, number])[] = (
  [
    ['::ffff:0:0/96', 12], // IPv4-mapped (RFC 4291)
    ['::/96', 12], // IPv4-compatible (RFC 4291)
    ['::ffff:0:0:0/96', 12], // IPv4-translated (RFC 6145)
    ['64:ff9b::/96', 12], // NAT64, well-known prefix (RFC 6052)
    ['2002::/16', 2], // 6to4 (RFC 3056)
  ] as const
).map(([cidr, at]) => {
  const [range, bits] = ipaddr.IPv6.parseCIDR(cidr);
  return [range, bits, at] as const;
});

function embeddedIPv4(address: ipaddr.IPv4 | ipaddr.IPv6): string | undefined {
  if (address.kind() !== 'ipv6') return undefined;
  const v6 = address as ipaddr.IPv6;
  const form = EMBEDDING_IPV4.find(([range, bits]) => v6.match(range, bits));
  if (!form) return undefined;
  const at = form[2];
  return ipaddr.fromByteArray(v6.toByteArray().slice(at, at + 4)).toString();
}

const isListed = (address: string, parsed: ipaddr.IPv4 | ipaddr.IPv6, rules: DestinationRules) =>
  allowList(rules).some((entry) => {
    if (isIP(entry) !== 0) return entry === address;
    const [range, bits] = ipaddr.parseCIDR(entry);
    return parsed.kind() === range.kind() && parsed.match(range, bits);
  });

/**
 * The address a delivery connects to for `address`, or undefined when it is refused: the address itself when
 * listed or public unicast; for an IPv6 form carrying an IPv4 address, that IPv4 address when it is allowed, so
 * that the socket goes where the judgement was made and the agent judges the same address again.
 */
export function connectAddress(address: string, rules: DestinationRules): string | undefined {
  const parsed = ipaddr.parse(address);
  if (isListed(address, parsed, rules)) return address;
  const embedded = embeddedIPv4(parsed);
  if (embedded !== undefined) return connectAddress(embedded, rules);
  return parsed.range() === 'unicast' ? address : undefined;
}

/** Listed, or else public unicast; an IPv6 form carrying an IPv4 address is judged as that address. */
export const isAllowedAddress = (address: string, rules: DestinationRules): boolean => connectAddress(address, rules) !== undefined;

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
