import { type FormEvent, useState } from 'react';
import { Link, Redirect, Route, Router, Switch, useRoute } from 'wouter';
import { SessionProvider, useSession } from './session';
import { ErrorNote } from './ui';
import { Overview } from './pages/Overview';
import { Keys } from './pages/Keys';
import { Videos } from './pages/Videos';
import { ChatSessions } from './pages/ChatSessions';
import { Webhooks } from './pages/Webhooks';
import { Ledger } from './pages/Ledger';
import { Activity } from './pages/Activity';
import { Usage } from './pages/Usage';
import { Playground } from './pages/Playground';
import { Billing } from './pages/Billing';
import { Organizations } from './pages/Organizations';
import { OrganizationDetail } from './pages/OrganizationDetail';
import { Providers } from './pages/Providers';

export function App() {
  return (
    <Router base="/dashboard">
      <SessionProvider>
        <Shell />
      </SessionProvider>
    </Router>
  );
}

const MEMBER_PAGES = [
  { path: '/', label: 'Overview' },
  { path: '/keys', label: 'API keys' },
  { path: '/usage', label: 'Usage' },
  { path: '/activity', label: 'Activity' },
  { path: '/playground', label: 'Playground' },
  { path: '/videos', label: 'Videos' },
  { path: '/chat', label: 'Chat sessions' },
  { path: '/webhooks', label: 'Webhooks' },
  { path: '/ledger', label: 'Ledger' },
  { path: '/billing', label: 'Billing' },
];
const OPERATOR_PAGES = [
  { path: '/', label: 'Organizations' },
  { path: '/providers', label: 'Providers' },
];

function NavLink({ path, label }: { path: string; label: string }) {
  const [active] = useRoute(path === '/' ? '/' : `${path}/*?`);
  return (
    <Link href={path} aria-current={active ? 'page' : undefined}>
      {label}
    </Link>
  );
}

function Shell() {
  const { session, signOut } = useSession();
  if (session === undefined) {
    return (
      <p className="muted center" role="status">
        Loading…
      </p>
    );
  }
  if (session === null) return <SignIn />;
  const operator = session.kind === 'operator';
  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <div className="brand">
          <strong>OC console</strong>
          <span className="who">{operator ? 'Operator' : `${session.organization!.name} · ${session.member!.email}`}</span>
        </div>
        <nav aria-label="Console">
          {(operator ? OPERATOR_PAGES : MEMBER_PAGES).map((p) => (
            <NavLink key={p.path} {...p} />
          ))}
        </nav>
        <button type="button" className="link" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {operator ? (
          <Switch>
            <Route path="/" component={Organizations} />
            <Route path="/organizations/:id">{(p) => <OrganizationDetail id={p.id} />}</Route>
            <Route path="/providers" component={Providers} />
            <Route>
              <Redirect to="/" />
            </Route>
          </Switch>
        ) : (
          <Switch>
            <Route path="/" component={Overview} />
            <Route path="/keys" component={Keys} />
            <Route path="/usage" component={Usage} />
            <Route path="/activity" component={Activity} />
            <Route path="/playground" component={Playground} />
            <Route path="/videos" component={Videos} />
            <Route path="/chat">{() => <ChatSessions />}</Route>
            <Route path="/chat/:id">{(p) => <ChatSessions open={p.id} />}</Route>
            <Route path="/webhooks" component={Webhooks} />
            <Route path="/ledger" component={Ledger} />
            <Route path="/billing" component={Billing} />
            <Route>
              <Redirect to="/" />
            </Route>
          </Switch>
        )}
      </main>
    </>
  );
}

function SignIn() {
  const { signIn } = useSession();
  const [operator, setOperator] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setBusy(true);
    setError(undefined);
    try {
      await signIn(
        operator
          ? { admin_token: String(form.get('admin_token')) }
          : { email: String(form.get('email')), password: String(form.get('password')) },
      );
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main className="sign-in" id="main">
      <h1>Sign in to the OC console</h1>
      <form onSubmit={submit} aria-describedby="sign-in-help">
        {operator ? (
          <>
            <label htmlFor="admin_token">Admin token</label>
            <input id="admin_token" name="admin_token" type="password" autoComplete="off" required />
          </>
        ) : (
          <>
            <label htmlFor="email">Email</label>
            <input id="email" name="email" type="email" autoComplete="username" required />
            <label htmlFor="password">Password</label>
            <input id="password" name="password" type="password" autoComplete="current-password" required />
          </>
        )}
        <ErrorNote error={error} />
        <button type="submit" className="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <p id="sign-in-help" className="muted">
        {operator
          ? 'Operators sign in with the service’s ADMIN_TOKEN.'
          : 'Members are added by an operator (oc members create). Ask yours for an account.'}
      </p>
      <button type="button" className="link" onClick={() => (setOperator(!operator), setError(undefined))}>
        {operator ? 'Sign in as an organization member' : 'Sign in as an operator'}
      </button>
    </main>
  );
}
