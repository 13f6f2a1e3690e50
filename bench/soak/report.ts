/**
 * The soak's report: requests by kind and status, 5xx and cut streams by cause (each explained by a
 * fault or not), connection errors while inferd was down, jobs and deliveries by id, inferd's RSS
 * and descriptors, the faults done, and the list of failures that make the exit code non-zero.
 * With several hosts (`--hosts`), a connection error is explained only by a kill of the host it was
 * sent to, and `cluster` adds each host's kills and figures and the leaders seen.
 */
import { percentile } from "../lib";
import type { Fault } from "./faults";
import type { Life, Sample } from "./host";
import { RECEIVERS, type ReceiverName } from "./receivers";
import { REQUEST_TIMEOUT_MS, type Kind, type Outcome } from "./traffic";
import type { DeliveryTally, JobTally } from "./verify";

/**
 * Error codes a fault may cause, each only while the request overlapped a kill of inferd, of a
 * runtime or of the agent (until the system was whole again, plus `GRACE_MS`): a runtime or worker
 * that died mid-request (502 `upstream_unavailable`, 503 `worker_lost` when no other replica could
 * take it), no ready replica right after a restart (503 `workload_unavailable`, `queue_timeout`),
 * and for streams an SSE `worker_lost` event, a stream broken off, or one ended without `[DONE]`.
 * A 500 (`internal_error`) or any other 5xx is never explained. In a cluster a kill of one host
 * explains these on every host (a request to the other host may be served by the killed host's
 * machine, or queued for a replica there); the report tells the two apart (`during`).
 */
export const FAULT_CODES = new Set([
  "upstream_unavailable",
  "worker_lost",
  "workload_unavailable",
  "queue_timeout",
  "broken",
  "no_done",
]);
/** How long after a fault's recovery its errors still count as explained. */
export const GRACE_MS = 2000;

/**
 * Count, explained by a fault, and not; `during` counts them by the kinds of fault they overlapped
 * (e.g. `inferd+runtime`; in a cluster `inferd (its host)` when the host the request went to was the
 * one killed, `inferd (other host)` when another host was).
 */
export interface Causes {
  [cause: string]: { count: number; explained: number; unexplained: number; during: Record<string, number> };
}

/** RSS (KiB) or descriptors of inferd at the start and the end, measured two ways. */
export interface StartEnd {
  /** Median under load, over the first / last process's life from 3 s after it listened. */
  loadStart: number;
  loadEnd: number;
  /** Idle: the first process after set-up before any traffic / the last process after the drain. */
  idleStart: number;
  idleEnd: number;
  max: number;
}

/** The whole report (also printed as JSON with `--json`). */
export interface SoakReport {
  mode: "short" | "full";
  seconds: { total: number; traffic: number; drain: number };
  faults: {
    planned: number;
    inferdKills: number;
    runtimeKills: number;
    agentKills: number;
    receiverFlaps: number;
    restartMsP50: number;
    restartMsMax: number;
    skipped: number;
    notRecovered: string[];
  };
  requests: { sent: Record<Kind, number>; byStatus: Record<Kind, Record<string, number>> };
  fiveXX: Causes;
  /** Streams read to `[DONE]`, and cut answers by cause: streams, and other 2xx answers whose body broke off. */
  streams: { sent: number; completed: number; cut: Causes };
  unexpected: Record<string, number>;
  connection: { refusedWhileDown: number; cutByKill: number; unexplained: Record<string, number> };
  jobs: JobTally;
  deliveries: Record<ReceiverName, DeliveryTally>;
  /** With one host, that host; in a cluster the first host (every host's figures are under `cluster.hosts`). */
  inferd: {
    processes: number;
    rssKiB: StartEnd;
    fds: StartEnd;
    nonSocketFds: StartEnd;
    /** Each process's median under load (from 3 s after it listened), in order: the trend over the kills. */
    perProcess: { pid: number; rssMiB: number; fds: number }[];
    how: string;
  };
  /** Only with `--hosts` 2 or more. */
  cluster?: ClusterReport;
  failures: string[];
  ok: boolean;
}

const bump = (m: Record<string, number>, k: string, n = 1) => (m[k] = (m[k] ?? 0) + n);
const overlaps = (o: Outcome, from: number, to: number) => o.t0 <= to && o.t1 >= from;

/** How `during` names a fault: its kind; a host kill in a cluster by whether it was the outcome's host. */
const faultLabel = (o: Outcome, f: Fault) =>
  f.host === undefined ? f.kind : f.host === o.host ? "inferd (its host)" : "inferd (other host)";

/** The kinds of fault whose window (start to recovery plus grace) an outcome overlapped, e.g. `inferd+runtime`; "" for none. */
function faultsDuring(o: Outcome, faults: Fault[], end: number): string {
  const kinds = new Set(
    faults
      .filter((f) => f.kind !== "receiver" && overlaps(o, f.at, (f.recoveredAt ?? end) + GRACE_MS))
      .map((f) => faultLabel(o, f)),
  );
  return [...kinds].sort().join("+");
}

/** Adds one outcome to a `Causes` map: explained when it overlapped a fault and its cause is one a fault may have; true when explained. */
function addCause(m: Causes, cause: string, code: string, during: string): boolean {
  const c = (m[cause] ??= { count: 0, explained: 0, unexplained: 0, during: {} });
  const explained = !!during && FAULT_CODES.has(code);
  c.count++;
  c[explained ? "explained" : "unexplained"]++;
  bump(c.during, during || "no fault");
  return explained;
}

/**
 * Sorts every outcome into the report's request, 5xx, stream and connection-error buckets;
 * `onUnexplained` hears of each outcome that counts against the run, with the faults it overlapped.
 */
export function classify(
  outcomes: Outcome[],
  faults: Fault[],
  end: number,
  onUnexplained: (o: Outcome, during: string) => void = () => {},
): Pick<SoakReport, "requests" | "fiveXX" | "streams" | "unexpected" | "connection"> {
  const sent = { chat: 0, stream: 0, job: 0 } as Record<Kind, number>;
  const byStatus = { chat: {}, stream: {}, job: {} } as Record<Kind, Record<string, number>>;
  const fiveXX: Causes = {};
  const cut: Causes = {};
  const unexpected: Record<string, number> = {};
  const connection = { refusedWhileDown: 0, cutByKill: 0, unexplained: {} as Record<string, number> };
  let completed = 0;
  const downs = faults.filter((f) => f.kind === "inferd");
  for (const o of outcomes) {
    sent[o.kind]++;
    bump(byStatus[o.kind], o.status === undefined ? "no response" : String(o.status));
    const during = faultsDuring(o, faults, end);
    let explained = true;
    if (o.status === undefined && o.error?.startsWith("TimeoutError")) {
      bump(connection.unexplained, `${o.kind}: no answer within ${REQUEST_TIMEOUT_MS} ms`);
      explained = false;
    } else if (o.status === undefined) {
      // Only a kill of the host it was sent to explains a request without an answer.
      const down = downs.find((f) => (f.host === undefined || f.host === o.host) && overlaps(o, f.at, f.upAt ?? end));
      if (down && o.t0 >= down.at) connection.refusedWhileDown++;
      else if (down) connection.cutByKill++;
      else {
        bump(connection.unexplained, `${o.kind}: ${o.error}`);
        explained = false;
      }
    } else if (o.status >= 500) {
      const cause = `${o.status} ${o.code ?? "(no code)"}`;
      explained = addCause(fiveXX, cause, o.code ?? "", during);
    } else if (o.status !== (o.kind === "job" ? 202 : 200)) {
      bump(unexpected, `${o.kind} ${o.status} ${o.code ?? ""}`.trim());
      explained = false;
    } else if (o.kind === "stream") {
      if (o.stream === "done") completed++;
      else explained = addCause(cut, o.stream ?? "unknown", o.stream ?? "", during);
    } else if (o.error) {
      explained = addCause(cut, `${o.kind} body broken`, "broken", during); // a 200/202 whose body broke off
    }
    if (!explained) onUnexplained(o, during);
  }
  return {
    requests: { sent, byStatus },
    fiveXX,
    streams: { sent: sent.stream, completed, cut },
    unexpected,
    connection,
  };
}

/** The median of some samples' field (NaN when none). */
const median = (xs: Sample[], f: (s: Sample) => number) => percentile(xs.map(f), 50);

/** Start and end figures of one field over the processes' samples (see `StartEnd`). */
export function startEnd(lives: Life[], f: (s: Sample) => number): StartEnd {
  const first = lives[0];
  const last = lives.at(-1)!;
  const steady = (l: Life) => {
    const load = l.samples.filter((s) => s.phase === "load");
    const late = load.filter((s) => s.age >= 3000);
    return late.length ? late : load;
  };
  const idle = (l: Life, before: boolean) =>
    l.samples.filter(
      (s) => s.phase === "idle" && (before ? s.at < (l.samples.find((x) => x.phase === "load")?.at ?? Infinity) : true),
    );
  const all = lives.flatMap((l) => l.samples.map(f));
  const at = (s: Sample | undefined) => (s ? f(s) : NaN);
  return {
    loadStart: median(steady(first), f),
    loadEnd: median(steady(last), f),
    idleStart: at(idle(first, true).at(-1)),
    idleEnd: at(idle(last, false).at(-1)),
    max: all.length ? Math.max(...all) : NaN,
  };
}

/** inferd's memory and descriptors over its processes (see `MEASURED`). */
export function inferdUsage(lives: Life[]): SoakReport["inferd"] {
  const steady = (l: Life) => l.samples.filter((s) => s.phase === "load" && s.age >= 3000);
  return {
    processes: lives.length,
    rssKiB: startEnd(lives, (s) => s.rssKiB),
    fds: startEnd(lives, (s) => s.fds),
    nonSocketFds: startEnd(lives, (s) => s.nonSocketFds),
    perProcess: lives.map((l) => ({
      pid: l.pid,
      rssMiB: Math.round(median(steady(l), (s) => s.rssKiB) / 102.4) / 10,
      fds: median(steady(l), (s) => s.fds),
    })),
    how: MEASURED,
  };
}

/** How RSS and descriptors were measured (printed with the figures). */
export const MEASURED =
  "VmRSS from /proc/<pid>/status and the entries of /proc/<pid>/fd of the inferd process then running, every 500 ms; " +
  "'under load' is the median over the first (resp. last) process's life from 3 s after it listened until it was killed (resp. the clients stopped); " +
  "'idle' is the first process after set-up before any traffic, and the last process after the drain";

/** The failures that make the exit code non-zero (empty when the run passed). */
export function failuresOf(r: Omit<SoakReport, "failures" | "ok">, drained: boolean): string[] {
  const out: string[] = [];
  if (r.jobs.missing.length)
    out.push(
      `${r.jobs.missing.length} accepted job(s) missing (404) after the run: ${r.jobs.missing.slice(0, 5).join(", ")}`,
    );
  if (r.jobs.unfinished.length)
    out.push(
      `${r.jobs.unfinished.length} accepted job(s) not finished (or a delivery still pending) after the drain: ${r.jobs.unfinished.slice(0, 5).join(", ")}`,
    );
  if (!drained && !r.jobs.unfinished.length) out.push("the drain did not end within its bound");
  for (const code of Object.keys(r.jobs.failedByCode))
    if (!FAULT_CODES.has(code)) out.push(`${r.jobs.failedByCode[code]} job(s) failed with ${code}`);
  if (r.jobs.unknownAtReceivers) out.push(`${r.jobs.unknownAtReceivers} job id(s) at receivers that no client posted`);
  for (const name of RECEIVERS) {
    const d = r.deliveries[name];
    if (d.noRecord.length)
      out.push(
        `${name}: ${d.noRecord.length} finished job(s) with no delivery record: ${d.noRecord.slice(0, 5).join(", ")}`,
      );
    if (d.lost.length)
      out.push(`${name}: ${d.lost.length} owed delivery(ies) never received: ${d.lost.slice(0, 5).join(", ")}`);
    if (name === "failing" && d.delivered > 0)
      out.push(`failing: ${d.delivered} delivery(ies) marked delivered by a receiver that only answers 500`);
  }
  for (const [cause, c] of Object.entries(r.fiveXX))
    if (c.unexplained) out.push(`${c.unexplained} unexplained ${cause}`);
  for (const [cause, c] of Object.entries(r.streams.cut))
    if (c.unexplained) out.push(`${c.unexplained} stream(s) cut (${cause}) outside any fault`);
  for (const [what, n] of Object.entries(r.unexpected)) out.push(`${n} unexpected answer(s): ${what}`);
  for (const [what, n] of Object.entries(r.connection.unexplained))
    out.push(`${n} connection error(s) while inferd was up: ${what}`);
  if (r.faults.inferdKills < r.faults.planned)
    out.push(`only ${r.faults.inferdKills} of ${r.faults.planned} planned kills of inferd happened`);
  for (const f of r.faults.notRecovered) out.push(`fault did not recover: ${f}`);
  return out;
}

/** Summarises the faults done. */
export function faultSummary(faults: Fault[], planned: number): SoakReport["faults"] {
  const kills = faults.filter((f) => f.kind === "inferd");
  const restart = kills.filter((f) => f.upAt).map((f) => f.upAt! - f.at);
  const skipped = (f: Fault) => !!f.error?.startsWith("no runtime");
  const n = (k: Fault["kind"]) => faults.filter((f) => f.kind === k && !skipped(f)).length;
  return {
    planned,
    inferdKills: kills.length,
    runtimeKills: n("runtime"),
    agentKills: n("agent"),
    receiverFlaps: n("receiver"),
    restartMsP50: percentile(restart, 50),
    restartMsMax: restart.length ? Math.max(...restart) : NaN,
    skipped: faults.filter(skipped).length,
    notRecovered: faults.filter((f) => f.error && !skipped(f)).map((f) => `${f.what}: ${f.error}`),
  };
}

/** The report's cluster part (only with `--hosts` 2 or more). */
export interface ClusterReport {
  /** Each host: its cluster id, its kills (those kept down until listed gone, those while it led), its processes and figures. */
  hosts: {
    name: string;
    id: string;
    kills: number;
    killsWhileLeading: number;
    killsListedGone: number;
    /** Jobs it was running when killed; of those, held at kills that kept it down until listed gone (the leader put them back in the queue). */
    jobsHeldAtKills: number;
    jobsRequeuedByLeader: number;
    /** Kill to listening again (it stays down until another host leads, or until it is listed gone). */
    downMsP50: number;
    downMsMax: number;
    /** Start of a process to its `listening on`. */
    restartMsP50: number;
    inferd: SoakReport["inferd"];
    /** The clients' requests to this host: sent, answered 2xx, 5xx, no response. */
    requests: { sent: number; ok: number; fiveXX: number; noResponse: number };
  }[];
  leader: {
    /** Each change of leader seen over the run (the first one: the leader at the start), s since the start. */
    seen: { t: number; host: string; via: string }[];
    /** How many times the lead moved from one host to another. */
    changes: number;
    killsOfLeader: number;
    /** Kill of the leader until another host was seen leading. */
    takeoverMsP50: number;
    takeoverMsMax: number;
  };
}
