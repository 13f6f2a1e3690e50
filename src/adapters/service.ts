/**
 * LoRA adapters as a base workload's resources (issue 39): added from a model source (pulled into
 * the model store like a model, counted against the project's `model_bytes` when a tenant adds it),
 * checked against the base once on disk, listed, removed. The project's adapters by name are the
 * data plane's routing table for adapter names (memoised: read from memory while the store is
 * unchanged).
 */
import { and, asc, eq } from "drizzle-orm";
import { splitCommand, flagValue } from "../../agent/command";
import { engineOf } from "../../agent/engines";
import { modelRefs } from "../../agent/model-refs";
import type { Db } from "../db";
import { storeLookup } from "../db/memo";
import { first } from "../db/raw";
import { adapters } from "../db/schema";
import { conflict, notFound, validation } from "../errors";
import { newId, nowIso } from "../ids";
import { log } from "../log";
import type { ModelManager, PullBy } from "../models/manager";
import { modelOfWorkload } from "../models/service";
import { inspectCached } from "../models/inspect";
import type { AddressPolicy } from "../../agent/net/address";
import { findProjectWorkloads, type Workload } from "../workloads/service";
import { AdapterRefused, checkAgainst, readAdapter, type BaseOf } from "./check";

export type AdapterRow = typeof adapters.$inferSelect;

/** An adapter as the API shows it. */
export interface AdapterView {
  id: string;
  name: string;
  workload_id: string;
  source: string;
  state: AdapterRow["state"];
  reason: string | null;
  format: string | null;
  base_model: string | null;
  rank: number | null;
  size_bytes: number;
  model_id: string | null;
  created_at: string;
}

export const adapterView = (r: AdapterRow): AdapterView => ({
  id: r.id,
  name: r.name,
  workload_id: r.workloadId,
  source: r.source,
  state: r.state,
  reason: r.reason,
  format: r.format,
  base_model: r.baseModel,
  rank: r.rank,
  size_bytes: r.bytes,
  model_id: r.modelId,
  created_at: r.createdAt,
});

/** An adapter's name: what clients put in `model`. Letters, digits, `.`, `_`, `-` (`:` joins base and adapter). */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The adapters of a workload, oldest first. */
export function listAdapters(db: Db, workloadId: string): Promise<AdapterRow[]> {
  return db.select().from(adapters).where(eq(adapters.workloadId, workloadId)).orderBy(asc(adapters.createdAt));
}

/**
 * A project's ready adapters by name: the data plane's table for adapter names, from memory while the
 * store is unchanged (the value at once), else a promise of it.
 */
export const projectAdapters = storeLookup(
  async (db, projectId) => {
    const rows = await db
      .select()
      .from(adapters)
      .where(and(eq(adapters.projectId, projectId), eq(adapters.state, "ready")))
      .orderBy(asc(adapters.createdAt));
    return new Map(rows.map((r) => [r.name, r]));
  },
  ["adapters"],
);

/** What the base workload serves, for `checkAgainst`: its engine, the model its command loads, a GGUF's architecture, its own --max-lora-rank. */
export async function baseOf(db: Db, w: Workload): Promise<BaseOf> {
  let words: string[] = [];
  try {
    words = splitCommand(String(w.config.command ?? ""));
  } catch {}
  const ref = modelRefs(w.backend, words)[0]?.source;
  const serve = words.indexOf("serve");
  const positional = serve >= 0 && words[serve + 1] && !words[serve + 1].startsWith("-") ? words[serve + 1] : undefined;
  const model =
    ref && "repo" in ref ? ref.repo : (flagValue(words, engineOf(w.backend)?.flags.model ?? []) ?? positional);
  const stored = await modelOfWorkload(db, w).catch(() => null);
  // A GGUF named by path that the store does not know: its own header says its architecture.
  const local = !stored && model?.startsWith("/") ? await inspectCached(model).catch(() => null) : null;
  const architecture = stored?.info.architecture ?? local?.architecture ?? undefined;
  const maxRank = Number(flagValue(words, ["--max-lora-rank"]));
  return {
    backend: w.backend,
    ...(model ? { model } : {}),
    ...(architecture ? { architecture } : {}),
    ...(maxRank > 0 ? { maxRank } : {}),
  };
}

/** Who adds an adapter: pulled as the admin's own, or for the workload's project (its `model_bytes`), with the tenant's address rules. */
export interface AddedBy {
  by: PullBy;
  guard?: AddressPolicy;
  who: string | null;
}

/**
 * Adapters of workloads, added and removed: `add` pulls the source through the model store and
 * checks the files once there (`watch`), `resume` watches again after a restart.
 */
export class Adapters {
  constructor(
    private db: Db,
    private models: Pick<ModelManager, "pull" | "wait" | "view">,
    /** Told when an adapter became ready or went (replicas then load or drop it). */
    private changed: () => Promise<void>,
  ) {}

  /**
   * Adds adapter `name` from `source` to base workload `w`: 400 when its engine serves no adapters or
   * the name is malformed, 409 when the project already answers to that name; answers at once
   * (`pulling`), becoming `ready` or `failed` once pulled and checked.
   */
  async add(w: Workload, body: { name: string; source: string }, added: AddedBy): Promise<AdapterView> {
    const engine = engineOf(w.backend);
    if (!engine?.lora)
      throw validation(
        "workload",
        `${engine?.label ?? w.backend} workloads do not serve LoRA adapters here (vLLM, SGLang and llama.cpp do; with Ollama, make a model of its own with an ADAPTER line in a Modelfile)`,
      );
    if (!NAME.test(body.name))
      throw validation(
        "name",
        "an adapter's name is 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit (clients call it as `model`)",
      );
    const ws = await findProjectWorkloads(this.db, w.project_slug);
    const clash = ws.find((x) => [x.model_name, ...x.aliases, x.slug].includes(body.name));
    if (clash)
      throw conflict(
        `the project already answers to "${body.name}": workload ${clash.slug}; an adapter's name must be new in its project`,
        "conflict",
        "name",
      );
    const taken = await first(
      this.db
        .select()
        .from(adapters)
        .where(and(eq(adapters.projectId, w.project_id), eq(adapters.name, body.name))),
    );
    if (taken) throw conflict(`the project already has an adapter named "${body.name}"`, "conflict", "name");
    const model = await this.models.pull(body.source, added.by, added.guard);
    const row: AdapterRow = {
      id: newId("adp"),
      workloadId: w.id,
      projectId: w.project_id,
      name: body.name,
      source: body.source.trim(),
      modelId: model.id,
      state: "pulling",
      reason: null,
      format: null,
      baseModel: null,
      rank: null,
      bytes: model.size_bytes,
      createdAt: nowIso(),
      createdBy: added.who,
    };
    await this.db.insert(adapters).values(row);
    await this.settle(row, w);
    return adapterView((await this.get(row.id)) ?? row);
  }

  /** The adapter named on a workload, or 404. */
  async named(w: Workload, name: string): Promise<AdapterRow> {
    const r = await first(
      this.db
        .select()
        .from(adapters)
        .where(and(eq(adapters.workloadId, w.id), eq(adapters.name, name))),
    );
    if (!r) throw notFound(`adapter "${name}" of workload "${w.project_slug}/${w.slug}"`);
    return r;
  }

  /** Removes an adapter (its replicas drop it); its files stay in the model store until collected. */
  async remove(w: Workload, name: string): Promise<void> {
    const r = await this.named(w, name);
    await this.db.delete(adapters).where(eq(adapters.id, r.id));
    await this.changed();
  }

  private get(id: string): Promise<AdapterRow | undefined> {
    return first(this.db.select().from(adapters).where(eq(adapters.id, id)));
  }

  /** Settles a pulling adapter now when its model is ready or failed, else once it is (in the background). */
  private async settle(row: AdapterRow, w: Workload): Promise<void> {
    const m = await this.models.view(row.modelId!).catch(() => undefined);
    if (m && m.state !== "downloading") return this.check(row, w);
    void this.models
      .wait(row.modelId!)
      .then(() => this.check(row, w))
      .catch((e) => log.error(`adapter ${row.name}: checking it failed`, e));
  }

  /** Reads the pulled files and checks them against the base: `ready` (with what they say) or `failed` (why). */
  private async check(row: AdapterRow, w: Workload): Promise<void> {
    const m = await this.models.view(row.modelId!).catch(() => undefined);
    let set: Partial<AdapterRow>;
    if (!m || m.state !== "ready" || !m.entry) {
      set = {
        state: "failed",
        reason: `its files could not be pulled: ${m?.reason ?? m?.state ?? "the pull is gone"}`,
      };
    } else {
      try {
        const info = await readAdapter(m.entry);
        checkAgainst(info, await baseOf(this.db, w));
        set = {
          state: "ready",
          reason: null,
          format: info.format,
          baseModel: info.base,
          rank: info.rank,
          bytes: info.bytes,
        };
      } catch (e) {
        // Refused by the checks, or files that cannot be read as an adapter at all (a corrupt GGUF).
        const why = e instanceof AdapterRefused ? e.message : `its files cannot be read: ${(e as Error).message}`;
        set = { state: "failed", reason: why, bytes: m.size_bytes };
      }
    }
    await this.db.update(adapters).set(set).where(eq(adapters.id, row.id));
    if (set.state === "ready") await this.changed();
  }

  /** Watches again the adapters left pulling by a restart. */
  async resume(workloadOf: (id: string) => Promise<Workload | undefined>): Promise<void> {
    for (const r of await this.db.select().from(adapters).where(eq(adapters.state, "pulling"))) {
      const w = await workloadOf(r.workloadId);
      if (w) await this.settle(r, w).catch((e) => log.error(`adapter ${r.name}: resuming failed`, e));
    }
  }
}
