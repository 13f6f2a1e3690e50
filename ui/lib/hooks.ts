/** Data hooks: read an admin API path (optionally polled) with loading and error state. */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, type CallOptions } from "./api";

/** The state of one read. */
export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  reload(): Promise<void>;
}

/**
 * How long to wait before the `attempt`th (from 0) try again of a read the server did not answer:
 * 1 s, doubling, at most 8 s.
 * @example retryDelay(0) // → 1000; retryDelay(5) // → 8000
 */
export const retryDelay = (attempt: number): number => Math.min(1000 * 2 ** attempt, 8000);

/**
 * The error of a read the server did not answer at all (it restarts, the network dropped): says
 * that the page reconnects by itself, with the code `network`.
 */
export const unreachable = (delayMs: number): ApiError =>
  new ApiError(
    0,
    "network",
    `The server does not answer (it may be restarting): reconnecting, next try in ${Math.round(delayMs / 1000)} s…`,
  );

/**
 * Reads `path` (nothing when null) and again every `pollMs` while the tab is visible. When the
 * server does not answer (a restart), it tries again by itself with backoff (`retryDelay`) until it
 * does, showing a "reconnecting" error meanwhile and keeping the last data.
 * @example const { data: projects, reload } = useApi<Project[]>("/admin/projects");
 */
export function useApi<T>(path: string | null, pollMs?: number): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<ApiError>();
  const current = useRef(path);
  current.current = path;
  const retry = useRef<{ attempt: number; timer?: ReturnType<typeof setTimeout>; gone?: boolean }>({ attempt: 0 });
  const reload = useCallback(async (): Promise<void> => {
    if (!path) return;
    try {
      const value = await api<T>(path);
      if (current.current === path) {
        retry.current.attempt = 0;
        setData(value);
        setError(undefined);
      }
    } catch (e) {
      if (current.current !== path || retry.current.gone) return;
      if (!(e instanceof TypeError)) return setError(e instanceof ApiError ? e : new ApiError(0, "error", String(e)));
      // fetch's TypeError: no answer at all: try again by itself (a poll may get there first), never left on "Failed to fetch".
      const wait = retryDelay(retry.current.attempt++);
      setError(unreachable(wait));
      clearTimeout(retry.current.timer);
      retry.current.timer = setTimeout(() => current.current === path && void reload(), wait);
    }
  }, [path]);
  useEffect(() => {
    setData(undefined);
    setError(undefined);
    retry.current = { attempt: 0 };
    void reload();
    const timer = pollMs
      ? setInterval(() => {
          if (!document.hidden) void reload();
        }, pollMs)
      : undefined;
    return () => {
      clearInterval(timer);
      clearTimeout(retry.current.timer);
      retry.current.gone = true;
    };
  }, [reload, pollMs]);
  return { data, error, reload };
}

/** Runs an action with a busy flag and its error, for forms and buttons; `run` resolves to undefined on failure. */
export function useAction<A extends unknown[], R>(fn: (...args: A) => Promise<R>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();
  const run = async (...args: A): Promise<R | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      return await fn(...args);
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, "error", (e as Error).message));
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, setError };
}

/** The current time, refreshed every `everyMs` (for "for 12 s" texts). */
export function useNow(everyMs = 1000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}

/**
 * Calls the admin API a moment after its input (`key`) stops changing, dropping a call that is
 * overtaken; keeps the last answer meanwhile, and forgets it when `path` is null.
 * @example const { data } = useDebouncedApi<FileCheck>(path && `/admin/models/file?path=${encodeURIComponent(path)}`, {}, path ?? "");
 */
export function useDebouncedApi<T>(
  path: string | null,
  opts: CallOptions,
  key: string,
  delayMs = 300,
): { data?: T; error?: ApiError } {
  const [state, setState] = useState<{ data?: T; error?: ApiError }>({});
  useEffect(() => {
    if (!path) return setState({});
    const ctl = new AbortController();
    const timer = setTimeout(() => {
      api<T>(path, { ...opts, signal: ctl.signal }).then(
        (data) => setState({ data }),
        (error) =>
          ctl.signal.aborted ||
          setState({ error: error instanceof ApiError ? error : new ApiError(0, "network", (error as Error).message) }),
      );
    }, delayMs);
    return () => {
      clearTimeout(timer);
      ctl.abort();
    };
  }, [path, key]);
  return state;
}
