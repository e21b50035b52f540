import type { ConsoleSession } from '@oc/contracts';
import { createContext, type ReactNode, useCallback, useContext, useEffect, useState } from 'react';
import { api, setCsrfToken, whenSignedOut } from './api';

interface SessionState {
  /** undefined while the first look is under way; null when nobody is signed in. */
  session: ConsoleSession | null | undefined;
  signIn(body: { email: string; password: string } | { admin_token: string }): Promise<void>;
  signOut(): Promise<void>;
}

const SessionContext = createContext<SessionState | undefined>(undefined);

/**
 * Whether this browser signed in before (not a secret: the session itself is in an HttpOnly cookie). A first
 * visit then shows the sign-in form without asking the API, which would answer 401.
 */
const SIGNED_IN = 'oc-console-signed-in';
const remembered = () => {
  try {
    return localStorage.getItem(SIGNED_IN) === '1';
  } catch {
    return true;
  }
};
const markSignedIn = (yes: boolean) => {
  try {
    if (yes) localStorage.setItem(SIGNED_IN, '1');
    else localStorage.removeItem(SIGNED_IN);
  } catch {
    // Storage refused (private mode): the console asks the API each time instead.
  }
};

export function SessionProvider({ children }: { children: ReactNode }) {
  const [session, setSession] = useState<ConsoleSession | null | undefined>(undefined);
  const remember = useCallback((s: ConsoleSession | null) => {
    setCsrfToken(s?.csrf_token ?? '');
    markSignedIn(s !== null);
    setSession(s);
  }, []);
  useEffect(() => {
    whenSignedOut(() => remember(null));
    if (!remembered()) return remember(null);
    // No session (401), or none that can be read: either way, the sign-in form.
    api<ConsoleSession>('GET', '/session').then(remember, () => remember(null));
  }, [remember]);
  const signIn = useCallback(async (body: { email: string; password: string } | { admin_token: string }) => {
    remember(await api<ConsoleSession>('POST', '/sessions', body));
  }, [remember]);
  const signOut = useCallback(async () => {
    try {
      await api('DELETE', '/session');
    } finally {
      remember(null);
    }
  }, [remember]);
  return <SessionContext.Provider value={{ session, signIn, signOut }}>{children}</SessionContext.Provider>;
}

export function useSession(): SessionState {
  const state = useContext(SessionContext);
  if (!state) throw new Error('useSession outside SessionProvider');
  return state;
}

/** The signed-in member's session (pages under the organization's navigation only). */
export function useMember() {
  const { session } = useSession();
  if (!session || session.kind !== 'member' || !session.organization || !session.member) throw new Error('not a member session');
  return { organization: session.organization, member: session.member };
}
