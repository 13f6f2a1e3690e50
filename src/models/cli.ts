import { existsSync, readFileSync } from "node:fs";
import type { Config } from "../config";
import { openConfiguredStore } from "../store/open";
import { dataPaths, ensureDataDir } from "../datadir";
import { runningServer } from "../datadir";
import type { TransferProgress } from "../../agent/protocol";
import { gib } from "./fit";
import { aligned } from "../text-table";
import { ModelManager } from "./manager";
import type { StoreModel } from "./tenants";

/** Bytes as a person reads them. */
const size = (b: number) => (b >= 1073741824 ? gib(b) : `${(b / 1048576).toFixed(1)} MiB`);

/**
 * One progress line: a bar, percent, bytes, rate and time left.
 * @example progressLine({bytes_done: 5, bytes_total: 10, percent: 50, rate_bps: 1e6, eta_s: 5}) // → "[==========>          ]  50%  …"
 */
export function progressLine(p: TransferProgress, width = 20): string {
  const filled = Math.min(width, Math.floor((p.percent / 100) * width));
  const bar = `[${"=".repeat(filled)}${filled < width ? ">" : ""}${" ".repeat(Math.max(0, width - filled - 1))}]`;
  const eta =
    p.eta_s === null ? "" : `  ETA ${p.eta_s < 90 ? `${Math.ceil(p.eta_s)}s` : `${Math.ceil(p.eta_s / 60)}m`}`;
  return `${bar} ${String(p.percent).padStart(3)}%  ${size(p.bytes_done)}/${size(p.bytes_total)}  ${(p.rate_bps / 1e6).toFixed(1)} MB/s${eta}${p.file ? `  ${p.file}` : ""}`;
}

/** Draws progress on a terminal (one line redrawn) or as occasional lines when not a TTY. */
function progressPrinter(err: (s: string) => void): (p: TransferProgress) => void {
  let lastLine = 0;
  let lastPct = -1;
  return (p) => {
    if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${progressLine(p)}`);
    else if (p.percent >= lastPct + 10 || Date.now() - lastLine > 5000) {
      lastLine = Date.now();
      lastPct = p.percent;
      err(progressLine(p));
    }
  };
}

/** The admin token of a data dir's server: the setting, else the saved file. */
function adminTokenOf(config: Config): string | undefined {
  const file = dataPaths(config.dataDir).adminToken;
  return config.adminToken ?? (existsSync(file) ? readFileSync(file, "utf8").trim() : undefined);
}

/** Pulls through the running server, following its progress stream. */
async function pullViaServer(
  url: string,
  token: string,
  source: string,
  show: (p: TransferProgress) => void,
): Promise<StoreModel> {
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const r = await fetch(`${url}/admin/models`, { method: "POST", headers, body: JSON.stringify({ source }) });
  const body = (await r.json()) as StoreModel & { error?: { message: string } };
  if (!r.ok) throw new Error(body.error?.message ?? `HTTP ${r.status}`);
  if (body.state !== "downloading") return body;
  const events = await fetch(`${url}/admin/models/${body.id}/progress`, { headers });
  const dec = new TextDecoder();
  let buf = "";
  for await (const chunk of events.body as unknown as AsyncIterable<Uint8Array>) {
    buf += dec.decode(chunk, { stream: true });
    for (let i; (i = buf.indexOf("\n\n")) >= 0; buf = buf.slice(i + 2)) {
      const data = buf
        .slice(0, i)
        .split("\n")
        .find((l) => l.startsWith("data: "));
      const ev = data ? (JSON.parse(data.slice(6)) as { progress: TransferProgress | null }) : null;
      if (ev?.progress) show(ev.progress);
    }
  }
  return (await (await fetch(`${url}/admin/models/${body.id}`, { headers })).json()) as StoreModel;
}

/** Pulls in this process (no server runs on the data dir). */
async function pullHere(config: Config, source: string, show: (p: TransferProgress) => void): Promise<StoreModel> {
  const store = await openConfiguredStore(config);
  const models = new ModelManager(store.db, {
    dataDir: config.dataDir,
    env: process.env,
    concurrency: config.modelDownloadConcurrency,
  });
  try {
    const v = await models.pull(source);
    const stop = models.subscribe(v.id, (m) => m.progress && show(m.progress));
    await models.wait(v.id);
    stop();
    return await models.view(v.id);
  } finally {
    await models.stop();
    await store.close();
  }
}

/**
 * Whom a model was pulled for and, unused, when the collector removes it.
 * @example tenantText(m, now) // → "pulled for acme, removed in 23 h unless a workload uses it"
 */
export function tenantText(m: Pick<StoreModel, "pulled_for" | "removes_at">, now = Date.now()): string {
  if (!m.pulled_for) return "";
  const whom = `pulled for ${m.pulled_for.project_slug ?? "a deleted project"}`;
  if (!m.removes_at) return whom;
  const hours = Math.max(0, Math.ceil((Date.parse(m.removes_at) - now) / 3_600_000));
  return `${whom}, removed ${hours ? `in ${hours} h` : "within the hour"} unless a workload uses it`;
}

/** The model table for `inferd model list`. */
function listLines(list: StoreModel[]): string[] {
  if (list.length === 0) return ["(no models; pull one with: inferd model pull owner/repo:Q4_K_M)"];
  return list.map((m) => {
    const state = m.state === "downloading" && m.progress ? `downloading ${m.progress.percent}%` : m.state;
    const shape = m.info
      ? [m.info.architecture, m.info.quantization, m.info.context_length && `ctx ${m.info.context_length}`]
          .filter(Boolean)
          .join(", ")
      : "";
    const needs = m.estimate ? `needs ~${gib(m.estimate.total_bytes)}` : "";
    const users = m.used_by.length ? `used by ${m.used_by.map((w) => `${w.project_slug}/${w.slug}`).join(", ")}` : "";
    return [
      m.id,
      state.padEnd(16),
      size(m.size_bytes).padStart(9),
      m.source,
      shape && `(${shape})`,
      needs,
      users,
      tenantText(m),
    ]
      .filter(Boolean)
      .join("  ");
  });
}

/** What a model is and where it stands, for `inferd model show`: a field per line, then its files. */
function showText(m: StoreModel, now = Date.now()): string {
  const status =
    m.state === "downloading" && m.progress
      ? `downloading ${m.progress.percent}%`
      : m.state === "failed" && m.reason
        ? `failed: ${m.reason}`
        : m.state;
  const quants = [
    ...new Set(
      m.files
        .map((f) => /[-.]((?:I?Q\d\w*)|F16|F32|BF16)(?:-\d+-of-\d+)?\.gguf$/i.exec(f.path)?.[1]?.toUpperCase())
        .filter(Boolean),
    ),
  ];
  const shape = m.info
    ? [
        m.info.format,
        m.info.architecture,
        m.info.parameters &&
          (m.info.parameters < 1e9
            ? `${(m.info.parameters / 1e6).toFixed(1)} M params`
            : `${(m.info.parameters / 1e9).toFixed(1)} B params`),
        m.info.context_length && `ctx ${m.info.context_length}`,
        m.info.layers && `${m.info.layers} layers`,
      ]
        .filter(Boolean)
        .join(", ")
    : "";
  const fields: [string, string | null | undefined][] = [
    ["id", m.id],
    ["name", m.info?.name ?? m.repo ?? m.source],
    ["source", m.source],
    ["kind", m.kind],
    ["status", status],
    ["size", size(m.size_bytes)],
    ["files", `${m.files.length}${quants.length ? ` (${quants.join(", ")})` : ""}`],
    ["quantization", m.info?.quantization],
    ["shape", shape],
    [
      "needs",
      m.estimate &&
        `~${size(m.estimate.total_bytes)} at ctx ${m.estimate.context} (weights ${size(m.estimate.weights_bytes)}, KV cache ${size(m.estimate.kv_bytes)}, overhead ${size(m.estimate.overhead_bytes)})`,
    ],
    ["used by", m.used_by.length ? m.used_by.map((w) => `${w.project_slug}/${w.slug}`).join(", ") : "no workload"],
    ["pulled for", tenantText(m, now) || "the admin (kept until removed)"],
    ["revision", m.revision],
    ["entry", m.entry],
    ["pulled", m.created_at],
    ["last used", m.last_used_at ?? "never"],
  ];
  const head = aligned(fields.filter((f): f is [string, string] => !!f[1]).map(([k, v]) => [k, v]));
  if (m.files.length === 0) return head;
  return `${head}\n\n${aligned([["file", "size", "sha256"], ...m.files.map((f) => [f.path, size(f.size), f.sha256 ?? "-"])])}`;
}

/**
 * `inferd model pull|list|show|rm`: through the running server when one serves the data dir (so
 * its dashboard sees the same pull), else directly on the store. Returns the exit code.
 */
export async function modelCommand(
  config: Config,
  args: string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const [verb, target, ...rest] = args;
  const json = rest.includes("--json") || target === "--json";
  ensureDataDir(config.dataDir);
  const url = await runningServer(config.dataDir);
  const token = adminTokenOf(config);
  const api = async (path: string, method = "GET") => {
    const r = await fetch(`${url}${path}`, { method, headers: { authorization: `Bearer ${token}` } });
    const body = await r.json();
    if (!r.ok) throw new Error((body as { error: { message: string } }).error.message);
    return body;
  };
  const local = async <T>(fn: (m: ModelManager) => T | Promise<T>): Promise<T> => {
    const store = await openConfiguredStore(config);
    try {
      return await fn(
        new ModelManager(store.db, {
          dataDir: config.dataDir,
          env: process.env,
          gcAfterHours: config.modelGcAfterHours,
        }),
      );
    } finally {
      await store.close();
    }
  };
  // A model id has no ':' or '/'; anything else names a source (`owner/repo` with or without `hf:`).
  const idOf = async (m: ModelManager) => (/[:/]/.test(target) ? ((await m.find(target))?.id ?? target) : target);
  if (verb === "pull" && target && target !== "--json") {
    const show = progressPrinter(err);
    const v = url && token ? await pullViaServer(url, token, target, show) : await pullHere(config, target, show);
    if (process.stderr.isTTY) process.stderr.write("\n");
    if (v.state !== "ready") throw new Error(`pull of ${target} ${v.state}: ${v.reason ?? ""}`);
    out(json ? JSON.stringify(v) : `${v.source} is ready: ${v.entry} (${size(v.size_bytes)})`);
    return 0;
  }
  if (verb === "list") {
    const list = (url && token ? await api("/admin/models") : await local((m) => m.list())) as StoreModel[];
    out(json ? JSON.stringify(list) : listLines(list).join("\n"));
    return 0;
  }
  if ((verb === "show" || verb === "rm") && target && target !== "--json") {
    const id = await local(idOf);
    const v =
      url && token
        ? await api(`/admin/models/${id}`, verb === "rm" ? "DELETE" : "GET")
        : await local((m) => (verb === "rm" ? m.remove(id) : m.view(id)));
    out(json ? JSON.stringify(v) : verb === "show" ? showText(v as StoreModel) : `removed ${(v as StoreModel).source}`);
    return 0;
  }
  err(
    "usage: inferd model pull <source> | list | show <id|source> | rm <id|source> [--json]\n  sources: owner/repo or hf:owner/repo, owner/repo:Q4_K_M, hf:owner/repo/path/file.gguf, https://…/x.gguf, /a/local/file.gguf",
  );
  return 2;
}
