import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import {
  ApiError,
  type Clock,
  type ConsolePrincipal,
  ConsolePrincipalSchema,
  type ConsoleSession,
  Subjects,
  unixSeconds,
  type SignInBody,
  unwrap,
} from '@oc/contracts';
import type { ServiceClient } from '@oc/messaging';
import { parse as parseCookies, serialize as serializeCookie } from 'cookie';
import type { Request, Response } from 'express';
import type { z } from 'zod';
import { consoleSignInWindows } from '../domain/limits';
import { FailedAttempts } from './failed-attempts';
import type { PasswordHasher } from './passwords';
import type { RateLimits } from './rate-limits';

export const SESSION_COOKIE = 'oc_console';
/** The cookie is sent only to the console's API (the video player's requests included), not to `/v1`. */
export const SESSION_COOKIE_PATH = '/console/v1';
/** How long a sign-in lasts; then the console asks for the password again. */
export const DEFAULT_SESSION_TTL_SECONDS = 12 * 3600;

export interface ConsoleSessionOptions {
  services: ServiceClient;
  clock: Clock;
  limits: RateLimits;
  hasher: PasswordHasher;
  adminToken: string;
  /** `Secure` on the cookie always or never (`CONSOLE_COOKIE_SECURE`); unset, as `secureCookieFor` decides. */
  secureCookie?: boolean;
  ttlSeconds?: number;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

const invalidSession = (message = 'Sign in to the console first (POST /console/v1/sessions).') =>
  new ApiError({ status: 401, type: 'authentication_error', code: 'invalid_session', message });

const invalidCredentials = () =>
  new ApiError({ status: 401, type: 'authentication_error', code: 'invalid_credentials', message: 'Incorrect email or password.' });

/**
 * Console sessions: a random token in an HttpOnly, SameSite=Strict cookie, its SHA-256 recorded by billing
 * (so a sign-out or a removed member ends it on every gateway at once: sessions are looked up on each
 * request, never cached), and a CSRF token derived from the session token that only a page that can read
 * the session's own answers learns.
 */
export class ConsoleSessions {
  readonly #adminCredential: string;
  readonly #failures: FailedAttempts;
  constructor(private readonly o: ConsoleSessionOptions) {
    this.#adminCredential = sha256(o.adminToken);
    this.#failures = new FailedAttempts(o.limits);
  }

  private token(req: Request): string | undefined {
    const header = req.headers.cookie;
    if (!header) return undefined;
    const token = parseCookies(header)[SESSION_COOKIE];
    return token && /^[A-Za-z0-9_-]{43}$/.test(token) ? token : undefined;
  }

  async authenticate(req: Request): Promise<ConsolePrincipal> {
    const token = this.token(req);
    if (!token) throw invalidSession();
    const found = unwrap(await this.o.services.request(Subjects.billing.authenticateConsoleSession, { token_hash: sha256(token) }));
    if (found === null) throw invalidSession('Your console session has ended; sign in again.');
    const principal = ConsolePrincipalSchema.parse(found);
    if (principal.expires_at <= unixSeconds(this.o.clock.now())) throw invalidSession('Your console session has expired; sign in again.');
    // A session signed in with an admin token that is no longer the gateway's has lost its rights.
    if (principal.kind === 'operator' && principal.credential !== this.#adminCredential) {
      throw invalidSession('The admin token this session signed in with has changed; sign in again.');
    }
    return principal;
  }

  /** Every request that changes something carries the session's CSRF token in `X-CSRF-Token`. */
  checkCsrf(req: Request): void {
    const token = this.token(req);
    const presented = req.headers['x-csrf-token'];
    const expected = token ? csrfToken(token) : '';
    if (typeof presented !== 'string' || presented.length !== expected.length || !timingSafeEqual(Buffer.from(presented), Buffer.from(expected))) {
      throw new ApiError({
        status: 403,
        type: 'permission_error',
        code: 'invalid_csrf_token',
        message: 'Missing or wrong X-CSRF-Token header: send the csrf_token of GET /console/v1/session.',
        param: 'X-CSRF-Token',
      });
    }
  }

  view(req: Request, principal: ConsolePrincipal): ConsoleSession {
    const token = this.token(req)!;
    return {
      object: 'console_session',
      kind: principal.kind,
      expires_at: principal.expires_at,
      csrf_token: csrfToken(token),
      member: principal.kind === 'member' ? principal.member : null,
      organization: principal.kind === 'member' ? principal.organization : null,
    };
  }

  /**
   * Failed sign-ins are counted per client address and per email at that address; while either window is spent,
   * sign-in is answered 429 before any password is checked, so guessing costs the guesser time, not us hashing,
   * and a member signing in from anywhere else is not held up by a guesser.
   */
  async signIn(req: Request, res: Response, body: z.infer<typeof SignInBody>): Promise<ConsoleSession> {
    const address = req.ip ?? req.socket.remoteAddress ?? 'unknown';
    const windows = consoleSignInWindows(address, 'email' in body ? body.email : undefined);
    const refusal = 'failed console sign-ins from this address; try again later';
    await this.#failures.check(windows, refusal);
    let subject: { kind: 'member'; member_id: string } | { kind: 'operator'; credential: string } | undefined;
    if ('email' in body) {
      const found = unwrap(
        await this.o.services.request<{ member_id: string; password_hash: string } | null>(Subjects.billing.memberCredentials, {
          email: body.email,
        }),
      );
      if (await this.o.hasher.verify(body.password, found?.password_hash)) subject = { kind: 'member', member_id: found!.member_id };
    } else {
      const presented = createHash('sha256').update(body.admin_token).digest();
      if (timingSafeEqual(presented, Buffer.from(this.#adminCredential, 'hex'))) subject = { kind: 'operator', credential: this.#adminCredential };
    }
    if (!subject) {
      await this.#failures.failed(windows, refusal);
      if ('email' in body) throw invalidCredentials();
      throw new ApiError({ status: 401, type: 'authentication_error', code: 'invalid_admin_token', message: 'Invalid admin token.' });
    }
    const token = randomBytes(32).toString('base64url');
    const ttl = this.o.ttlSeconds ?? DEFAULT_SESSION_TTL_SECONDS;
    const principal = ConsolePrincipalSchema.parse(
      unwrap(
        await this.o.services.request(Subjects.billing.startConsoleSession, {
          token_hash: sha256(token),
          subject,
          expires_at: unixSeconds(this.o.clock.now()) + ttl,
        }),
      ),
    );
    res.append(
      'Set-Cookie',
      serializeCookie(SESSION_COOKIE, token, {
        httpOnly: true,
        secure: this.o.secureCookie ?? secureCookieFor(req),
        sameSite: 'strict',
        path: SESSION_COOKIE_PATH,
        maxAge: ttl,
      }),
    );
    return {
      object: 'console_session',
      kind: principal.kind,
      expires_at: principal.expires_at,
      csrf_token: csrfToken(token),
      member: principal.kind === 'member' ? principal.member : null,
      organization: principal.kind === 'member' ? principal.organization : null,
    };
  }

  async signOut(req: Request, res: Response): Promise<void> {
    const token = this.token(req);
    if (token) unwrap(await this.o.services.request(Subjects.billing.endConsoleSession, { token_hash: sha256(token) }));
    res.append(
      'Set-Cookie',
      serializeCookie(SESSION_COOKIE, '', { httpOnly: true, secure: this.o.secureCookie ?? secureCookieFor(req), sameSite: 'strict', path: SESSION_COOKIE_PATH, maxAge: 0 }),
    );
  }
}

/**
 * `Secure` unless the browser reached the console over plain http at a loopback name (127.0.0.0/8, [::1],
 * localhost): that is a developer's own machine, where a browser may drop a Secure cookie and the session with
 * it. Over https (per `X-Forwarded-Proto` only from a trusted proxy) or at any other name, the cookie is Secure,
 * whatever the process: a standalone served over TLS gets it too.
 */
export function secureCookieFor(req: Request): boolean {
  if (req.protocol === 'https') return true;
  const host = req.hostname;
  return !(host === 'localhost' || host.endsWith('.localhost') || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host));
}

/** Derived from the session token, which the page cannot read (HttpOnly); a cross-site page cannot learn either. */
export const csrfToken = (sessionToken: string) => createHmac('sha256', sessionToken).update('oc-console-csrf').digest('base64url');
