/**
 * The admin's cloud GPU workers: `POST /admin/cloud/workers` asks a provider for a pod running an
 * agent that joins as a worker; `GET /admin/cloud/pods` lists every pod with its price and billed
 * time. A cloud worker is deleted through `DELETE /admin/workers/:id` (./service.ts `remove`).
 */
import { Elysia } from "elysia";
import { z } from "zod";
import { jsonBody } from "../http";
import type { CloudWorkers } from "./service";

const CloudWorkerCreate = z.strictObject({
  name: z
    .string()
    .trim()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "letters, digits, . _ -"),
  provider: z.enum(["runpod", "kubernetes"]),
  gpu_type: z.string().trim().min(1).max(200),
  gpus: z.number().int(),
});

/** What these routes use of the app's dependencies. */
interface Deps {
  cloud: CloudWorkers;
}

export const cloudRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin/cloud", detail: { tags: ["admin"] } })
    .post(
      "/workers",
      async ({ body, set }) => {
        const made = await deps.cloud.create(body);
        set.status = 201;
        return made;
      },
      {
        ...jsonBody(CloudWorkerCreate),
        detail: {
          summary: "Add a cloud GPU worker: a pod of 1, 2, 4 or 8 GPUs at RunPod or on Kubernetes, joining as a worker",
        },
      },
    )
    .get("/pods", () => deps.cloud.pods(), {
      detail: { summary: "Every cloud pod inferd made: provider, GPUs, price per hour, billed time and cost, state" },
    });
