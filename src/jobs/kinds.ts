import type { Toggle } from "../workloads/schema";
import { DATA_ROUTES } from "../dataplane/table";

/** What a job kind runs: the synchronous route it equals and the toggle that governs it. */
export interface KindSpec {
  route: string;
  toggle: Toggle;
}

/** Job kinds and the synchronous route each equals (the contract's table; ../dataplane/table.ts). */
export const KINDS: Record<string, KindSpec> = Object.fromEntries(
  DATA_ROUTES.flatMap((r) => (r.kind ? [[r.kind, { route: r.path, toggle: r.toggle }]] : [])),
);

/** Other names accepted for a kind. */
export const ALIASES: Record<string, string> = Object.fromEntries(
  DATA_ROUTES.flatMap((r) => (r.kind ? (r.aliases ?? []).map((a) => [a, r.kind!]) : [])),
);

/** Every accepted kind name, aliases included, for error messages. */
export const ACCEPTED_KINDS = [...Object.keys(KINDS), ...Object.keys(ALIASES)];

/** The canonical kind for a name, or undefined. */
export const canonicalKind = (name: string): string | undefined => (KINDS[name] ? name : ALIASES[name]);
