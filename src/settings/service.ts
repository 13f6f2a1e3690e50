/**
 * Settings changed while serving: the `settings` table holds a value for some of the settings of
 * src/config.ts that are marked `runtime` (the dashboard's Settings page, `PATCH /admin/settings`).
 * A stored value beats the flag, environment and default; deleting its row ("Reset") returns to
 * them. `live` is the config the running parts read: the values given at start, with the runtime
 * settings read through to what is stored now. In a cluster a change is signalled to every host,
 * which reads the table again (and every 30 s anyway, in case a signal was lost).
 */
import type { SQL } from "bun";
import { eq } from "drizzle-orm";
import type { Db } from "../db";
import { settings } from "../db/schema";
import { onSignal, signal } from "../db/notify";
import {
  ConfigError,
  convertSetting,
  settingOf,
  settingSources,
  SETTINGS,
  type Config,
  type SettingSource,
} from "../config";
import { AppError, validation } from "../errors";
import { actorNow, audit } from "../audit/service";
import { log, setLogLevel } from "../log";
import { commandHint } from "../invocation";

/** The channel hosts tell each other on that a setting changed. */
export const SETTINGS_SIGNAL = "inferd_settings";

/** How often a cluster host reads the stored settings again without a signal. */
const POLL_MS = 30_000;

/** A setting's key in SETTINGS. */
type Key = keyof Config;

/** The keys of the settings that may change while serving. */
export const RUNTIME_KEYS = (Object.keys(SETTINGS) as Key[]).filter((k) => settingOf(k)?.runtime);

/** One setting as `GET /admin/settings` lists it. */
export interface SettingView {
  key: string;
  flag: string;
  env: string;
  kind: string;
  /** The value in force; a secret's is "set" or "unset". */
  value: unknown;
  default: unknown;
  source: SettingSource;
  description: string;
  /** Whether it can change while serving; otherwise it needs a restart with its flag. */
  runtime: boolean;
  secret: boolean;
  /** When and by whom it was changed on the dashboard (`source: "dashboard"`). */
  updated_at: string | null;
  updated_by: string | null;
}

/** A value held in the table, converted as its flag's would be. */
interface Stored {
  value: unknown;
  updatedAt: string;
  updatedBy: string | null;
}

/** A secret's value as views and the audit log show it. */
const shown = (secret: boolean | undefined, v: unknown) => (secret ? (v ? "set" : "unset") : (v ?? null));

/** The settings in force on this host: what was given at start, and what is stored. */
export class Settings {
  /** The config to hand to the running parts: runtime settings read through to the stored value. */
  readonly live: Config;
  private stored = new Map<Key, Stored>();
  /** What `follow` asked to hear, run after each reading of the store. */
  private followers: (() => void)[] = [];
  private readonly sources: Record<Key, SettingSource>;

  constructor(
    private db: Db,
    private base: Config,
    private pg?: SQL,
  ) {
    this.sources = settingSources(base);
    const live = { ...base };
    for (const key of RUNTIME_KEYS)
      Object.defineProperty(live, key, { enumerable: true, get: () => this.valueOf(key) });
    this.live = live;
    // The log level is a setting like any other the running parts follow.
    this.follow("logLevel", setLogLevel);
  }

  /**
   * Calls `fn` with a setting's value in force now, and again after each reading of the store that
   * changes it (compared as JSON: a list read again is a new array with the same items).
   */
  follow<K extends Key>(key: K, fn: (value: Config[K]) => void): void {
    let seen = JSON.stringify(this.live[key]);
    fn(this.live[key]);
    this.followers.push(() => {
      const now = JSON.stringify(this.live[key]);
      if (now === seen) return;
      seen = now;
      fn(this.live[key]);
    });
  }

  /** A setting's value in force. */
  private valueOf(key: Key): unknown {
    const s = this.stored.get(key);
    return s ? s.value : this.base[key];
  }

  /** Reads the stored values (at start, after a change, on a signal); a stored value that no longer converts is ignored with a warning. */
  async load(): Promise<void> {
    const next = new Map<Key, Stored>();
    for (const row of await this.db.select().from(settings)) {
      const s = settingOf(row.key);
      if (!s?.runtime) continue;
      try {
        next.set(s.key, {
          value: convertSetting(s.key, JSON.parse(row.value)),
          updatedAt: row.updatedAt,
          updatedBy: row.updatedBy,
        });
      } catch (e) {
        log.warn(
          `the stored value of ${s.flag} is ignored (${(e as Error).message}); the flag, environment or default is in force`,
        );
      }
    }
    this.stored = next;
    for (const f of this.followers) f();
  }

  /** Every setting with its value in force and where it comes from. */
  view(): SettingView[] {
    return (Object.keys(SETTINGS) as Key[]).map((key) => {
      const s = settingOf(key)!;
      const stored = this.stored.get(key);
      return {
        key,
        flag: s.flag,
        env: s.env,
        kind: s.kind,
        value: shown(s.secret, this.valueOf(key)),
        default: shown(s.secret, s.default),
        source: stored ? "dashboard" : this.sources[key],
        description: s.description,
        runtime: !!s.runtime,
        secret: !!s.secret,
        updated_at: stored?.updatedAt ?? null,
        updated_by: stored?.updatedBy ?? null,
      };
    });
  }

  /**
   * Changes settings: `{key: value}` stores a value (converted and checked as its flag's), `{key:
   * null}` resets it to the flag, environment or default. All are checked before any is stored; each
   * change is audited; every host applies it at once.
   */
  async change(patch: Record<string, unknown>): Promise<SettingView[]> {
    const changes = Object.entries(patch).map(([name, value]) => {
      const s = settingOf(name);
      if (!s) throw validation(name, `there is no setting "${name}" (GET /admin/settings lists them)`);
      if (!s.runtime)
        throw new AppError(
          400,
          "restart_required",
          `${name}: ${s.flag} cannot change while inferd serves; restart it with ${commandHint(`serve ${s.flag} …`)} (or set ${s.env})`,
          {},
          name,
        );
      try {
        return { s, value: value === null ? null : convertSetting(s.key, value) };
      } catch (e) {
        if (e instanceof ConfigError) throw validation(name, e.message);
        throw e;
      }
    });
    const by = actorNow().label;
    for (const { s, value } of changes) {
      const before = shown(s.secret, this.valueOf(s.key));
      if (value === null) await this.db.delete(settings).where(eq(settings.key, s.key));
      else {
        const row = { value: JSON.stringify(value), updatedAt: new Date().toISOString(), updatedBy: by };
        await this.db
          .insert(settings)
          .values({ key: s.key, ...row })
          .onConflictDoUpdate({ target: settings.key, set: row });
      }
      const after = shown(s.secret, value === null ? this.base[s.key] : value);
      await audit(
        this.db,
        value === null ? "setting.reset" : "setting.change",
        { type: "setting", id: s.key, label: s.flag },
        { value: { from: before, to: after } },
      );
    }
    await this.load();
    for (const { s, value } of changes)
      log.info(
        `setting ${s.flag} ${value === null ? "reset to the flag, environment or default" : "changed"} by ${by}: now ${JSON.stringify(shown(s.secret, this.valueOf(s.key)))}`,
      );
    await signal(this.db, this.pg, SETTINGS_SIGNAL, changes.map((c) => c.s.key).join(","));
    return this.view();
  }

  /** In a cluster: reads the settings again when another host changes one, and every 30 s. Returns a stop. */
  async watch(): Promise<() => Promise<void>> {
    if (!this.pg) return async () => {};
    const reload = () => void this.load().catch((e) => log.warn("could not read the stored settings", e));
    const unlisten = await onSignal(this.pg, SETTINGS_SIGNAL, reload);
    const timer = setInterval(reload, POLL_MS);
    return async () => {
      clearInterval(timer);
      await unlisten();
    };
  }
}
