/**
 * The secrets of external-provider workloads (their API keys), encrypted at rest with a key the
 * operator holds: `--secrets-key` (INFERD_SECRETS_KEY, 32 bytes in base64), else a key made once in
 * `<data-dir>/secrets.key` (mode 0600). AES-256-GCM, a fresh IV per secret, the workload id bound in
 * as associated data (a sealed key copied onto another workload does not open). Cluster mode needs
 * the setting, the same on every host: each host's own file could not open the others' secrets.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import type { Db } from "../db";
import { workloadSecrets } from "../db/schema";
import { AppError } from "../errors";
import { nowIso } from "../ids";

/** Where the secrets key comes from. */
export interface SecretsKeySource {
  /** The setting's value (base64), if set. */
  setting?: string;
  dataDir: string;
  /** The store's engine: PostgreSQL (a cluster) needs the setting. */
  engine: "sqlite" | "postgres";
}

const b64 = (b: Buffer) => b.toString("base64url");

/** Seals and opens provider secrets with the operator's key (read or made on first use). */
export class SecretBox {
  #key: Buffer | undefined;
  constructor(private readonly source: SecretsKeySource) {}

  /** The key: the setting's, else the data dir's file (made now when missing; SQLite only). */
  private key(): Buffer {
    if (this.#key) return this.#key;
    const { setting, dataDir, engine } = this.source;
    if (setting) {
      const k = Buffer.from(setting, "base64");
      if (k.length !== 32)
        throw new AppError(
          500,
          "secrets_key_invalid",
          "INFERD_SECRETS_KEY must be 32 bytes in base64 (openssl rand -base64 32)",
        );
      return (this.#key = k);
    }
    if (engine === "postgres")
      throw new AppError(
        409,
        "secrets_key_required",
        "a cluster's hosts share provider secrets: set --secrets-key (INFERD_SECRETS_KEY, openssl rand -base64 32), the same on every host",
        {},
        "config.api_key",
      );
    const file = join(dataDir, "secrets.key");
    if (!existsSync(file)) writeFileSync(file, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600, flag: "wx" });
    return (this.#key = Buffer.from(readFileSync(file, "utf8").trim(), "base64"));
  }

  /** `plain` sealed for `workloadId`: `v1.<iv>.<tag>.<ciphertext>`. */
  seal(workloadId: string, plain: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv("aes-256-gcm", this.key(), iv);
    c.setAAD(Buffer.from(workloadId));
    const body = Buffer.concat([c.update(plain, "utf8"), c.final()]);
    return ["v1", b64(iv), b64(c.getAuthTag()), b64(body)].join(".");
  }

  /** The secret sealed for `workloadId`; throws when the key or the workload does not match. */
  open(workloadId: string, sealed: string): string {
    const [v, iv, tag, body] = sealed.split(".");
    if (v !== "v1" || !iv || !tag || body === undefined) throw new Error("not a sealed secret");
    const d = createDecipheriv("aes-256-gcm", this.key(), Buffer.from(iv, "base64url"));
    d.setAAD(Buffer.from(workloadId));
    d.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([d.update(Buffer.from(body, "base64url")), d.final()]).toString("utf8");
  }
}

/** Stores a workload's provider key, sealed (replacing the one it had). */
export async function putSecret(db: Db, box: SecretBox, workloadId: string, plain: string): Promise<void> {
  const row = { workloadId, sealed: box.seal(workloadId, plain), hint: plain.slice(-4), createdAt: nowIso() };
  await db
    .insert(workloadSecrets)
    .values(row)
    .onConflictDoUpdate({
      target: workloadSecrets.workloadId,
      set: { sealed: row.sealed, hint: row.hint, createdAt: row.createdAt },
    });
}

/** A workload's provider key, opened; undefined when it has none or it cannot be opened (the key changed). */
export async function readSecret(db: Db, box: SecretBox, workloadId: string): Promise<string | undefined> {
  const [row] = await db.select().from(workloadSecrets).where(eq(workloadSecrets.workloadId, workloadId));
  if (!row) return undefined;
  try {
    return box.open(workloadId, row.sealed);
  } catch {
    return undefined;
  }
}
