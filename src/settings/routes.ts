/** The admin routes of the settings in force: list them all, change or reset the runtime ones. */
import { Elysia } from "elysia";
import { z } from "zod";
import type { Settings } from "./service";
import { jsonBody } from "../http";
import { thisCommand } from "../invocation";

/** What this module uses of the app's dependencies. */
interface Deps {
  settings: Settings;
}

/** Body of `PATCH /admin/settings`: setting keys to values (as the flag takes them, or JSON), `null` to reset one. */
const SettingsPatch = z.record(
  z.string().max(100),
  z.union([z.string().max(10_000), z.number(), z.boolean(), z.array(z.string().max(1000)).max(100), z.null()]),
);

/** `GET /admin/settings` (every setting in force, its flag, env and source) and `PATCH /admin/settings` (change or reset the runtime ones). */
export const settingsRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .get("/settings", () => ({ command: thisCommand(), settings: deps.settings.view() }), {
      detail: {
        summary:
          "Every setting in force: key, flag, env, value (secrets: set/unset), default, source (flag, env, default, dashboard), description, and whether it can change while serving (`runtime`); `command` is how this server was started, for hints",
      },
    })
    .patch("/settings", async ({ body }) => ({ command: thisCommand(), settings: await deps.settings.change(body) }), {
      ...jsonBody(SettingsPatch),
      detail: {
        summary:
          "Change runtime settings ({key: value}, checked as the flag's value) or reset them to the flag, environment or default ({key: null}); stored, audited, applied at once on every host",
      },
    });
