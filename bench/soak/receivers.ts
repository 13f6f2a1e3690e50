/**
 * The soak's three HTTPS webhook receivers on loopback (one test CA): `steady` always answers 200,
 * `failing` always answers 500 (its deliveries are owed but must end terminal), and `flapping`
 * answers 200 but is taken down and brought back up on the same port during the run.
 */
import { startReceiver, type ReceivedRequest, type Receiver } from "../../test/fixtures/receiver";
import type { TestPki } from "../../test/fixtures/tls";

/** The receivers' names. */
export const RECEIVERS = ["steady", "failing", "flapping"] as const;
/** A receiver's name. */
export type ReceiverName = (typeof RECEIVERS)[number];

/** A receiver that may have been restarted: every request of every incarnation, and its URL. */
export interface SoakReceiver {
  name: ReceiverName;
  port: number;
  url: string;
  /** The status it answers. */
  status: number;
  /** Every request received so far, over all its incarnations. */
  requests(): ReceivedRequest[];
  readonly up: boolean;
  /** Stops listening (drops open connections). */
  down(): Promise<void>;
  /** Listens again on the same port. */
  bringUp(): Promise<void>;
  close(): Promise<void>;
}

/** Starts one receiver answering `status`. */
async function soakReceiver(name: ReceiverName, pki: TestPki, status: number): Promise<SoakReceiver> {
  const behaviour = () => ({ status, body: status === 200 ? "ok" : "receiver failing on purpose" });
  let current: Receiver | undefined = await startReceiver({ pki, behaviour });
  const port = current.port;
  const url = current.url(`/hooks/${name}`);
  const before: ReceivedRequest[] = [];
  return {
    name,
    port,
    url,
    status,
    requests: () => [...before, ...(current?.requests() ?? [])],
    get up() {
      return current !== undefined;
    },
    down: async () => {
      const r = current;
      if (!r) return;
      current = undefined;
      before.push(...r.requests());
      await r.close();
    },
    bringUp: async () => {
      if (!current) current = await startReceiver({ pki, port, behaviour });
    },
    close: async () => {
      await current?.close();
      current = undefined;
    },
  };
}

/** Starts `steady` (200), `failing` (500) and `flapping` (200, taken down and up by the faults). */
export async function startSoakReceivers(pki: TestPki): Promise<Record<ReceiverName, SoakReceiver>> {
  return {
    steady: await soakReceiver("steady", pki, 200),
    failing: await soakReceiver("failing", pki, 500),
    flapping: await soakReceiver("flapping", pki, 200),
  };
}

/** What one receiver got, by job id: how many requests each job's delivery took. */
export function arrivalsByJob(r: SoakReceiver): Map<string, number> {
  const byJob = new Map<string, number>();
  for (const req of r.requests()) {
    const id = req.headers["x-service-job-id"];
    if (id) byJob.set(id, (byJob.get(id) ?? 0) + 1);
  }
  return byJob;
}

/** The soak context id (`context.soak`) of each job a receiver heard of, by job id. */
export function contextsByJob(r: SoakReceiver): Map<string, string> {
  const out = new Map<string, string>();
  for (const req of r.requests()) {
    const id = req.headers["x-service-job-id"];
    if (!id || out.has(id)) continue;
    try {
      const ctx = (JSON.parse(req.rawBody) as { context?: { soak?: string } }).context?.soak;
      if (ctx) out.set(id, ctx);
    } catch {}
  }
  return out;
}
