import { existsSync, readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import type { Config } from "./config";
import { openConfiguredStore } from "./db/open";
import { sessions } from "./db/schema";
import { dataPaths, ensureDataDir } from "./datadir";
import { sha256 } from "./ids";
import { startServer } from "./server";

/** Chromium-family browsers tried for the app window, in order. */
const BROWSERS = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "microsoft-edge", "brave-browser", "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome", "/Applications/Chromium.app/Contents/MacOS/Chromium"];

/** The URL of a server already running on this data dir, if it answers. */
export async function runningServer(dataDir: string): Promise<string | undefined> {
  const holder = dataPaths(dataDir).pid;
  if (!existsSync(holder)) return undefined;
  try {
    const info = JSON.parse(readFileSync(holder, "utf8")).info as string;
    if (!/^http:\/\//.test(info)) return undefined;
    const r = await fetch(`${info}/healthz`, { signal: AbortSignal.timeout(2000) });
    return r.ok ? info : undefined;
  } catch {
    return undefined;
  }
}

/** A one-time sign-in code (valid 2 minutes), so the window opens signed in without showing the token. */
export async function loginCode(config: { dataDir: string; databaseUrl?: string }): Promise<string> {
  const code = randomBytes(24).toString("base64url");
  const store = await openConfiguredStore(config);
  try {
    const now = Date.now();
    await store.db.insert(sessions).values({ hash: sha256(`login:${code}`), createdAt: new Date(now).toISOString(), expiresAt: new Date(now + 120_000).toISOString() });
  } finally {
    await store.close();
  }
  return code;
}

/** The browser command for a chromeless app window of `url`, or the system's default opener. */
export function browserCommand(url: string, env: Record<string, string | undefined> = process.env): string[] {
  const chosen = env.INFERD_BROWSER || BROWSERS.find((b) => (b.startsWith("/") ? existsSync(b) : Bun.which(b)));
  const extra = (env.INFERD_BROWSER_ARGS ?? "").split(" ").filter(Boolean);
  if (chosen) return [chosen, `--app=${url}`, "--new-window", "--window-size=1280,800", ...extra];
  if (process.platform === "darwin") return ["open", url];
  if (process.platform === "win32") return ["cmd", "/c", "start", "", url];
  return ["xdg-open", url];
}

/**
 * `inferd desktop`: starts the server unless one already runs on this data dir, then opens the
 * dashboard, signed in, in a chromeless window of an installed Chromium-family browser (falling back
 * to the default browser). The server keeps running while the window is open.
 */
export async function desktop(config: Config, out: (s: string) => void): Promise<void> {
  ensureDataDir(config.dataDir);
  let url = await runningServer(config.dataDir);
  let stop: (() => Promise<void>) | undefined;
  if (!url) {
    const running = await startServer(config, out);
    url = running.url;
    stop = running.stop;
  }
  const target = `${url}/login?code=${await loginCode(config)}`;
  const cmd = browserCommand(target);
  out(`opening the dashboard: ${cmd[0]}`);
  const browser = Bun.spawn(cmd, { stdout: "ignore", stderr: "ignore", stdin: "ignore" });
  const code = await browser.exited;
  if (stop && cmd[0] !== "xdg-open" && cmd[0] !== "open" && cmd[0] !== "cmd") {
    out(`the window was closed (exit ${code}); stopping inferd`);
    await stop();
    process.exit(0);
  }
}
