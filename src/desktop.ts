import { existsSync } from "node:fs";
import { randomBytes } from "node:crypto";
import type { Config } from "./config";
import { openConfiguredStore } from "./store/open";
import { storeLoginCode } from "./auth/service";
import { ensureDataDir, runningServer } from "./datadir";
import { startServer } from "./server";

/** Chromium-family browsers tried for the app window, in order. */
const BROWSERS = [
  "chromium",
  "chromium-browser",
  "google-chrome",
  "google-chrome-stable",
  "microsoft-edge",
  "brave-browser",
  "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
  "/Applications/Chromium.app/Contents/MacOS/Chromium",
];

/** A one-time sign-in code (valid 2 minutes), so the window opens signed in without showing the token. */
export async function loginCode(config: { dataDir: string; databaseUrl?: string }): Promise<string> {
  const code = randomBytes(24).toString("base64url");
  const store = await openConfiguredStore(config);
  try {
    await storeLoginCode(store.db, code);
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

/** Commands that hand the URL to the system's default browser and return at once. */
const OPENERS = ["xdg-open", "open", "cmd"];

/** Whether this Linux session has no graphical display for a window (neither X11 nor Wayland). */
export const noDisplay = (env: Record<string, string | undefined>) =>
  process.platform === "linux" && !env.DISPLAY && !env.WAYLAND_DISPLAY;

/** The last lines a child process wrote to a stream (at most `keep`), read until it ends. */
async function lastLines(stream: ReadableStream<Uint8Array>, keep = 12): Promise<string[]> {
  const lines: string[] = [];
  let part = "";
  const decoder = new TextDecoder();
  for await (const chunk of stream) {
    const text = part + decoder.decode(chunk, { stream: true });
    const split = text.split("\n");
    part = split.pop()!;
    lines.push(...split.filter((l) => l.trim()));
    lines.splice(0, Math.max(0, lines.length - keep));
  }
  return [...lines, part].filter((l) => l.trim()).slice(-keep);
}

/**
 * Runs the browser command to its end: its exit code and the last lines it wrote to stderr (its
 * own error when it could not open a window), or the reason it could not be started at all.
 */
async function runBrowser(
  cmd: string[],
  env: Record<string, string | undefined>,
): Promise<{ code: number; stderr: string[] }> {
  let child;
  try {
    child = Bun.spawn(cmd, { stdout: "ignore", stderr: "pipe", stdin: "ignore", env });
  } catch (e) {
    return { code: 127, stderr: [`cannot start ${cmd[0]}: ${(e as Error).message}`] };
  }
  const [code, stderr] = await Promise.all([child.exited, lastLines(child.stderr)]);
  return { code, stderr };
}

/**
 * `inferd desktop`: starts the server unless one already runs on this data dir, then opens the
 * dashboard, signed in, in a chromeless window of an installed Chromium-family browser (falling back
 * to the default browser). The server keeps running while the window is open. When the window cannot
 * open (no display, a browser that fails) it prints the browser's own error, stops the server it
 * started and returns 1; it never waits on a window that is not there.
 */
export async function desktop(
  config: Config,
  out: (s: string) => void,
  err: (s: string) => void,
  env: Record<string, string | undefined> = process.env,
): Promise<number | "running"> {
  ensureDataDir(config.dataDir);
  let url = await runningServer(config.dataDir);
  let stop: (() => Promise<void>) | undefined;
  if (!url) {
    const running = await startServer(config, out);
    url = running.url;
    stop = running.stop;
  }
  const target = `${url}/login?code=${await loginCode(config)}`;
  const cmd = browserCommand(target, env);
  const opener = OPENERS.includes(cmd[0]);
  const headless = noDisplay(env);
  const instead = `open ${url}/ in a browser on a machine with a display and sign in with the admin token${stop ? " (this server stops now; run inferd serve to keep it)" : ""}`;
  const fail = async (lines: string[]) => {
    for (const line of lines) err(`inferd desktop: ${line}`);
    await stop?.();
    return 1;
  };
  if (headless && opener)
    return fail([
      `no display to open a window on: DISPLAY and WAYLAND_DISPLAY are unset and no Chromium-family browser was found`,
      instead,
    ]);
  out(`opening the dashboard: ${cmd[0]}`);
  const { code, stderr } = await runBrowser(cmd, env);
  if (code !== 0) {
    const why = headless
      ? "DISPLAY and WAYLAND_DISPLAY are unset, so there is no display for the window"
      : "the window could not be opened";
    return fail([
      `${cmd[0]} exited with code ${code}; ${why}. Its output:`,
      ...(stderr.length ? stderr.map((l) => `  ${l}`) : ["  (nothing)"]),
      instead,
    ]);
  }
  if (!stop) return 0;
  if (opener) return "running";
  out("the window was closed; stopping inferd");
  await stop();
  return 0;
}
