/** Opening the store the settings name, for `serve` and the CLI alike, with a damaged SQLite file told apart. */
import { existsSync } from "node:fs";
import { dataPaths } from "../datadir";
import { isPostgresUrl, openPgStore, openStore, type Store } from "../db";
import { asDamaged, assertStoreHeader } from "./check";

/** Opens the SQLite store file; a damaged one (bad header, truncated, or SQLite finding corruption while migrating) throws StoreDamaged naming the last good backup. */
export function openStoreFile(path: string): Store {
  if (existsSync(path)) assertStoreHeader(path);
  try {
    return openStore(path);
  } catch (e) {
    throw asDamaged(path, e);
  }
}

/** The store the settings name: the PostgreSQL database of `--database-url`, else the data dir's SQLite file. */
export function openConfiguredStore(config: { dataDir: string; databaseUrl?: string }): Promise<Store> {
  if (config.databaseUrl !== undefined && !isPostgresUrl(config.databaseUrl)) {
    throw new Error(
      `--database-url must be a postgres:// URL (got "${config.databaseUrl.split("://")[0]}://…"); leave it unset for the embedded store`,
    );
  }
  return config.databaseUrl
    ? openPgStore(config.databaseUrl)
    : Promise.resolve(openStoreFile(dataPaths(config.dataDir).db));
}
