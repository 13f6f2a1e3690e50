/**
 * The model store for tenants (anyone but the admin, the operator of the machine): what they name
 * is data, held to the launch policy's rules for commands. A pull's URL must pass the same address
 * rules as a tenant's `-mu` (public https, unless `--allow-private-model-urls`), a local path and a
 * path looked at must lie under `--policy-model-paths`, and a model can be cancelled, dismissed or
 * removed only when it was pulled for one of their projects.
 */
import { realpathSync } from "node:fs";
import { eq } from "drizzle-orm";
import type { Db } from "../db";
import { first } from "../db/raw";
import { tenantModels } from "../db/schema";
import { AppError, notFound, validation } from "../errors";
import { getProject } from "../projects/service";
import { isMachineOperator, seesProject, type Principal } from "../users/access";
import { notAllowed } from "../workloads/launch-policy";
import { outsideModelDirs, POLICY_SETTINGS, settingText, type LaunchPolicy } from "../../agent/launch-policy";
import {
  AddressRefused,
  checkUrl,
  makeResolver,
  resolveAllowed,
  type AddressPolicy,
  type Resolve,
} from "../../agent/net/address";
import type { ModelSource } from "../../agent/models/source";
import { getModelRow } from "./service";
import type { PullBy } from "./manager";

/** 403 `command_not_allowed` at `field`, naming the refused word and the setting that would allow it (the launch policy's refusal). */
const refused = (field: string, word: string, key: keyof typeof POLICY_SETTINGS, message: string) =>
  notAllowed({ field, word, setting: settingText(key), message });

/** A path's real path (links followed), or null when it cannot be resolved (it does not exist). */
function realOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

/**
 * Refuses (403 `command_not_allowed`) a path outside the policy's model directories, after `.`/`..`
 * and, where the path exists, its symlinks: the policy's path rule for commands.
 */
export function requireModelPath(policy: LaunchPolicy, path: string, field: string): void {
  const dirs = policy.model_paths;
  const why = outsideModelDirs(path, dirs, realOrNull);
  if (!why) return;
  throw refused(
    field,
    path,
    "model_paths",
    `${field}: "${path}" ${why}; tenants may use model files only under ${dirs.join(", ") || "(no directory)"}, which the operator sets with ${settingText("model_paths")}`,
  );
}

/** The address rules of a tenant's model URL under `policy` (the agent's for `-mu`), with the system resolver unless given. */
export const tenantGuard = (policy: LaunchPolicy, resolve: Resolve = makeResolver()): AddressPolicy => ({
  allowPrivate: policy.private_model_urls,
  resolve,
});

/**
 * Refuses (403 `command_not_allowed` at `source`) a tenant's pull the launch policy would refuse in
 * a command: a URL that is not public https (resolved and checked now; every hop is checked again
 * while it downloads), or a local path outside the model directories. Hub sources pass.
 */
export async function requireTenantSource(
  policy: LaunchPolicy,
  source: ModelSource,
  guard: AddressPolicy,
): Promise<void> {
  if (source.kind === "local") return requireModelPath(policy, source.path, "source");
  if (source.kind !== "url") return;
  try {
    await resolveAllowed(
      checkUrl(source.url, {
        what: "a model URL",
        http: guard.allowPrivate,
        literal: { allowPrivate: guard.allowPrivate },
      }),
      guard,
    );
  } catch (e) {
    if (!(e instanceof AddressRefused)) throw e;
    throw refused(
      "source",
      source.url,
      "private_model_urls",
      `source: "${source.url}" is not allowed: ${e.message}; tenants' model URLs must be public https addresses unless the operator allows private ones with ${settingText("private_model_urls")}`,
    );
  }
}

/**
 * For whom a principal's hand pull is: the admin's own (no `project`), or the project named (one the
 * principal sees, else 404). A tenant naming none pulls for their only project; with several they
 * must name one (400 at `project`), with none they cannot pull (403 `forbidden_role`).
 */
export async function pullerOf(db: Db, who: Principal, project: string | undefined): Promise<PullBy> {
  if (project !== undefined) {
    const p = await getProject(db, project);
    if (!seesProject(who, p.id)) throw notFound(`project "${project}"`);
    return { project: p.id };
  }
  if (isMachineOperator(who)) return "admin";
  const mine = who.projectIds === "all" ? [] : [...who.projectIds];
  if (mine.length === 1) return { project: mine[0] };
  if (mine.length === 0)
    throw new AppError(
      403,
      "forbidden_role",
      `your role (${who.role}) pulls models for one of your projects, and you belong to none; an admin can`,
    );
  throw validation(
    "project",
    "you belong to several projects: name the one this model is pulled for (its slug or id); it counts against that project's model_bytes",
  );
}

/**
 * Refuses (403 `forbidden_role`) a tenant's cancel, dismiss or delete of a model that was not pulled
 * for one of their projects (the admin's own models, and other projects').
 */
export async function requireOwnModel(db: Db, who: Principal, modelId: string, what: string): Promise<void> {
  if (isMachineOperator(who)) return;
  await getModelRow(db, modelId); // 404 for an unknown model
  const t = await first(
    db.select({ projectId: tenantModels.projectId }).from(tenantModels).where(eq(tenantModels.modelId, modelId)),
  );
  if (t && seesProject(who, t.projectId)) return;
  throw new AppError(
    403,
    "forbidden_role",
    `your role (${who.role}) can ${what} only models pulled for one of your projects, and this one was not; an admin can`,
  );
}
