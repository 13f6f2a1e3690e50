/** Opening the store the settings name, for `serve` and the CLI alike. */
import { dataPaths } from "../datadir";
import { isPostgresUrl, openPgStore, openStore, type Store } from "./index";

/** The store the settings name: the PostgreSQL database of `--database-url`, else the data dir's SQLite file. */
export function openConfiguredStore(config: { dataDir: string; databaseUrl?: string }): Promise<Store> {
  if (config.databaseUrl !== undefined && !isPostgresUrl(config.databaseUrl)) {
    throw new Error(`--database-url must be a postgres:// URL (got "${config.databaseUrl.split("://")[0]}://…"); leave it unset for the embedded store`);
  }
  return config.databaseUrl ? openPgStore(config.databaseUrl) : Promise.resolve(openStore(dataPaths(config.dataDir).db));
}
