/**
 * Who is signed in (`GET /admin/me`), read once when the dashboard starts (and again when the server
 * refuses a change to our role), and what that role lets the dashboard offer: `can(action, project)`
 * decides whether a change control is shown, `whyNot` says why it is not. The server decides for
 * real; this only spares people buttons that would be refused.
 */
import { html } from "htm/preact";
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, ApiError } from "./api";
import type { Me, Role } from "./types";

let current: Me | undefined;
const listeners = new Set<() => void>();

/** Replaces who is signed in and re-renders every `useMe` caller. */
function setMe(me: Me | undefined): void {
  current = me;
  listeners.forEach((l) => l());
}

/** Who a server without users (before issue 26) says is signed in: only the admin token can be. */
const TOKEN_ONLY: Me = { kind: "admin_token", role: "admin", user: null, projects: "all", session_id: null };

/** Asks the server who is signed in and keeps the answer for `can` and `useMe`. */
export async function loadMe(): Promise<Me> {
  try {
    const me = await api<Me>("/admin/me");
    setMe(me);
    return me;
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
    setMe(TOKEN_ONLY);
    return TOKEN_ONLY;
  }
}

/** Forgets who was signed in (after signing out). */
export const forgetMe = (): void => setMe(undefined);

/** Who is signed in (undefined until `loadMe` answered), re-rendering the caller when it changes. */
export function useMe(): Me | undefined {
  const [, bump] = useState(0);
  useEffect(() => {
    const l = () => bump((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return current;
}

/** The changes the dashboard offers, each with the least role that may make it. */
const NEEDS = {
  /** Create a project (and the guided first run, which starts with one). */
  "project.create": "admin",
  /** Delete a project, change its quotas and limits. */
  "project.change": "admin",
  /** Create, edit, start, stop, delete a workload; its replicas and endpoint switches. */
  "workload.change": "operator",
  /** Create and revoke keys, change their limits. */
  "key.change": "operator",
  /** Add, test and delete webhook destinations. */
  "webhook.change": "operator",
  /** Send requests from the playground. */
  playground: "operator",
  /** Pull models (an operator: for a project of theirs, within the launch policy); cancel, retry, dismiss and delete their projects' ones. */
  "model.change": "operator",
  /** List the model files other tools left on this machine (the machine is the admin's). */
  "model.discover": "admin",
  /** Add, delete and open workers to projects; join tokens (the machine is the admin's). */
  "worker.change": "admin",
  /** Read a workload's runtime logs and job results (they hold prompts and answers, like captured bodies). */
  "logs.read": "operator",
  /** See the settings in force (viewers do not). */
  "settings.read": "operator",
  /** Change settings while serving. */
  "settings.change": "admin",
  /** See and manage users. */
  users: "admin",
  /** End every dashboard session of everyone. */
  "signout.everywhere": "admin",
} satisfies Record<string, Role>;

/** A change the dashboard may offer or not. */
export type Action = keyof typeof NEEDS;

const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

/** Whether `me` belongs to `project` (a slug or id); admins belong to all. */
function member(me: Me, project: string | undefined): boolean {
  return (
    project === undefined || me.projects === "all" || me.projects.some((p) => p.slug === project || p.id === project)
  );
}

/**
 * Whether the signed-in principal may make this change (in `project`, a slug or id, when it is one's).
 * @example can("key.change", "demo") // → false for a viewer, true for an operator of demo
 */
export function can(action: Action, project?: string, me: Me | undefined = current): boolean {
  if (!me) return false;
  return RANK[me.role] >= RANK[NEEDS[action]] && member(me, project);
}

/**
 * Why the change is not offered, in words (for a title or a note).
 * @example whyNot("workload.change") // → "Your role (viewer) can only look; an operator or admin of this project can change this."
 */
export function whyNot(action: Action, me: Me | undefined = current): string {
  const role = me?.role ?? "viewer";
  if (NEEDS[action] === "admin") return `Your role (${role}) cannot do this; only an admin can.`;
  if (action === "logs.read")
    return `Your role (${role}) cannot read runtime logs or job results; an operator or admin of this project can.`;
  const scoped =
    action === "workload.change" || action === "key.change" || action === "webhook.change" || action === "playground";
  return `Your role (${role}) can only look; an operator or admin${scoped ? " of this project" : ""} can change this.`;
}

/**
 * Attributes that disable a control the role may not use, with a title saying why (nothing when allowed).
 * @example html`<button ...${guard("settings.change")}>Save</button>`
 */
export function guard(action: Action, project?: string): Record<string, unknown> {
  return can(action, project) ? {} : { disabled: true, title: whyNot(action), "data-role-guard": action };
}

/**
 * Its children when the role allows `action` (in `project`); else nothing, or with `note`, a short
 * note saying why the controls are missing.
 * @example html`<${Can} do="key.change" project=${slug} note>…the new-key form…<//>`
 */
export function Can({
  do: action,
  project,
  note,
  children,
}: {
  do: Action;
  project?: string;
  note?: boolean;
  children: ComponentChildren;
}) {
  useMe();
  if (can(action, project)) return html`${children}`;
  return note ? html`<p class="note role-note" data-testid="role-note">${whyNot(action)}</p>` : null;
}
