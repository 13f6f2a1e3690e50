import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { join } from "node:path";
import { X509Certificate } from "node:crypto";
import type { Config } from "../config";
import { lockHolder } from "../datadir";
import { probeGpus, realExec, type Exec } from "../../agent/gpu";
import { check, type Check } from "./report";

/** The host's side effects `inferd doctor` uses, injected in tests. */
export interface HostDeps {
  exec: Exec;
  which: (cmd: string) => string | null;
  now: () => number;
}

/** Runtimes looked for on PATH; the built-in llama.cpp runtime needs none of them. */
const RUNTIMES = ["vllm", "llama-server", "ollama", "uv", "python3"];

/** GPUs as nvidia-smi or rocm-smi report them; none is a warning (llama.cpp and Ollama still run on CPU). */
async function gpuCheck(exec: Exec): Promise<Check> {
  const gpus = await probeGpus(exec);
  if (gpus.length === 0)
    return check(
      "gpus",
      "warn",
      "no GPU found by nvidia-smi or rocm-smi",
      "vLLM and SGLang workloads need one; llama.cpp and Ollama run on the CPU",
    );
  return check(
    "gpus",
    "ok",
    gpus.map((g) => `${g.index}: ${g.name} (${Math.round(g.memory_total_mib / 1024)} GiB)`).join(", "),
  );
}

/** Which runtimes are on PATH; pinned vLLM/SGLang versions need uv or python3 to install. */
function runtimeCheck(which: HostDeps["which"]): Check {
  const found = RUNTIMES.filter((r) => which(r));
  const missing = RUNTIMES.filter((r) => !found.includes(r));
  const detail = `found: ${found.join(", ") || "none"}${missing.length ? `; missing: ${missing.join(", ")}` : ""}; the built-in llama.cpp runtime is always there`;
  if (!found.includes("uv") && !found.includes("python3"))
    return check("runtimes", "warn", detail, "install uv or python3 for vllm_version / sglang_version installs");
  return check("runtimes", "ok", detail);
}

/** Whether a TCP port can be listened on: "free", "busy", or the error's code (e.g. EACCES). */
function portState(host: string, port: number): Promise<string> {
  return new Promise((done) => {
    const server = createServer();
    server.once("error", (e: NodeJS.ErrnoException) => done(e.code === "EADDRINUSE" ? "busy" : (e.code ?? e.message)));
    server.listen({ host, port, exclusive: true }, () => server.close(() => done("free")));
  });
}

/** The SHA-256 fingerprint of the certificate a TLS listener presents, or null when none answers. */
function peerFingerprint(host: string, port: number): Promise<string | null> {
  return new Promise((done) => {
    const socket = tlsConnect(
      { host: host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host, port, rejectUnauthorized: false },
      () => {
        done(socket.getPeerCertificate().fingerprint256 ?? null);
        socket.destroy();
      },
    );
    socket.setTimeout(3000, () => {
      socket.destroy();
      done(null);
    });
    socket.once("error", () => done(null));
  });
}

/** One listener's port: free, or held by this data dir's own server (`ours` says so), or taken by something else (fail). */
async function portCheck(
  name: string,
  flag: string,
  host: string,
  port: number,
  ours: () => Promise<string | undefined>,
): Promise<Check> {
  if (port === 0) return check(name, "ok", "0: a free port is picked at start");
  const state = await portState(host, port);
  if (state === "free") return check(name, "ok", `${host}:${port} is free`);
  if (state !== "busy")
    return check(name, "fail", `cannot listen on ${host}:${port} (${state})`, `pick another port with ${flag}`);
  const who = await ours();
  return who
    ? check(name, "ok", `${host}:${port} is held by ${who}`)
    : check(name, "fail", `${host}:${port} is in use by another program`, `stop it or pick another port with ${flag}`);
}

/** The host certificate's file: `--tls-cert`, else the one generated in the data dir. */
const certFile = (config: Config) => config.tlsCert ?? join(config.dataDir, "tls", "host-cert.pem");

/** The host certificate's expiry: under 30 days a warning, expired a failure. */
function certCheck(config: Config, now: number): Check {
  const file = certFile(config);
  if (!existsSync(file))
    return check("certificate", "ok", "none yet: serve generates one (valid 10 years) at first start");
  let validTo: number;
  try {
    validTo = Date.parse(new X509Certificate(readFileSync(file)).validTo);
  } catch (e) {
    return check(
      "certificate",
      "fail",
      `${file} cannot be read: ${(e as Error).message}`,
      "replace it (--tls-cert/--tls-key) or remove it to have a new one generated",
    );
  }
  const days = Math.floor((validTo - now) / 86_400_000);
  const detail = `${file} valid until ${new Date(validTo).toISOString().slice(0, 10)}`;
  const renew = config.tlsCert
    ? "renew it (--tls-cert/--tls-key)"
    : `remove ${join(config.dataDir, "tls")} to have a new one generated (agents must join again)`;
  if (validTo <= now) return check("certificate", "fail", `${detail}: expired`, renew);
  if (days < 30) return check("certificate", "warn", `${detail}: ${days} days left`, renew);
  return check("certificate", "ok", `${detail} (${days} days left)`);
}

/**
 * The host's checks for `inferd doctor`: GPUs, runtimes on PATH, the HTTP and TLS ports, the
 * certificate. While a server runs on the data dir, the ports checked are the ones it recorded at
 * start (also when it was started with `--port 0` or other flags than doctor's); else the ones
 * `inferd serve` would take with these settings.
 */
export async function hostChecks(config: Config, deps: Partial<HostDeps> = {}): Promise<Check[]> {
  const holder = existsSync(config.dataDir) ? lockHolder(config.dataDir) : undefined;
  const who = holder && `this data dir's server (pid ${holder.pid ?? "?"}${holder.info ? `, ${holder.info}` : ""})`;
  const ownUrl = holder?.info && /^https?:\/\//.test(holder.info) ? new URL(holder.info) : undefined;
  const live = holder?.listen;
  const host = live?.host ?? config.host;
  const httpPort = live?.http ?? config.port;
  const tlsPort = live?.tls ?? config.tlsPort ?? (config.port === 0 ? 0 : config.port + 1);
  const sameCert = async () =>
    existsSync(certFile(config)) &&
    (await peerFingerprint(host, tlsPort)) === new X509Certificate(readFileSync(certFile(config))).fingerprint256;
  return [
    await gpuCheck(deps.exec ?? realExec),
    runtimeCheck(deps.which ?? ((cmd) => Bun.which(cmd))),
    await portCheck("http port", "--port", host, httpPort, async () =>
      live || ownUrl?.port === String(httpPort) ? who : undefined,
    ),
    await portCheck("tls port", "--tls-port", host, tlsPort, async () =>
      who && (await sameCert()) ? `${who}: same certificate` : undefined,
    ),
    certCheck(config, (deps.now ?? Date.now)()),
  ];
}
