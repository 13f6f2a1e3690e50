/** Data hooks: read an admin API path (optionally polled) with loading and error state. */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "./api";

/** The state of one read. */
export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  reload(): Promise<void>;
}

/**
 * Reads `path` (nothing when null) and again every `pollMs` while the tab is visible.
 * @example const { data: projects, reload } = useApi<Project[]>("/admin/projects");
 */
export function useApi<T>(path: string | null, pollMs?: number): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<ApiError>();
  const current = useRef(path);
  current.current = path;
  const reload = useCallback(async () => {
    if (!path) return;
    try {
      const value = await api<T>(path);
      if (current.current === path) {
        setData(value);
        setError(undefined);
      }
    } catch (e) {
      if (current.current === path) setError(e instanceof ApiError ? e : new ApiError(0, "network", (e as Error).message));
    }
  }, [path]);
  useEffect(() => {
    setData(undefined);
    setError(undefined);
    void reload();
    if (!pollMs) return;
    const timer = setInterval(() => {
      if (!document.hidden) void reload();
    }, pollMs);
    return () => clearInterval(timer);
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
