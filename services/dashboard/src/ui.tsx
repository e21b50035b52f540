import { type FormEvent, type ReactNode, useCallback, useEffect, useId, useRef, useState } from 'react';
import { ApiFailure } from './api';

/**
 * Loads on mount and when `deps` change; `reload` fetches again (quietly, keeping what is shown). What is shown
 * is the answer to the latest request: an earlier one answering later (a slow poll overtaken by the reload after
 * a delete) is dropped, so it can neither bring back what was removed nor an error a newer answer cleared. A
 * success clears the error, and new `deps` clear what the old ones showed, error included. With `refreshMs`,
 * it loads again that often while the page is visible, and at once when the page is shown again.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = [], refreshMs?: number) {
  const [shown, setShown] = useState<{ data?: T; error?: unknown }>({});
  const current = useRef(load);
  current.current = load;
  const latest = useRef(0);
  const reload = useCallback(async () => {
    const request = ++latest.current;
    try {
      const data = await current.current();
      if (request === latest.current) setShown({ data });
    } catch (error) {
      if (request === latest.current) setShown((before) => ({ data: before.data, error }));
    }
  }, []);
  useEffect(() => {
    setShown({});
    void reload();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
  useEffect(() => {
    if (refreshMs === undefined) return;
    let timer: ReturnType<typeof setInterval> | undefined;
    // A hidden tab asks nothing; shown again, it catches up at once rather than at the next tick.
    const follow = (catchUp: boolean) => {
      clearInterval(timer);
      if (document.visibilityState !== 'visible') return;
      if (catchUp) void reload();
      timer = setInterval(() => void reload(), refreshMs);
    };
    const onVisibility = () => follow(true);
    follow(false);
    document.addEventListener('visibilitychange', onVisibility);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, [refreshMs, reload]);
  const { data, error } = shown;
  return { data, error, reload, loading: data === undefined && error === undefined };
}

/** Runs a form's work, shows its error, and clears the form when it succeeds. */
export function useSubmit(work: (form: FormData) => Promise<unknown>) {
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const onSubmit = async (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const element = event.currentTarget;
    setBusy(true);
    setError(undefined);
    try {
      await work(new FormData(element));
      element.reset();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return { onSubmit, error, busy };
}

export function messageOf(error: unknown): string {
  if (error instanceof ApiFailure) return `${error.error.message}${error.error.code ? ` (${error.error.code})` : ''}`;
  return error instanceof Error ? error.message : String(error);
}

/** A failure another try may not meet: the network, a timeout, a limit, the service's own trouble. */
const passing = (error: unknown) =>
  !(error instanceof ApiFailure) || error.status === 0 || error.status === 408 || error.status === 429 || error.status >= 500;

/**
 * An error, until what failed succeeds. `retry` loads again what could not be loaded, offered for a failure
 * that may pass (a 404 stays a 404).
 */
export function ErrorNote({ error, retry }: { error: unknown; retry?: () => unknown }) {
  if (error === undefined || error === null) return null;
  return (
    <p className="error" role="alert">
      {messageOf(error)}
      {retry && passing(error) && (
        <>
          {' '}
          <button type="button" className="link" onClick={() => void retry()}>
            Try again
          </button>
        </>
      )}
    </p>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="muted" role="status">
      Loading {what}…
    </p>
  );
}

export function PageHeader({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="page-header">
      <h1>{title}</h1>
      {children}
    </div>
  );
}

/** A button that asks first, in a modal dialog (Esc or Cancel backs out; focus returns to the button). */
export function ConfirmButton(props: {
  label: string;
  title: string;
  confirmLabel: string;
  children: ReactNode;
  onConfirm: () => Promise<unknown>;
  className?: string;
  /** The confirming button's class: `danger` but for an action that destroys nothing (adding credit). */
  confirmClassName?: string;
  /** Nothing to confirm yet (an amount not typed): the dialog cannot open. */
  disabled?: boolean;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const titleId = useId();
  const confirm = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await props.onConfirm();
      dialog.current?.close();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button
        type="button"
        className={props.className ?? 'danger'}
        disabled={props.disabled}
        onClick={() => {
          // What went wrong last time is not what will happen now: the dialog opens without it.
          setError(undefined);
          dialog.current?.showModal();
        }}
      >
        {props.label}
      </button>
      <dialog ref={dialog} aria-labelledby={titleId}>
        <h2 id={titleId}>{props.title}</h2>
        <div>{props.children}</div>
        <ErrorNote error={error} />
        <div className="actions">
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button type="button" className={props.confirmClassName ?? 'danger'} disabled={busy} onClick={confirm}>
            {props.confirmLabel}
          </button>
        </div>
      </dialog>
    </>
  );
}

/** A secret shown once: read-only, selectable, with a copy button that says when it copied. */
export function SecretOnce({ label, value, note }: { label: string; value: string; note: string }) {
  const id = useId();
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
    } catch {
      const input = document.getElementById(id) as HTMLInputElement | null;
      input?.select();
      document.execCommand('copy');
    }
    setCopied(true);
  };
  return (
    <div className="secret" role="region" aria-label={`${label}, shown once`}>
      <label htmlFor={id}>{label}</label>
      <div className="row">
        <input id={id} readOnly value={value} onFocus={(e) => e.currentTarget.select()} className="mono" />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p className="note">
        {note} <span aria-live="polite">{copied ? 'Copied to the clipboard.' : ''}</span>
      </p>
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="muted empty">{children}</p>;
}
