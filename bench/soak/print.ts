/** Prints the soak's report as plain-text tables. */
import { fmt, formatTable } from "../lib";
import { RECEIVERS } from "./receivers";
import { MEASURED, type Causes, type SoakReport } from "./report";

const causeRows = (c: Causes) =>
  Object.entries(c).map(([cause, v]) => [
    cause,
    v.count,
    v.explained,
    v.unexplained,
    Object.entries(v.during)
      .map(([k, n]) => `${n} ${k}`)
      .join(", "),
  ]);
const CAUSE_HEADER = ["cause", "count", "explained", "unexplained", "during faults of"];

/** The report as text (tables and a verdict), for a person. */
export function formatReport(r: SoakReport): string {
  const out: string[] = [];
  const table = (title: string, header: string[], rows: (string | number)[][]) =>
    out.push(`\n${title}\n${rows.length ? formatTable(header, rows) : "(none)"}`);
  const f = r.faults;
  const c = r.cluster;
  out.push(
    `\nsoak (${r.mode}${c ? `, ${c.hosts.length} hosts` : ""}): ${fmt(r.seconds.total, 0)} s in all, traffic ${fmt(r.seconds.traffic, 0)} s, drain ${fmt(r.seconds.drain, 1)} s`,
  );
  const killed = c
    ? `${f.inferdKills} kill -9 of a host (planned ${f.planned}; kill to listening again p50 ${fmt(f.restartMsP50, 0)} ms, max ${fmt(f.restartMsMax, 0)} ms)`
    : `${f.inferdKills} kill -9 of inferd (planned ${f.planned}; restart to listening p50 ${fmt(f.restartMsP50, 0)} ms, max ${fmt(f.restartMsMax, 0)} ms)`;
  out.push(
    `faults: ${killed}, ${f.runtimeKills} runtime kills, ${f.agentKills} agent kills, ${f.receiverFlaps} receiver flaps${f.skipped ? `, ${f.skipped} skipped (nothing to kill)` : ""}`,
  );
  if (c) {
    table(
      "Hosts (kill to listening again: a host that led waits for another to lead, one kept down waits to be listed gone)",
      [
        "host",
        "id",
        "kills",
        "while leading",
        "kept down until gone",
        "jobs held",
        "requeued by leader",
        "down ms p50",
        "max",
        "start ms p50",
        "sent",
        "2xx",
        "5xx",
        "no response",
        "RSS MiB first/last",
        "fds idle start/end",
      ],
      c.hosts.map((h) => [
        h.name,
        h.id,
        h.kills,
        h.killsWhileLeading,
        h.killsListedGone,
        h.jobsHeldAtKills,
        h.jobsRequeuedByLeader,
        fmt(h.downMsP50, 0),
        fmt(h.downMsMax, 0),
        fmt(h.restartMsP50, 0),
        h.requests.sent,
        h.requests.ok,
        h.requests.fiveXX,
        h.requests.noResponse,
        `${fmt(h.inferd.rssKiB.loadStart / 1024, 0)}/${fmt(h.inferd.rssKiB.loadEnd / 1024, 0)}`,
        `${fmt(h.inferd.fds.idleStart, 0)}/${fmt(h.inferd.fds.idleEnd, 0)}`,
      ]),
    );
    const l = c.leader;
    out.push(
      `leaders seen (s from the start of traffic): ${l.seen.map((s) => `${s.t} ${s.host}`).join(" → ") || "none"}`,
    );
    out.push(
      `the lead moved ${l.changes} time(s); ${l.killsOfLeader} kill(s) of the leader; another host led after p50 ${fmt(l.takeoverMsP50, 0)} ms, max ${fmt(l.takeoverMsMax, 0)} ms`,
    );
  }
  const statuses = [...new Set(Object.values(r.requests.byStatus).flatMap((m) => Object.keys(m)))].sort();
  table(
    "Requests by kind and answer",
    ["kind", "sent", ...statuses],
    (Object.keys(r.requests.sent) as (keyof typeof r.requests.sent)[]).map((k) => [
      k,
      r.requests.sent[k],
      ...statuses.map((s) => r.requests.byStatus[k][s] ?? 0),
    ]),
  );
  const inferd = c ? "its host" : "inferd";
  out.push(
    `no response: ${r.connection.refusedWhileDown} refused while ${inferd} was down, ${r.connection.cutByKill} cut by a kill of ${inferd}, ${Object.values(r.connection.unexplained).reduce((a, b) => a + b, 0)} while it was up`,
  );
  table("5xx by cause (explained: during a fault, with a code a fault may cause)", CAUSE_HEADER, causeRows(r.fiveXX));
  table(
    `Streams: ${r.streams.sent} sent, ${r.streams.completed} read to [DONE]; cut streams (and other answers broken off) by cause`,
    CAUSE_HEADER,
    causeRows(r.streams.cut),
  );
  const j = r.jobs;
  const failed = Object.entries(j.failedByCode)
    .map(([c, n]) => `${n} ${c}`)
    .join(", ");
  out.push(
    `\njobs: ${j.accepted} answered 202 → ${j.completed} completed, ${j.failed} failed${failed ? ` (${failed})` : ""}, ${j.missing.length} missing, ${j.unfinished.length} unfinished; ` +
      `most runs of one job ${j.maxRuns}; ${j.acceptedWithoutAck} accepted though the 202 was lost to a kill; ${j.unknownAtReceivers} unknown ids at receivers`,
  );
  table(
    "Deliveries by receiver, by job id (inferd's states; what the receiver got)",
    ["receiver", "owed", "delivered", "terminal", "pending", "no record", "received", "lost", "duplicates", "requests"],
    RECEIVERS.map((n) => {
      const d = r.deliveries[n];
      return [
        n,
        d.owed,
        d.delivered,
        d.terminal,
        d.pending,
        d.noRecord.length,
        d.received,
        d.lost.length,
        n === "failing" ? "-" : d.duplicates,
        d.requests,
      ];
    }),
  );
  out.push(
    "(`failing` answers 500: its deliveries are owed and must end terminal, each after 6 attempts; duplicates elsewhere are allowed: delivery is at least once)",
  );
  const m = r.inferd;
  table(
    `${c ? `${c.hosts[0].name} (inferd)` : "inferd"} over ${m.processes} processes`,
    ["", "under load: first", "last", "idle: start", "end", "max"],
    [
      [
        "RSS MiB",
        fmt(m.rssKiB.loadStart / 1024, 1),
        fmt(m.rssKiB.loadEnd / 1024, 1),
        fmt(m.rssKiB.idleStart / 1024, 1),
        fmt(m.rssKiB.idleEnd / 1024, 1),
        fmt(m.rssKiB.max / 1024, 1),
      ],
      [
        "open fds",
        fmt(m.fds.loadStart, 0),
        fmt(m.fds.loadEnd, 0),
        fmt(m.fds.idleStart, 0),
        fmt(m.fds.idleEnd, 0),
        fmt(m.fds.max, 0),
      ],
      [
        "  not sockets",
        fmt(m.nonSocketFds.loadStart, 0),
        fmt(m.nonSocketFds.loadEnd, 0),
        fmt(m.nonSocketFds.idleStart, 0),
        fmt(m.nonSocketFds.idleEnd, 0),
        fmt(m.nonSocketFds.max, 0),
      ],
    ],
  );
  out.push(
    `per process under load (RSS MiB / fds): ${m.perProcess.map((p) => `${fmt(p.rssMiB, 0)}/${fmt(p.fds, 0)}`).join(" ")}`,
  );
  out.push(`(${MEASURED})`);
  for (const [what, n] of Object.entries(r.unexpected)) out.push(`unexpected: ${n} × ${what}`);
  for (const [what, n] of Object.entries(r.connection.unexplained)) out.push(`no response while up: ${n} × ${what}`);
  out.push(
    r.ok
      ? "\nPASS: nothing accepted was lost and every 5xx is explained by a fault"
      : `\nFAIL:\n${r.failures.map((x) => `  - ${x}`).join("\n")}`,
  );
  return out.join("\n");
}
