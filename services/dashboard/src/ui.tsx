import { type ReactNode, useCallback, useEffect, useId, useRef, useState } from 'react';
import { ApiFailure } from './api';

/** Loads on mount and when `deps` change; `reload` fetches again (quietly, keeping what is shown). */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const current = useRef(load);
  current.current = load;
  const reload = useCallback(async () => {
    try {
      setData(await current.current());
      setError(undefined);
    } catch (e) {
      setError(e);
    }
  }, []);
  useEffect(() => {
    setData(undefined);
    void reload();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
  return { data, error, reload, loading: data === undefined && error === undefined };
}

/** Calls `tick` every `ms` while `active`. */
export function useInterval(tick: () => void, ms: number, active: boolean) {
  const saved = useRef(tick);
  saved.current = tick;
  useEffect(() => {
    if (!active) return;
    const id = setInterval(() => saved.current(), ms);
    return () => clearInterval(id);
  }, [ms, active]);
}

export function messageOf(error: unknown): string {
  if (error instanceof ApiFailure) return `${error.error.message}${error.error.code ? ` (${error.error.code})` : ''}`;
  return error instanceof Error ? error.message : String(error);
}

export function ErrorNote({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null;
  return (
    <p className="error" role="alert">
      {messageOf(error)}
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
      <button type="button" className={props.className ?? 'danger'} onClick={() => dialog.current?.showModal()}>
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
          <button type="button" className="danger" disabled={busy} onClick={confirm}>
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
