import { join } from "node:path";
import type { Config } from "../config";
import { AppError } from "../errors";
import {
  checkLaunch,
  checkNodes,
  familyOf,
  POLICY_SETTINGS,
  type LaunchPolicy,
  type PolicyViolation,
} from "../../agent/launch-policy";

/** The launch policy in force, from the settings (`--policy-*`). */
export function policyOf(
  config: Pick<
    Config,
    | "dataDir"
    | "policyVllmPrograms"
    | "policySglangPrograms"
    | "policyLlamacppPrograms"
    | "policyCustomPrograms"
    | "policyForbiddenFlags"
    | "policyModelPaths"
    | "policyTenantInstalls"
    | "policyTenantMultinode"
    | "allowPrivateModelUrls"
  >,
): LaunchPolicy {
  return {
    programs: {
      vllm: config.policyVllmPrograms,
      sglang: config.policySglangPrograms,
      llamacpp: config.policyLlamacppPrograms,
      custom: config.policyCustomPrograms,
    },
    forbidden_flags: config.policyForbiddenFlags,
    model_paths: config.policyModelPaths.length ? config.policyModelPaths : [join(config.dataDir, "models")],
    tenant_installs: config.policyTenantInstalls,
    tenant_multinode: config.policyTenantMultinode,
    private_model_urls: config.allowPrivateModelUrls,
  };
}

/** 403 `command_not_allowed` for a violation, naming the word, the field and the setting. */
export const notAllowed = (v: PolicyViolation) =>
  new AppError(403, "command_not_allowed", v.message, {}, v.field, { word: v.word, setting: v.setting });

/**
 * Refuses (403 `command_not_allowed`) a workload a tenant wants to save when the policy would not
 * let it run. Config shape errors are reported by the schema first.
 */
export function requireTenantLaunch(
  policy: LaunchPolicy,
  backend: string,
  config: Record<string, unknown>,
  nodes = 1,
): void {
  const v = checkNodes(policy, nodes) ?? checkLaunch(policy, backend, config);
  if (v) throw notAllowed(v);
}

/** What `GET /admin/policy` shows: the rules, who they apply to and the settings that change them. */
export function policyView(policy: LaunchPolicy) {
  return {
    applies_to:
      "workloads whose command was last set by a tenant: anyone but the admin (operators and viewers in the dashboard, control-plane ik_sdk_ keys); only the admin token and admin users are trusted",
    ...policy,
    settings: POLICY_SETTINGS,
  };
}

/** The tenant verdict for a workload form (the launch preview): allowed, or the violation. */
export function tenantVerdict(
  policy: LaunchPolicy,
  backend: string,
  config: Record<string, unknown>,
): { allowed: boolean; applies: boolean; violation?: PolicyViolation } {
  if (!familyOf(backend)) return { allowed: true, applies: false };
  const violation = checkLaunch(policy, backend, config);
  return violation ? { allowed: false, applies: true, violation } : { allowed: true, applies: true };
}
