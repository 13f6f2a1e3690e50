/** The dashboard's only way to the server: the admin API, authenticated by the session cookie. */

/**
 * An error answer of the admin API: `{error: {code, message, field?}}`, with the answer's
 * `x-request-id` when it had one (data-plane calls) and its `retry-after` seconds (a 429).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
    readonly requestId?: string,
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

const FLAG = "inferd.signedIn";
let onUnauthorized = () => {};
let onForbiddenRole = () => {};

/** Called when the server says the session is gone (the app shows sign-in). */
export function setUnauthorizedHandler(fn: () => void): void {
  onUnauthorized = fn;
}

/** Called when the server refuses a change to the signed-in user's role (the role may have changed: ask again who we are). */
export function setForbiddenRoleHandler(fn: () => void): void {
  onForbiddenRole = fn;
}

/** Options of one admin API call. */
export interface CallOptions {
  method?: string;
  body?: unknown;
  signal?: AbortSignal;
}

/** Sends a request with the session cookie; a JSON body when `body` is given. */
export function send(path: string, opts: CallOptions = {}): Promise<Response> {
  const hasBody = opts.body !== undefined;
  return fetch(path, {
    method: opts.method ?? (hasBody ? "POST" : "GET"),
    headers: hasBody ? { "content-type": "application/json" } : {},
    body: hasBody ? JSON.stringify(opts.body) : undefined,
    credentials: "same-origin",
    signal: opts.signal,
  });
}

/** Turns a non-2xx answer into an ApiError (and a 401 into "signed out"). */
export async function failure(res: Response): Promise<ApiError> {
  let err: { code?: string; message?: string; field?: string } = {};
  try {
    err = ((await res.json()) as { error?: typeof err }).error ?? {};
  } catch {}
  if (res.status === 401) {
    localStorage.removeItem(FLAG);
    onUnauthorized();
  }
  if (res.status === 403 && err.code === "forbidden_role") onForbiddenRole();
  const retry = Number(res.headers.get("retry-after") ?? NaN);
  return new ApiError(
    res.status,
    err.code ?? `http_${res.status}`,
    err.message ?? `the server answered ${res.status}`,
    err.field,
    res.headers.get("x-request-id") ?? undefined,
    Number.isFinite(retry) ? retry : undefined,
  );
}

/**
 * Calls the admin API and returns its JSON (undefined for 204); throws ApiError on an error answer.
 * @example const projects = await api<Project[]>("/admin/projects");
 */
export async function api<T>(path: string, opts: CallOptions = {}): Promise<T> {
  return (await answer<T>(path, opts)).data;
}

/**
 * Like `api`, with the answer's `x-request-id` (the playground's data-plane calls carry one).
 * @example const { data, requestId } = await answer<Embedded>(`/admin/workloads/${id}/embeddings`, { body });
 */
export async function answer<T>(path: string, opts: CallOptions = {}): Promise<{ data: T; requestId?: string }> {
  const res = await send(path, opts);
  if (!res.ok) throw await failure(res);
  const requestId = res.headers.get("x-request-id") ?? undefined;
  if (res.status === 204) return { data: undefined as T, requestId };
  const text = await res.text();
  return { data: (text ? JSON.parse(text) : undefined) as T, requestId };
}

/**
 * Whether this browser signed in and has not signed out since. The session cookie is HttpOnly,
 * so a flag remembers it; without one the app shows sign-in instead of asking (and logging a 401).
 */
export const signedIn = (): boolean => localStorage.getItem(FLAG) === "1";

/**
 * Takes note of a sign-in the server did itself: `/login?code=…` (the desktop window's one-time
 * link) sets the cookie and lands on `/?signed_in=1`. Drops the marker from the address.
 */
export function adoptServerSignIn(): void {
  const url = new URL(location.href);
  if (url.searchParams.get("signed_in") !== "1") return;
  localStorage.setItem(FLAG, "1");
  url.searchParams.delete("signed_in");
  history.replaceState(null, "", url.pathname + url.search + url.hash);
}

/** What a sign-in sends: the admin token, or a user's email and password. */
export type Credentials = { token: string } | { email: string; password: string };

/** Exchanges the admin token (or a user's email and password) for the HttpOnly session cookie. */
export async function signIn(credentials: string | Credentials): Promise<void> {
  const body =
    typeof credentials === "string"
      ? { token: credentials.trim() }
      : "token" in credentials
        ? { token: credentials.token.trim() }
        : { email: credentials.email.trim(), password: credentials.password };
  const res = await send("/admin/session", { body });
  if (!res.ok) throw await failure(res);
  localStorage.setItem(FLAG, "1");
}

/** Marks this browser signed in after a sign-in the server finished itself (single sign-on's callback). */
export const markSignedIn = (): void => localStorage.setItem(FLAG, "1");

/** Ends the session (or, `everywhere`, every dashboard session) on the server and forgets it here. */
export async function signOut(everywhere = false): Promise<void> {
  localStorage.removeItem(FLAG);
  await send(everywhere ? "/admin/sessions" : "/admin/session", { method: "DELETE" }).catch(() => undefined);
}
