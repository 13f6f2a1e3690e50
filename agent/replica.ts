import { mkdirSync, realpathSync, rmSync } from "node:fs";
import { join } from "node:path";
import { checkLaunch, checkNodes } from "./launch-policy";
import { memberPlan, memberRole, missingFor, rayHead, type GroupWait } from "./runtimes/group";
import { resolveModels, type ModelPuller } from "./replica-models";
import { LogFile } from "./logfile";
import type { LogRing } from "./ring";
import { runPrep } from "./prep";
import { Supervisor, type SupervisorOptions, type SupervisorState } from "./supervisor";
import type { GpuInfo, ReplicaReport, ReplicaSpec, ReplicaState, TransferProgress } from "./protocol";
import { engineOf } from "./engines";
import type { LaunchContext, LaunchPlan } from "./runtimes/types";
import { withoutOutput } from "./reason";
import { listenerOwnedBy } from "./listener";
import type { LlamaGpuBuilds } from "./runtimes/llama-gpu";
import { refusal, runCalls, weightsMib } from "./replica-sleep";
import { pullAdapters } from "./replica-adapters";
import type { AdapterPath } from "./engines/types";

/** What a replica needs from its agent. */
export interface ReplicaHost {
  dataDir: string;
  env: Record<string, string | undefined>;
  which(cmd: string): string | null;
  /** A free TCP port on `host` (default loopback). */
  freePort(host?: string): Promise<number>;
  builtinLlama(): { argv: string[]; env: Record<string, string> };
  /** The machine's GPUs as last probed (a launch works out its engine's capacity from them). */
  gpus?(): GpuInfo[];
  /** Gets the built-in llama.cpp runtime's GPU build for a replica and says which to load (absent: CPU/auto). */
  llamaGpu?: Pick<LlamaGpuBuilds, "prepare">;
  /**
   * Keeps a shared daemon (Ollama) running with this replica's GPUs among its own; resolves when it
   * answers health, with a line for the replica's log when the daemon answering is not inferd's.
   */
  ensureDaemon(d: NonNullable<LaunchPlan["daemon"]>, holder: string): Promise<string | undefined | void>;
  /** This replica no longer holds the shared daemon `key` (its GPUs leave the daemon's). */
  releaseDaemon?(key: string, holder: string): Promise<void>;
  report(r: ReplicaReport): void;
  /** Supervisor timing overrides (tests shorten them). */
  supervisor?: Partial<SupervisorOptions>;
  /** Pulls a model the command names into the store (progress reported, same model pulled once). */
  pullModel: ModelPuller;
}

/** How often download progress is reported (the host shows it; more often is noise). */
const PROGRESS_EVERY_MS = 500;

const toReplicaState = (s: SupervisorState): ReplicaState => (s === "restarting" ? "starting" : s);

/** The real path of a file (symlinks resolved), or null when it does not exist. */
function realpathOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

/** The model name a ready runtime serves, from its /v1/models (falling back to the workload's), and the backend it names there. */
async function servedModel(
  baseUrl: string,
  fallback: string,
  apiKey?: string,
): Promise<{ id: string; backend?: string }> {
  try {
    const r = await fetch(`${baseUrl}/v1/models`, {
      signal: AbortSignal.timeout(5000),
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
    });
    const body = (await r.json()) as { data?: { id?: string; meta?: { backend?: unknown } }[] };
    const backend = body.data?.[0]?.meta?.backend;
    return {
      id: body.data?.[0]?.id ?? fallback,
      ...(typeof backend === "string" ? { backend: backend.slice(0, 4096) } : {}),
    };
  } catch {
    return { id: fallback };
  }
}

/** Retries `ok` (a failure counts as false) every 250 ms until it is true; throws `timeout` after 60 s, returns when `signal` aborts. */
async function untilOk(timeout: string, signal: AbortSignal, ok: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!signal.aborted && !(await ok().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(timeout);
    await Bun.sleep(250);
  }
}

/** Waits `ms`; false when `signal` aborted first (or already had). */
function sleepUnless(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(true), ms);
    signal.addEventListener("abort", () => (clearTimeout(t), resolve(false)), { once: true });
  });
}

/**
 * One assignment's runtime on this machine: builds the launch plan from the backend's launcher,
 * supervises the process (or, for Ollama, the shared daemon and the model pull), and reports each
 * state change with the runtime's URL and served model once ready.
 */
export class Replica {
  private supervisor?: Supervisor;
  private plan?: LaunchPlan;
  private logFile: LogFile;
  private abort = new AbortController();
  private stopped = false;
  state: ReplicaState = "pending";
  private reason?: string;

  constructor(
    public spec: ReplicaSpec,
    readonly ring: LogRing,
    private host: ReplicaHost,
  ) {
    this.logFile = new LogFile(
      join(host.dataDir, "logs", spec.workload.project_slug, spec.workload.slug, `${spec.assignment_id}.log`),
    );
    this.workDir = join(host.dataDir, "run", spec.assignment_id);
  }

  /** The runtime's own working directory, emptied at each start: relative paths in a command lead only here. */
  private readonly workDir: string;

  /** Makes the working directory anew (owner-only), empty. */
  private freshWorkDir(): void {
    rmSync(this.workDir, { recursive: true, force: true });
    mkdirSync(this.workDir, { recursive: true, mode: 0o700 });
  }

  private lastProgressAt = 0;

  /** Progress held back within PROGRESS_EVERY_MS of the last report, and the timer that reports it. */
  private heldProgress?: TransferProgress;
  private heldProgressTimer?: ReturnType<typeof setTimeout>;

  /**
   * Reports download progress (a model pull, a runtime build), at most every PROGRESS_EVERY_MS and
   * always at the end. A report within the interval is held, not dropped: the latest goes out when the
   * interval ends, so a download that stalls shows what it got, not an older figure.
   */
  private progress(p: TransferProgress): void {
    const wait = PROGRESS_EVERY_MS - (Date.now() - this.lastProgressAt);
    if (wait > 0 && p.bytes_done < p.bytes_total) {
      this.heldProgress = p;
      if (!this.heldProgressTimer) {
        this.heldProgressTimer = setTimeout(() => {
          this.heldProgressTimer = undefined;
          const held = this.heldProgress;
          this.heldProgress = undefined;
          if (held && this.state === "downloading") this.progress(held);
        }, wait);
        this.heldProgressTimer.unref?.();
      }
      return;
    }
    clearTimeout(this.heldProgressTimer);
    this.heldProgressTimer = undefined;
    this.heldProgress = undefined;
    this.lastProgressAt = Date.now();
    void this.emit("downloading", this.reason, p);
  }

  private async emit(
    state: ReplicaState,
    reason?: string,
    progress?: TransferProgress,
    switchMs?: number,
  ): Promise<void> {
    if (this.stopped && state !== "stopped") return;
    if (state !== "sleeping" && state !== "waking") this.slept = undefined;
    this.switchMs = switchMs ?? (state === this.state ? this.switchMs : undefined);
    this.state = state;
    this.reason = reason;
    const r: ReplicaReport = {
      assignment_id: this.spec.assignment_id,
      state,
      ...(reason ? { reason } : {}),
      ...(progress ? { progress } : {}),
      ...(this.switchMs !== undefined ? { switch_ms: this.switchMs } : {}),
    };
    if (state === "sleeping" && this.slept) {
      r.sleep_level = this.slept.level;
      if (this.slept.ramMib !== undefined) r.host_ram_mib = this.slept.ramMib;
    }
    if (this.spec.group) {
      r.group_generation = this.spec.group.generation;
      if (this.groupPort && !this.stopped) r.group_port = this.groupPort;
    }
    if (this.adapters.length) {
      r.adapters = this.adapters;
      const slots = this.plan?.argv && engineOf(this.spec.workload.backend)?.lora?.slots(this.plan.argv);
      if (slots && Number.isFinite(slots)) r.lora_slots = slots;
    }
    // The runtime's slots in every state (the dashboard's "In flight" shows them from the start).
    const slots = this.spec.group?.rank ? undefined : (this.plan?.slots ?? this.slotsHint());
    if (slots) r.slots = slots;
    // A group's other members serve no requests: only the leader's URL and model matter.
    if (state === "ready" && this.plan && !this.spec.group?.rank) {
      const fallback = this.spec.workload.model_name;
      r.base_url = this.plan.baseUrl;
      if (this.plan.apiKey) r.api_key = this.plan.apiKey;
      if (this.plan.paths) r.paths = this.plan.paths;
      // A custom server has no /v1/models to ask: it serves the workload's model name.
      const served =
        this.plan.argv && !this.plan.paths
          ? await servedModel(this.plan.baseUrl, fallback, this.plan.apiKey)
          : { id: fallback };
      r.served_model = served.id;
      if (served.backend) r.backend = served.backend;
      if (this.stopped || this.state !== "ready") return;
    }
    this.host.report(r);
  }

  private hint?: number;

  /**
   * The slots the runtime will have, before its launch plan is made (while the model downloads):
   * the backend's launcher run on the spec without starting anything (launchers are pure).
   */
  private slotsHint(): number | undefined {
    if (this.hint !== undefined) return this.hint || undefined;
    try {
      const dry = engineOf(this.spec.workload.backend)?.launch({
        spec: this.spec,
        freePort: 1,
        dataDir: this.host.dataDir,
        env: this.host.env,
        gpus: (this.host.gpus?.() ?? []).filter((g) => this.spec.gpu_indices.includes(g.index)),
        which: this.host.which,
        builtinLlama: () => ({ argv: ["llama-runner"], env: {} }),
      });
      this.hint = dry?.slots ?? 0;
    } catch {
      this.hint = 0;
    }
    return this.hint || undefined;
  }

  /** What the launch plan was built from (a group member's plan is built from it again). */
  private ctx?: LaunchContext;

  private async makePlan(spec: ReplicaSpec): Promise<LaunchPlan> {
    const engine = engineOf(spec.workload.backend);
    if (!engine) throw new Error(`unknown backend "${spec.workload.backend}"`);
    const ctx: LaunchContext = {
      spec,
      freePort: await this.host.freePort(),
      dataDir: this.host.dataDir,
      env: this.host.env,
      gpus: (this.host.gpus?.() ?? []).filter((g) => spec.gpu_indices.includes(g.index)),
      which: this.host.which,
      builtinLlama: this.host.builtinLlama,
    };
    const plan = engine.launch(ctx);
    // With sleep_mode the runtime is started so it can sleep (the engine's flags and environment).
    if (spec.sleep_mode && engine.sleep && plan.argv) {
      const enabled = engine.sleep.enable(plan.argv, plan.env ?? {});
      plan.argv = enabled.args;
      plan.env = enabled.env;
    }
    // With adapters, the runtime is started with its engine's LoRA flags (and, for llama.cpp, the adapters).
    if (spec.lora && engine.lora && plan.argv) {
      const enabled = engine.lora.enable(plan.argv, plan.env ?? {}, {
        maxRank: spec.lora.max_rank,
        slots: spec.lora.slots,
        adapters: this.adapters,
      });
      plan.argv = enabled.args;
      plan.env = enabled.env;
    }
    this.ctx = ctx;
    plan.apiKey ??= plan.argv ? engine.apiKeyOf(plan.argv, { ...ctx.env, ...plan.env }) : undefined;
    return plan;
  }

  /** Starts (or, after an edit, restarts) the runtime. */
  async start(): Promise<void> {
    this.abort = new AbortController();
    const { policy, workload } = this.spec;
    const refused =
      policy &&
      (checkNodes(policy, this.spec.group?.nodes ?? 1) ??
        checkLaunch(policy, workload.backend, workload.config, { realpath: realpathOrNull }));
    if (refused) return this.fail(`refused by the launch policy: ${refused.message}`);
    const signal = this.abort.signal;
    let models;
    try {
      models = await resolveModels(this.spec, this.host.env, this.host.pullModel, {
        onDownloading: (what) => {
          this.note(`[inferd] downloading ${what}`);
          void this.emit("downloading", `downloading ${what}`);
        },
        onProgress: (p) => this.progress(p),
        signal,
      });
    } catch (e) {
      if (signal.aborted) return;
      return this.fail(`cannot get the model: ${(e as Error).message}`);
    }
    try {
      this.adapters = await pullAdapters(this.spec, this.host.pullModel, signal);
    } catch (e) {
      if (signal.aborted) return;
      return this.fail(`cannot get the LoRA adapters: ${(e as Error).message}`);
    }
    try {
      this.plan = await this.makePlan(models.spec);
    } catch (e) {
      return this.fail(`cannot launch: ${(e as Error).message}`);
    }
    const plan = this.plan;
    const env = {
      ...(Object.fromEntries(Object.entries(this.host.env).filter(([, v]) => v !== undefined)) as Record<
        string,
        string
      >),
      ...plan.env,
      ...models.env,
    };
    if (plan.builtin) {
      this.ring.push(
        "\x1b[1m[inferd] llama-server is not installed: serving with the built-in llama.cpp runtime\x1b[0m\r\n",
      );
      const gpu = await this.host.llamaGpu
        ?.prepare(this.spec.gpu_indices, plan.env, {
          onDownloading: (what) => void this.emit("downloading", `downloading ${what}`),
          onProgress: (p) => this.progress(p),
          note: (line, warning) => this.note(line, warning ? "1;33" : "1"),
          signal,
        })
        .catch(() => undefined);
      if (signal.aborted) return;
      Object.assign(env, gpu);
    }
    if (!plan.argv) return this.startExternal(plan, env);
    this.freshWorkDir();
    // A member may wait on its group for long: the agent's reconcile must not wait with it.
    if (this.spec.group)
      return void this.startMember(plan, env).catch((e) =>
        signal.aborted ? undefined : this.fail((e as Error).message),
      );
    this.supervise(plan as LaunchPlan & { argv: string[] }, env);
  }

  /** Starts the plan's process under a supervisor that reports every state change. */
  private supervise(plan: LaunchPlan & { argv: string[] }, env: Record<string, string>): void {
    const port = plan.port;
    this.supervisor = new Supervisor({
      ...this.host.supervisor,
      ...(this.spec.group ? { restartOnCrash: false } : {}),
      argv: plan.argv,
      env,
      cwd: this.workDir,
      healthUrls: plan.healthUrls,
      ownsListener: port === undefined ? undefined : (pid) => listenerOwnedBy(port, pid),
      ring: this.ring,
      logFile: this.logFile,
      beforeStart: plan.prep.length
        ? (signal) =>
            runPrep(plan.prep, env, { ring: this.ring, logFile: this.logFile }, signal, this.host.supervisor?.spawn)
        : undefined,
      onState: (s, reason) => {
        if (reason && (s === "failed" || s === "restarting"))
          this.note(
            `[inferd] ${s === "failed" ? "failed: " : ""}${withoutOutput(reason)}`,
            s === "failed" ? "1;31" : "1;33",
          );
        void this.emit(toReplicaState(s), reason);
        if (s === "ready") this.applySleep();
      },
    });
    this.supervisor.start();
  }

  /** The port this member listens on for its group (reported to the host), once picked. */
  private groupPort?: number;
  /** The Ray head a group's leader runs before its engine. */
  private head?: Supervisor;
  /** Wakes a member waiting on its group when the host sends news of the other members. */
  private groupNews?: () => void;

  /**
   * Starts a member of a multi-node group: picks its group port on the cluster address (and starts
   * the Ray head on a Ray leader), reports it, waits for what its role needs from the others, then
   * starts the engine with the group's flags. A crash is not restarted here: the host restarts the
   * whole group.
   */
  private async startMember(base: LaunchPlan, env: Record<string, string>): Promise<void> {
    const signal = this.abort.signal;
    const group = this.spec.group!;
    const address = group.members.find((m) => m.rank === group.rank)?.address;
    if (!address) throw new Error("this machine has no --cluster-address: the group's other members cannot reach it");
    const role = memberRole(this.spec.workload.backend, base, group.rank);
    const port = role.listens ? await this.host.freePort(address) : undefined;
    if (role.headFirst && port) await this.startHead(address, port, env, signal);
    this.groupPort = port;
    await this.waitForGroup(role.waitFor, signal);
    const plan = memberPlan(this.ctx!, base, this.spec.group!, address, port);
    if (signal.aborted) return;
    this.plan = plan;
    this.note(`[inferd] member ${group.rank} of ${group.nodes}: ${plan.argv!.join(" ")}`);
    this.supervise(plan as LaunchPlan & { argv: string[] }, { ...env, ...plan.env });
  }

  /** Starts the Ray head (the leader of a Ray group) and waits until its port answers. */
  private async startHead(
    address: string,
    port: number,
    env: Record<string, string>,
    signal: AbortSignal,
  ): Promise<void> {
    const head = rayHead(address, port, this.spec.gpus, env);
    this.note(`[inferd] starting the Ray head: ${head.argv.join(" ")}`);
    const up = new Promise<void>((resolve, reject) => {
      this.head = new Supervisor({
        ...this.host.supervisor,
        restartOnCrash: false,
        argv: head.argv,
        env: head.env,
        cwd: this.workDir,
        healthUrls: head.healthUrls,
        ring: this.ring,
        logFile: this.logFile,
        onState: (s, reason) => {
          if (s === "ready") resolve();
          if (s === "failed") {
            reject(new Error(`the Ray head failed: ${withoutOutput(reason ?? "")}`));
            if (!signal.aborted) void this.fail(`the Ray head failed: ${reason ?? ""}`);
          }
        },
      });
      this.head.start();
    });
    await up;
  }

  /** Waits (state `starting`, saying for what) until the group has what this member's role needs. */
  private async waitForGroup(wait: GroupWait, signal: AbortSignal): Promise<void> {
    let said = "";
    for (;;) {
      const missing = missingFor(wait, this.spec.group!);
      if (!missing || signal.aborted) return;
      if (missing !== said) {
        said = missing;
        await this.emit("starting", `waiting for ${missing}`);
      }
      await new Promise<void>((resolve) => {
        this.groupNews = resolve;
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
    }
  }

  /** Writes an inferd line into the replica's log (ring and file), as the runtime's output is. */
  private note(text: string, colour = "1"): void {
    const line = `\x1b[${colour}m${text}\x1b[0m\r\n`;
    this.ring.push(line);
    this.logFile.write(line);
  }

  /** Reports `failed` with the reason, which also goes into the replica's log. */
  private fail(reason: string): Promise<void> {
    this.note(`[inferd] ${reason}`, "1;31");
    return this.emit("failed", reason);
  }

  /**
   * A replica served by a shared daemon: keep the daemon up, pull the model, wait for health, load
   * the model; then keep it loaded (ready only while the daemon has it loaded).
   */
  private async startExternal(plan: LaunchPlan, env: Record<string, string>): Promise<void> {
    const signal = this.abort.signal;
    try {
      await this.emit("starting");
      const note = plan.daemon && (await this.host.ensureDaemon(plan.daemon, this.spec.assignment_id));
      if (note) this.note(note, "1;33");
      await this.emit("installing");
      await runPrep(plan.prep, env, { ring: this.ring, logFile: this.logFile }, signal, this.host.supervisor?.spawn);
      await this.emit("starting");
      await untilOk(`the runtime at ${plan.baseUrl} did not answer within 60 s`, signal, () =>
        Promise.any(plan.healthUrls.map((u) => fetch(u, { signal: AbortSignal.timeout(2000) }).then((r) => r.ok))),
      );
      if (plan.resident) await this.load(plan.resident, signal);
      if (signal.aborted) return;
      await this.emit("ready");
      if (plan.resident) void this.keepLoaded(plan.resident, signal);
    } catch (e) {
      if (!signal.aborted) await this.fail((e as Error).message);
    }
  }

  /** Loads the daemon's model and waits until the daemon lists it as loaded. */
  private load(resident: NonNullable<LaunchPlan["resident"]>, signal: AbortSignal): Promise<void> {
    const model = this.spec.workload.model_name;
    return untilOk(`${model} was not loaded within 60 s`, signal, async () => {
      if (await resident.loaded(signal)) return true;
      await resident.load(signal);
      return resident.loaded(signal);
    });
  }

  /**
   * While ready, checks the model is still loaded (a daemon unloads idle models after its
   * keep_alive, on memory pressure or on restart); when it is not, reports `starting`, loads it
   * again and reports `ready`.
   */
  private async keepLoaded(resident: NonNullable<LaunchPlan["resident"]>, signal: AbortSignal): Promise<void> {
    const every = this.host.supervisor?.healthIntervalMs ?? 5000;
    while (await sleepUnless(every, signal)) {
      if (await resident.loaded(signal).catch(() => false)) continue;
      if (signal.aborted) return;
      const why = `the daemon no longer has ${this.spec.workload.model_name} loaded: loading it again`;
      this.note(`[inferd] ${why}`, "1;33");
      await this.emit("starting", why);
      try {
        await this.load(resident, signal);
        if (!signal.aborted) await this.emit("ready");
      } catch (e) {
        if (!signal.aborted) await this.fail((e as Error).message);
        return;
      }
    }
  }

  /** Applies a changed spec: a new revision restarts the runtime; a changed `sleep` sleeps or wakes it; a new slot count only re-reports. */
  async update(spec: ReplicaSpec): Promise<void> {
    if (spec.revision === this.spec.revision) {
      const sleepChanged = spec.sleep !== this.spec.sleep;
      const loraChanged = JSON.stringify(spec.lora?.adapters) !== JSON.stringify(this.spec.lora?.adapters);
      this.spec = spec;
      if (sleepChanged) this.applySleep();
      // One refresh at a time, in the order asked: an older list never lands after a newer one.
      if (loraChanged) this.refreshing = this.refreshing.then(() => this.refreshAdapters()).catch(() => {});
      return this.groupNews?.();
    }
    this.ring.push("\r\n\x1b[1m[inferd] the workload changed: restarting the runtime\x1b[0m\r\n");
    // Stopped under the old spec: what it reports while stopping is about the old group generation.
    await this.stopProcess();
    this.spec = spec;
    this.stopped = false;
    await this.start();
  }

  /** The LoRA adapters pulled for it, in the spec's order, with their paths here. */
  private adapters: AdapterPath[] = [];
  /** The adapter refreshes under way, one after the other. */
  private refreshing: Promise<void> = Promise.resolve();

  /**
   * Pulls adapters added to a running replica's spec (an engine that loads them while running: the
   * host loads them on demand) and reports the new list; removed ones leave the list.
   */
  private async refreshAdapters(): Promise<void> {
    try {
      this.adapters = await pullAdapters(this.spec, this.host.pullModel, this.abort.signal, this.adapters);
    } catch (e) {
      if (!this.abort.signal.aborted) this.note(`[inferd] cannot get a LoRA adapter: ${(e as Error).message}`, "1;33");
      return;
    }
    if (this.state === "ready") await this.emit("ready", this.reason);
  }

  /** The level the runtime sleeps at and the host RAM it holds there, while sleeping or waking. */
  private slept?: { level: 1 | 2; ramMib?: number };
  /** How long the last sleep or wake took (ms), reported with the state it led to. */
  private switchMs?: number;
  /** Sleeps and wakes run one at a time, in the order asked. */
  private switching: Promise<void> = Promise.resolve();

  /** Brings the runtime to the sleep the spec asks for (after the ones already under way). */
  private applySleep(): void {
    this.switching = this.switching.then(() => this.reconcileSleep()).catch(() => {});
  }

  /** Sleeps (or changes level) when the spec asks and the runtime is ready or asleep; wakes when it no longer asks. */
  private async reconcileSleep(): Promise<void> {
    const sleep = engineOf(this.spec.workload.backend)?.sleep;
    const want = this.spec.sleep;
    if (!sleep || !this.plan || this.stopped || !this.spec.sleep_mode || this.spec.group) return;
    if (want && !sleep.levels.includes(want))
      return this.note(
        `[inferd] ${this.spec.workload.backend} cannot sleep at level ${want}: staying as it is`,
        "1;33",
      );
    if (want && (this.state === "ready" || (this.state === "sleeping" && this.slept?.level !== want)))
      return this.goToSleep(want);
    if (!want && this.state === "sleeping") return this.wake();
  }

  /**
   * Puts the runtime to sleep at `level` and reports `sleeping`; a refusal leaves it as it was, noted
   * in the log. Asleep at another level, it is woken first (still reported sleeping: it serves
   * nothing meanwhile): a sleep while asleep changes nothing in vLLM (docs/features/sleep_mode.md),
   * so the weights held in host RAM are dropped only by waking and sleeping deeper.
   */
  private async goToSleep(level: 1 | 2): Promise<void> {
    const engine = engineOf(this.spec.workload.backend)!;
    const plan = this.plan!;
    const t0 = performance.now();
    const calls = [...(this.slept ? engine.sleep!.wake(this.slept.level) : []), ...engine.sleep!.sleep(level)];
    const r = await runCalls(plan.baseUrl, calls, plan.apiKey);
    if (this.stopped) return;
    if (!r.ok) return this.note(`[inferd] the runtime did not sleep: ${refusal(r)}`, "1;33");
    const ms = Math.round(performance.now() - t0);
    const ramMib =
      level === 2 ? 0 : plan.argv ? weightsMib(engine, plan.argv, { ...this.host.env, ...plan.env }) : undefined;
    this.note(`[inferd] asleep at level ${level} (${ms} ms)`);
    this.slept = { level, ramMib };
    await this.emit("sleeping", undefined, undefined, ms);
  }

  /**
   * Wakes the runtime (`waking`), waits until its readiness URLs answer and reports `ready`. A wake
   * the runtime refuses starts its process again (a cold start, reported `starting` with why).
   */
  private async wake(): Promise<void> {
    const engine = engineOf(this.spec.workload.backend)!;
    const plan = this.plan!;
    const level = this.slept?.level ?? 1;
    const t0 = performance.now();
    await this.emit("waking", undefined, undefined, undefined);
    const r = await runCalls(plan.baseUrl, engine.sleep!.wake(level), plan.apiKey);
    if (this.stopped) return;
    if (!r.ok) {
      const why = `the runtime refused to wake (${refusal(r)}): starting it again`;
      this.note(`[inferd] ${why}`, "1;33");
      const restarted = this.supervisor?.restartNow();
      await this.emit("starting", why);
      return void (await restarted);
    }
    try {
      await untilOk("the runtime did not answer after waking within 60 s", this.abort.signal, () =>
        Promise.any(
          plan.healthUrls.map((u) =>
            fetch(u, {
              signal: AbortSignal.timeout(2000),
              headers: plan.apiKey ? { authorization: `Bearer ${plan.apiKey}` } : {},
            }).then((res) => res.ok),
          ),
        ),
      );
    } catch (e) {
      return this.fail((e as Error).message);
    }
    if (this.stopped) return;
    const ms = Math.round(performance.now() - t0);
    this.note(`[inferd] awake (${ms} ms)`);
    await this.emit("ready", undefined, undefined, ms);
  }

  /** Reports the current state again (after the host restarts or forgets). */
  async resend(): Promise<void> {
    await this.emit(this.state);
  }

  private async stopProcess(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    if (this.plan?.daemon) await this.host.releaseDaemon?.(this.plan.daemon.key, this.spec.assignment_id);
    await this.supervisor?.stop();
    await this.head?.stop();
    this.supervisor = undefined;
    this.head = undefined;
    this.groupPort = undefined;
  }

  /** Stops the runtime (process group, grace period, then SIGKILL) and reports `stopped`. */
  async stop(): Promise<void> {
    await this.stopProcess();
    rmSync(this.workDir, { recursive: true, force: true });
    this.logFile.close();
    this.state = "stopped";
    this.host.report({ assignment_id: this.spec.assignment_id, state: "stopped" });
  }
}
