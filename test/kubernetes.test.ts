/**
 * deploy/kubernetes: every overlay rendered with `kubectl kustomize` and each object checked against
 * the Kubernetes API schemas (kubernetes-models; KEDA and Prometheus Operator CRDs), then what a user
 * relies on: one host on a volume or several on PostgreSQL from a Secret, GPU agents joining with a
 * pool token from a Secret, probes on /healthz. The containers' command lines and environments are
 * read by inferd's own settings parser, and run: the host as the manifest starts it answers its
 * probe, and the agent as the DaemonSet starts it joins that host with a pool join token.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { loadConfig, SETTINGS } from "../src/config";
import { cleanup, sourceBin, startInferd, tempDir, waitFor, type Inferd } from "./helpers/proc";
import { kubectlVersions, render, schemaProblems, type KubeObject } from "./helpers/kube";
import { fixtureEnv } from "./fixtures";
import { storeEnv } from "./helpers/postgres";
import { startTestServer } from "./helpers/server";

const OVERLAYS = ["base", "overlays/single", "overlays/cluster", "overlays/cluster-keda"] as const;
const KNOWN_ENV = new Set<string>(Object.values(SETTINGS).map((s) => s.env));

const rendered = new Map<string, KubeObject[]>();
const objects = (overlay: (typeof OVERLAYS)[number]) => {
  if (!rendered.has(overlay)) rendered.set(overlay, render(overlay));
  return rendered.get(overlay)!;
};
const find = (overlay: (typeof OVERLAYS)[number], kind: string, name?: string) => {
  const o = objects(overlay).find((x) => x.kind === kind && (!name || x.metadata.name === name));
  if (!o) throw new Error(`${overlay} renders no ${kind}${name ? ` ${name}` : ""}`);
  return o;
};
const host = (overlay: (typeof OVERLAYS)[number]) => find(overlay, "Deployment", "inferd");
const agent = (overlay: (typeof OVERLAYS)[number]) => find(overlay, "DaemonSet", "inferd-agent");
const mainContainer = (o: KubeObject) => o.spec.template.spec.containers[0];
type EnvVar = {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean }; fieldRef?: { fieldPath: string } };
};
const envOf = (o: KubeObject, name: string): EnvVar | undefined =>
  (mainContainer(o).env as EnvVar[]).find((e) => e.name === name);

/**
 * A container's environment with Secrets and downward-API fields filled from `values`
 * (`secret:<name>/<key>`, `field:<path>`); an optional Secret without a value is left out.
 */
function resolveEnv(o: KubeObject, values: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of mainContainer(o).env as EnvVar[]) {
    const ref = e.valueFrom?.secretKeyRef;
    const key = ref
      ? `secret:${ref.name}/${ref.key}`
      : e.valueFrom?.fieldRef
        ? `field:${e.valueFrom.fieldRef.fieldPath}`
        : undefined;
    if (!key) out[e.name] = e.value ?? "";
    else if (values[key] !== undefined) out[e.name] = values[key];
    else if (!ref?.optional)
      throw new Error(`${o.metadata.name}: ${e.name} comes from ${key}, which this test does not know`);
  }
  return out;
}

/** Values standing in for the Secrets and pod fields the manifests read. */
const STAND_INS = {
  "secret:inferd-admin/token": "ik_admin_k8s-test-0123456789abcdef0123456789",
  "secret:inferd-agent-join/token": "jt_x.y.z",
  "secret:inferd-database/url": "postgres://inferd:secret@db:5432/inferd",
  "field:status.podIP": "10.0.0.7",
};

const started: { stop(): Promise<unknown> }[] = [];
afterAll(async () => {
  for (const s of started.reverse()) await s.stop().catch(() => 0);
  await cleanup();
});

describe("rendering", () => {
  test("kubectl with kustomize 5 or newer is installed", () => {
    const v = kubectlVersions();
    expect(v.kustomize).toMatch(/^\d+\./);
  });

  for (const overlay of OVERLAYS) {
    test(`${overlay} renders objects that the Kubernetes API schemas accept, all in the inferd namespace`, () => {
      const all = objects(overlay);
      expect(all.length).toBeGreaterThanOrEqual(5);
      expect(all.flatMap(schemaProblems)).toEqual([]);
      for (const o of all)
        if (o.kind !== "Namespace")
          expect(`${o.kind} ${o.metadata.name} in ${o.metadata.namespace}`).toBe(
            `${o.kind} ${o.metadata.name} in inferd`,
          );
    });
  }

  test("the schema check catches what the API would refuse: a wrong type, a misspelt field, an unknown kind", () => {
    const d = structuredClone(host("base"));
    d.spec.replicas = "two";
    mainContainer(d).livenesProbe = mainContainer(d).livenessProbe;
    expect(schemaProblems(d)).toEqual([
      "Deployment inferd: /spec/replicas must be integer",
      "Deployment inferd: /spec/template/spec/containers/0/livenesProbe is not a field of Deployment",
    ]);
    const so = structuredClone(find("overlays/cluster-keda", "ScaledObject"));
    so.spec.minReplicas = 1;
    expect(schemaProblems(so)).toEqual(["ScaledObject inferd: /spec/minReplicas is not a field of ScaledObject"]);
    expect(schemaProblems({ apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "w" } })).toEqual([
      "Widget w: no schema for example.com/v1 Widget",
    ]);
  });
});

describe("what the overlays promise", () => {
  test("single: one host, replaced not rolled, its data dir on a PersistentVolumeClaim", () => {
    const d = host("overlays/single");
    expect(d.spec.replicas).toBe(1);
    expect(d.spec.strategy.type).toBe("Recreate");
    const dataDir = envOf(d, "INFERD_DATA_DIR")!.value;
    const mount = mainContainer(d).volumeMounts.find((m: { mountPath: string }) => m.mountPath === dataDir);
    const volume = d.spec.template.spec.volumes.find((v: { name: string }) => v.name === mount.name);
    expect(Object.keys(volume).sort()).toEqual(["name", "persistentVolumeClaim"]);
    expect(
      find("overlays/single", "PersistentVolumeClaim", volume.persistentVolumeClaim.claimName).spec.accessModes,
    ).toEqual(["ReadWriteOnce"]);
    expect(envOf(d, "INFERD_DATABASE_URL")).toBeUndefined();
  });

  for (const overlay of ["overlays/cluster", "overlays/cluster-keda"] as const) {
    test(`${overlay}: two hosts or more on PostgreSQL from a Secret, each with its own data dir, a disruption budget`, () => {
      const d = host(overlay);
      expect(d.spec.replicas).toBeGreaterThanOrEqual(2);
      expect(envOf(d, "INFERD_DATABASE_URL")!.valueFrom!.secretKeyRef).toEqual({ name: "inferd-database", key: "url" });
      expect(envOf(d, "INFERD_ADMIN_TOKEN")!.valueFrom!.secretKeyRef).toEqual({ name: "inferd-admin", key: "token" });
      // Agents take work from every host: each advertises its own address.
      expect(envOf(d, "INFERD_ADVERTISE_HOST")!.valueFrom!.fieldRef!.fieldPath).toBe("status.podIP");
      const mount = mainContainer(d).volumeMounts.find(
        (m: { mountPath: string }) => m.mountPath === envOf(d, "INFERD_DATA_DIR")!.value,
      );
      expect(d.spec.template.spec.volumes.find((v: { name: string }) => v.name === mount.name).emptyDir).toBeDefined();
      const pdb = find(overlay, "PodDisruptionBudget");
      expect(pdb.spec.selector.matchLabels).toEqual(d.spec.selector.matchLabels);
      expect(pdb.spec.minAvailable).toBeGreaterThanOrEqual(1);
      expect(pdb.spec.minAvailable).toBeLessThan(d.spec.replicas);
    });
  }

  for (const overlay of OVERLAYS) {
    test(`${overlay}: the host's probes ask /healthz on its HTTP port, which the Service serves beside the agents' port`, () => {
      const d = host(overlay);
      const c = mainContainer(d);
      const { config } = loadConfig(c.args, resolveEnv(d, STAND_INS));
      const named = (port: string | number) =>
        typeof port === "number" ? port : c.ports.find((p: { name: string }) => p.name === port).containerPort;
      for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
        expect(c[probe].httpGet.path).toBe("/healthz");
        expect(named(c[probe].httpGet.port)).toBe(config.port);
      }
      const svc = find(overlay, "Service", "inferd");
      expect(svc.spec.selector).toEqual(d.spec.selector.matchLabels);
      expect(svc.spec.ports.map((p: { targetPort: string }) => named(p.targetPort)).sort()).toEqual(
        [config.port, config.tlsPort].sort(),
      );
    });

    test(`${overlay}: the GPU agents run on GPU nodes, with GPUs, joining with the pool token from a Secret and keeping their data dir on the node`, () => {
      const ds = agent(overlay);
      const spec = ds.spec.template.spec;
      expect(spec.nodeSelector).toEqual({ "nvidia.com/gpu.present": "true" });
      expect(spec.tolerations).toContainEqual({ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" });
      expect(Number(mainContainer(ds).resources.limits["nvidia.com/gpu"])).toBeGreaterThanOrEqual(1);
      expect(envOf(ds, "INFERD_JOIN_TOKEN")!.valueFrom!.secretKeyRef).toEqual({
        name: "inferd-agent-join",
        key: "token",
      });
      // The join URL is the host's Service on its agents' port.
      const url = new URL(envOf(ds, "INFERD_JOIN_URL")!.value!);
      const svc = find(overlay, "Service", url.hostname.split(".")[0]);
      expect(url.protocol).toBe("https:");
      expect(svc.spec.ports.find((p: { port: number }) => p.port === Number(url.port)).name).toBe("agents");
      expect(envOf(ds, "INFERD_CLUSTER_ADDRESS")!.valueFrom!.fieldRef!.fieldPath).toBe("status.podIP");
      const mount = mainContainer(ds).volumeMounts.find(
        (m: { mountPath: string }) => m.mountPath === envOf(ds, "INFERD_DATA_DIR")!.value,
      );
      expect(spec.volumes.find((v: { name: string }) => v.name === mount.name).hostPath.path).toBe(
        "/var/lib/inferd-agent",
      );
      // The init container hands that directory to the agent's user.
      expect(spec.initContainers[0].command.join(" ")).toContain(
        `chown ${mainContainer(ds).securityContext.runAsUser}:`,
      );
    });

    test(`${overlay}: every inferd setting in the manifests is one inferd reads, every pod is free of Service links, runs non-root`, () => {
      for (const o of objects(overlay).filter((x) => x.spec?.template)) {
        const spec = o.spec.template.spec;
        // Kubernetes would set INFERD_PORT=tcp://… in each pod for the Service named inferd.
        expect(`${o.metadata.name}: enableServiceLinks ${spec.enableServiceLinks}`).toBe(
          `${o.metadata.name}: enableServiceLinks false`,
        );
        // Every image is the one kustomization.yaml names (not a bare name pulled from Docker Hub).
        for (const c of [...spec.containers, ...(spec.initContainers ?? [])])
          expect(c.image).toMatch(/^[\w.-]+\/[\w./-]+:[\w.-]+$/);
        for (const c of spec.containers) {
          for (const e of c.env as EnvVar[])
            if (e.name.startsWith("INFERD_"))
              expect(`${e.name} known: ${KNOWN_ENV.has(e.name)}`).toBe(`${e.name} known: true`);
          expect(spec.securityContext?.runAsNonRoot ?? c.securityContext?.runAsNonRoot).toBe(true);
          expect(c.securityContext.allowPrivilegeEscalation).toBe(false);
        }
      }
      const h = loadConfig(mainContainer(host(overlay)).args, resolveEnv(host(overlay), STAND_INS));
      expect(h.rest).toEqual(["serve"]);
      expect(h.config.localAgent).toBe(false);
      const a = loadConfig(mainContainer(agent(overlay)).args, resolveEnv(agent(overlay), STAND_INS));
      expect(a.rest).toEqual(["agent"]);
      expect(a.config.joinUrl && a.config.joinToken).toBeTruthy();
      expect(a.config.clusterAddress).toBe(STAND_INS["field:status.podIP"]);
    });
  }

  test("cluster-keda: KEDA scales the host Deployment on inferd's queue-depth gauge, which Prometheus scrapes with the metrics token", async () => {
    const so = find("overlays/cluster-keda", "ScaledObject");
    const d = host("overlays/cluster-keda");
    expect(so.spec.scaleTargetRef).toEqual({ apiVersion: "apps/v1", kind: "Deployment", name: d.metadata.name });
    expect(so.spec.minReplicaCount).toBeGreaterThanOrEqual(2);
    const [trigger] = so.spec.triggers;
    expect(trigger.type).toBe("prometheus");
    const metric = /^sum\((\w+)\{namespace="([^"]+)"\}\)$/.exec(trigger.metadata.query)!;
    expect(metric[2]).toBe(d.metadata.namespace!);
    // The gauge is one inferd exposes.
    const s = await startTestServer();
    started.push({ stop: () => s.close() });
    expect(await (await s.admin("/metrics")).text()).toContain(`# TYPE ${metric[1]} gauge`);
    const sm = find("overlays/cluster-keda", "ServiceMonitor");
    const svc = find("overlays/cluster-keda", "Service", "inferd");
    for (const [k, v] of Object.entries(sm.spec.selector.matchLabels))
      expect(svc.metadata.labels?.[k]).toBe(v as string);
    expect(svc.spec.ports.map((p: { name: string }) => p.name)).toContain(sm.spec.endpoints[0].port);
    expect(sm.spec.endpoints[0].path).toBe("/metrics");
    const token = envOf(d, "INFERD_METRICS_TOKEN")!.valueFrom!.secretKeyRef!;
    expect(sm.spec.endpoints[0].authorization.credentials).toEqual({ name: token.name, key: token.key });
  });
});

describe("the manifests' command lines, run", () => {
  let single: Inferd;

  /** Starts a host as `overlay` runs it (its args and environment), on loopback ports and a temp data dir. */
  async function runHost(overlay: (typeof OVERLAYS)[number], values: Record<string, string>): Promise<Inferd> {
    const c = mainContainer(host(overlay));
    expect(c.args[0]).toBe("serve");
    const env = {
      ...resolveEnv(host(overlay), { ...STAND_INS, ...values }),
      INFERD_HOST: "127.0.0.1",
      INFERD_TLS_PORT: "0",
      INFERD_ADVERTISE_HOST: "127.0.0.1",
      INFERD_LOG_LEVEL: "warn",
    };
    const h = await startInferd({ args: c.args.slice(1), env });
    started.push(h);
    const probe = c.readinessProbe.httpGet.path;
    expect((await fetch(`${h.url}${probe}`)).status).toBe(200);
    return h;
  }

  test("the single overlay's host starts as the manifest runs it and answers its probe", async () => {
    single = await runHost("overlays/single", {});
  });

  test("the cluster overlay's host starts on PostgreSQL from its Secret and answers its probe", async () => {
    const h = await runHost("overlays/cluster", {
      "secret:inferd-database/url": (await storeEnv("postgres")).INFERD_DATABASE_URL,
    });
    const info = await (
      await fetch(`${h.url}/admin/info`, {
        headers: { authorization: `Bearer ${STAND_INS["secret:inferd-admin/token"]}` },
      })
    ).json();
    expect(info.cluster.mode).toBe("cluster");
    await h.stop();
  });

  test("the DaemonSet's agent joins the host with a pool join token, as the manifest runs it, and comes back as the same worker", async () => {
    const admin = (path: string, body?: unknown) =>
      fetch(`${single.url}${path}`, {
        method: body ? "POST" : "GET",
        headers: {
          authorization: `Bearer ${STAND_INS["secret:inferd-admin/token"]}`,
          "content-type": "application/json",
        },
        body: body ? JSON.stringify(body) : undefined,
      });
    const made = await (await admin("/admin/workers/join-tokens", { reusable: true })).json();
    const ds = agent("overlays/single");
    const dataDir = tempDir("k8s-agent");
    const env = {
      ...resolveEnv(ds, { ...STAND_INS, "secret:inferd-agent-join/token": made.token }),
      INFERD_DATA_DIR: dataDir,
      INFERD_JOIN_URL: made.join_command.split(" ")[3],
      INFERD_CLUSTER_ADDRESS: "127.0.0.1",
      FAKE_GPUS: "1x NVIDIA L4:23034",
    };
    // The container's args after the image's entrypoint (`inferd`), with the fake GPUs and runtimes.
    const run = async () => {
      const proc = Bun.spawn([...sourceBin(), ...mainContainer(ds).args], {
        env: fixtureEnv(env),
        stdout: "pipe",
        stderr: "pipe",
        stdin: "ignore",
      });
      let out = "";
      const pump = async (s: ReadableStream<Uint8Array>) => {
        for await (const chunk of s as unknown as AsyncIterable<Uint8Array>) out += new TextDecoder().decode(chunk);
      };
      void pump(proc.stdout);
      void pump(proc.stderr);
      started.push({ stop: () => (proc.kill("SIGTERM"), proc.exited) });
      const id = await waitFor(
        async () => {
          if (proc.exitCode !== null) throw new Error(`the agent exited ${proc.exitCode}: ${out}`);
          const worker = /running as worker (wk_\w+)/.exec(out)?.[1];
          const workers = worker
            ? ((await (await admin("/admin/workers")).json()) as { id: string; state: string }[])
            : [];
          return workers.find((w) => w.id === worker && w.state === "online")?.id;
        },
        { what: "the DaemonSet's agent online", timeoutMs: 30_000, detail: () => out },
      );
      proc.kill("SIGTERM");
      await proc.exited;
      return id;
    };
    const first = await run();
    expect(await run()).toBe(first);
    expect(((await (await admin("/admin/workers/join-tokens")).json()) as { uses: number }[])[0].uses).toBe(1);
  });
});
