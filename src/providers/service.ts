/**
 * External providers' workloads (agent/engines/providers.ts) on the host: their provider key taken
 * out of the config a save sends and kept sealed (./secrets.ts), their base URL judged by the
 * address rules at save, and the dispatcher's targets that call them (./target.ts), one per
 * workload, made again at each placement pass.
 */
import { eq } from "drizzle-orm";
import { engineOf } from "../../agent/engines";
import { AddressRefused, checkUrl } from "../../agent/net/address";
import type { Db } from "../db";
import { workloadSecrets } from "../db/schema";
import type { Target } from "../dispatch/queue";
import { validation } from "../errors";
import { log } from "../log";
import { listAllWorkloads, type Workload } from "../workloads/service";
import { putSecret, readSecret, type SecretBox } from "./secrets";
import { providerTarget } from "./target";

/** A workload save as the routes have it: its backend and config (other fields untouched). */
interface Save {
  backend?: string;
  config?: Record<string, unknown>;
}

/** Provider workloads' keys and targets. */
export class Providers {
  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    /** Whether provider addresses may be private or loopback, and http:// (`--allow-private-providers`). */
    private readonly allowPrivate: () => boolean,
  ) {}

  /**
   * A save with its provider key taken out of `config` (returned beside it), its base URL checked;
   * a new provider workload must bring a key, a changed one keeps its key unless a new one is sent.
   * Saves of other backends pass unchanged.
   */
  take<S extends Save>(save: S, current?: Workload): { save: S; key?: string } {
    const backend = save.backend ?? current?.backend;
    if (!backend || !engineOf(backend)?.external || !save.config) {
      if (!current && backend && engineOf(backend)?.external)
        throw validation("config.api_key", "is required: the provider's API key (kept encrypted, never shown again)");
      return { save };
    }
    const { api_key: key, ...config } = save.config;
    try {
      const allow = this.allowPrivate();
      checkUrl(String(config.base_url), { what: "the provider's URL", http: allow, literal: { allowPrivate: allow } });
    } catch (e) {
      if (e instanceof AddressRefused)
        throw validation(
          "config.base_url",
          `${e.message} (the operator allows private and http:// providers with --allow-private-providers)`,
        );
      throw e;
    }
    const movedFrom = current && current.backend !== backend;
    if (key === undefined && (!current || movedFrom))
      throw validation("config.api_key", "is required: the provider's API key (kept encrypted, never shown again)");
    return { save: { ...save, config }, ...(typeof key === "string" ? { key } : {}) };
  }

  /** Keeps a workload's provider key, sealed. */
  store(workloadId: string, key: string): Promise<void> {
    return putSecret(this.db, this.box, workloadId, key);
  }

  /** Forgets the key of a workload that no longer calls a provider. */
  async forget(workloadId: string): Promise<void> {
    await this.db.delete(workloadSecrets).where(eq(workloadSecrets.workloadId, workloadId));
  }

  /** The dispatcher's target of every provider workload whose key opens. */
  async targets(): Promise<Target[]> {
    const out: Target[] = [];
    for (const w of await listAllWorkloads(this.db)) {
      if (!engineOf(w.backend)?.external) continue;
      const key = await readSecret(this.db, this.box, w.id);
      if (key === undefined) {
        log.warn(
          `${w.project_slug}/${w.slug}: its provider key cannot be opened (was the secrets key changed?); set it again`,
        );
        continue;
      }
      out.push(providerTarget(w, key, { allowPrivate: this.allowPrivate() }));
    }
    return out;
  }
}
