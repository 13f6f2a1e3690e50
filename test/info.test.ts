import { afterAll, describe, expect, test } from "bun:test";
import { hostname, networkInterfaces, type NetworkInterfaceInfo } from "node:os";
import { isLoopback, joinUrlOf, lanIPv4, listenInfo } from "../src/admin/listen";
import { startTestServer, type TestServer } from "./helpers/server";
import { trafficTotals } from "../ui/components/traffic";
import { attentionOf } from "../ui/components/attention";
import type { Worker } from "../ui/lib/types";

/** A fake interface entry. */
const nic = (address: string, internal = false): NetworkInterfaceInfo => ({
  address,
  netmask: "255.255.255.0",
  family: "IPv4",
  mac: "00:00:00:00:00:00",
  internal,
  cidr: `${address}/24`,
});
const LAN = { lo: [nic("127.0.0.1", true)], docker0: [nic("172.17.0.1")], eth0: [nic("192.168.1.20")] };

describe("where inferd listens (unit)", () => {
  test("loopback addresses are recognised, wildcards are not", () => {
    for (const h of ["127.0.0.1", "127.0.1.1", "localhost", "::1", "[::1]"]) expect(isLoopback(h)).toBe(true);
    for (const h of ["0.0.0.0", "::", "192.168.1.20", "inferd.lan"]) expect(isLoopback(h)).toBe(false);
  });

  test("the LAN address is an external IPv4: 192.168 before 10 before 172.16 (container bridges), never link-local", () => {
    expect(lanIPv4(LAN)).toBe("192.168.1.20");
    expect(lanIPv4({ docker0: [nic("172.17.0.1")], wlan: [nic("203.0.113.9")] })).toBe("172.17.0.1");
    expect(
      lanIPv4({ lo: [nic("127.0.0.1", true)], wlan: [nic("169.254.3.4"), nic("203.0.113.9"), nic("10.0.0.7")] }),
    ).toBe("10.0.0.7");
    expect(lanIPv4({ lo: [nic("127.0.0.1", true)] })).toBeUndefined();
  });

  test("loopback-only: no LAN URL and the exact restart flag", () => {
    const info = listenInfo({ host: "127.0.0.1", port: 8420, tlsPort: 8421 }, LAN);
    expect(info).toEqual({
      host: "127.0.0.1",
      port: 8420,
      tls_port: 8421,
      loopback_only: true,
      lan_host: null,
      url: null,
      restart: { flag: "--host 0.0.0.0", env: "INFERD_HOST=0.0.0.0" },
    });
    expect(joinUrlOf(info)).toBe("https://127.0.0.1:8421");
  });

  test("every interface: the LAN address of this machine is what clients and agents use", () => {
    const info = listenInfo({ host: "0.0.0.0", port: 8420, tlsPort: 8421 }, { eth0: [nic("192.168.1.20")] });
    expect(info).toMatchObject({
      loopback_only: false,
      lan_host: "192.168.1.20",
      url: "http://192.168.1.20:8420",
      restart: null,
    });
    expect(joinUrlOf(info)).toBe("https://192.168.1.20:8421");
    expect(listenInfo({ host: "::", port: 1, tlsPort: 2 }, {}).lan_host).toBe(hostname());
  });

  test("an advertised host wins; a bound address is used as it is (IPv6 in brackets)", () => {
    expect(listenInfo({ host: "0.0.0.0", port: 80, tlsPort: 443, advertiseHost: "gpu.lan" }, LAN).url).toBe(
      "http://gpu.lan:80",
    );
    const v6 = listenInfo({ host: "fd00::5", port: 80, tlsPort: 443 }, LAN);
    expect(v6.url).toBe("http://[fd00::5]:80");
    expect(joinUrlOf(v6)).toBe("https://[fd00::5]:443");
  });
});

describe("GET /admin/info → listen, and the join command", () => {
  const servers: TestServer[] = [];
  afterAll(async () => void (await Promise.all(servers.map((s) => s.close()))));
  const start = async (env: Record<string, string>) => {
    const s = await startTestServer(env);
    servers.push(s);
    return s;
  };
  const joinCommand = async (s: TestServer) =>
    (await (await s.admin("/admin/workers", { body: { name: `w${Date.now()}` } })).json()).join_command as string;

  test("the default (loopback): loopback_only, no LAN URL, the restart flag; the join command names 127.0.0.1", async () => {
    const s = await start({});
    const res = await s.admin("/admin/info");
    expect(res.status).toBe(200);
    const { listen } = await res.json();
    expect(listen).toEqual({
      host: "127.0.0.1",
      port: s.port,
      tls_port: s.tlsPort,
      loopback_only: true,
      lan_host: null,
      url: null,
      restart: { flag: "--host 0.0.0.0", env: "INFERD_HOST=0.0.0.0" },
    });
    expect(await joinCommand(s)).toStartWith(`inferd agent join https://127.0.0.1:${s.tlsPort} --token `);
  });

  test("--advertise-host: the URL and the join command use it", async () => {
    const s = await start({ INFERD_ADVERTISE_HOST: "inferd.test" });
    const { listen } = await (await s.admin("/admin/info")).json();
    expect(listen).toMatchObject({
      loopback_only: true,
      lan_host: "inferd.test",
      url: `http://inferd.test:${s.port}`,
      restart: { flag: "--host 0.0.0.0" },
    });
    expect(await joinCommand(s)).toStartWith(`inferd agent join https://inferd.test:${s.tlsPort} --token `);
  });

  test("--host 0.0.0.0: this machine's LAN address in the URL and the join command", async () => {
    const s = await start({ INFERD_HOST: "0.0.0.0" });
    const lan = lanIPv4(networkInterfaces()) ?? hostname();
    const { listen } = await (await s.admin("/admin/info")).json();
    expect(listen).toMatchObject({ host: "0.0.0.0", loopback_only: false, lan_host: lan, restart: null });
    expect(listen.url).toBe(`http://${lan}:${s.port}`);
    expect(await joinCommand(s)).toContain(`https://${lan}:${s.tlsPort} `);
  });

  test("without the admin token the info is refused in the contract's shape", async () => {
    const s = servers[0];
    const res = await s.call("/admin/info", undefined);
    expect(res.status).toBe(401);
    expect((await res.json()).error.code).toBeString();
  });
});

describe("the overview's figures (unit)", () => {
  test("traffic totals add each rate times the bucket width over every workload", () => {
    const points = (rps: number, errors: number, tokens: number) => ({
      rps,
      errors_per_s: errors,
      tokens_per_s: tokens,
    });
    expect(
      trafficTotals({
        interval_s: 10,
        workloads: [{ points: [points(0.3, 0.1, 5), points(0, 0, 0)] }, { points: [points(0.1, 0, 2.5)] }],
      }),
    ).toEqual({ requests: 4, errors: 1, tokens: 75 });
    expect(trafficTotals({ interval_s: 10, workloads: [] })).toEqual({ requests: 0, errors: 0, tokens: 0 });
  });

  test("attention lists failed replicas and workers that went offline, not workers that never joined", () => {
    const worker = (name: string, state: "online" | "offline", seen: string | null, replicaStates: string[]) =>
      ({
        id: name,
        name,
        state,
        last_seen_at: seen,
        replicas: replicaStates.map((s, i) => ({
          assignment_id: `${name}-${i}`,
          state: s,
          workload: "p/w",
          workload_id: "wl_1",
        })),
      }) as unknown as Worker;
    const { failed, offline } = attentionOf([
      worker("a", "online", "2026-01-01T00:00:00Z", ["ready", "failed"]),
      worker("b", "offline", "2026-01-01T00:00:00Z", []),
      worker("new", "offline", null, []),
    ]);
    expect(failed.map((r) => `${r.worker}:${r.assignment_id}`)).toEqual(["a:a-1"]);
    expect(offline.map((w) => w.name)).toEqual(["b"]);
  });
});

describe("GET /admin/projects counts", () => {
  test("each project has its workload count and live (unrevoked) key count", async () => {
    const s = await startTestServer({});
    try {
      for (const slug of ["empty", "busy"])
        expect((await s.admin("/admin/projects", { body: { name: slug, slug } })).status).toBe(201);
      const keys = await Promise.all(
        [1, 2, 3].map(async (i) =>
          (await s.admin("/admin/projects/busy/keys", { body: { name: `k${i}`, type: "sdk" } })).json(),
        ),
      );
      expect((await s.admin(`/admin/keys/${keys[0].id}`, { method: "DELETE" })).status).toBe(200);
      for (const name of ["a", "b"])
        expect(
          (await s.admin("/admin/projects/busy/workloads", { body: { name, backend: "ollama", model_name: "llama3" } }))
            .status,
        ).toBe(201);
      const list = await (await s.admin("/admin/projects")).json();
      expect(
        list.map((p: { slug: string; workload_count: number; key_count: number }) => [
          p.slug,
          p.workload_count,
          p.key_count,
        ]),
      ).toEqual([
        ["empty", 0, 0],
        ["busy", 2, 2],
      ]);
    } finally {
      await s.close();
    }
  });
});
